// The Hyperparameters view (#/hparams?search=NAME, or #/hparams for every task of the project):
// the runs' hyperparameters and metrics as a table (sortable, a filter per column) and as
// parallel coordinates drawn here in SVG (one axis per column, categorical axes for strings, a
// drag on an axis keeps a range, lines coloured by the objective). Clicking a run opens its
// curves (#/curves?tasks=ID). Runs with no metric yet appear, on a "none" mark under the axis.
"use strict";

const hparamsState = {data: null, sort: {key: "id", dir: 1}, filters: {}, brushes: {}};

// A cell's number ({"$numberDouble": "NaN"} and infinities are not placed on an axis), or null.
function hpNumber(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function hpCell(row, key) {
  if (key === "id") return row.id;
  if (key === "status") return row.status;
  return row.values[key];
}

// ---- filters: ">0.8", "<=3", "0.1..0.5", "=32" or a bare number for numbers; a substring else.
function parseFilter(text, type) {
  const t = text.trim();
  if (!t) return null;
  if (type !== "number") return v => formatValue(v).toLowerCase().includes(t.toLowerCase());
  let m = t.match(/^(-?[\d.eE+-]+)\s*\.\.\s*(-?[\d.eE+-]+)$/);
  if (m) {
    const [lo, hi] = [Number(m[1]), Number(m[2])];
    if (Number.isNaN(lo) || Number.isNaN(hi)) return undefined;
    return v => hpNumber(v) !== null && v >= lo && v <= hi;
  }
  m = t.match(/^(>=|<=|>|<|=)?\s*(-?[\d.eE+-]+)$/);
  if (!m || Number.isNaN(Number(m[2]))) return undefined;  // not understood: shown as invalid
  const x = Number(m[2]);
  const test = {">=": (a) => a >= x, "<=": (a) => a <= x, ">": (a) => a > x, "<": (a) => a < x}[m[1]] || ((a) => a === x);
  return v => hpNumber(v) !== null && test(v);
}

// ---- axes of the parallel coordinates ----------------------------------------------------------
const PC = {height: 300, top: 30, bottom: 40, left: 50, right: 60};

// One axis per column: numbers on a linear (or, for a positive range over two decades, log)
// scale with the largest at the top; strings as evenly spaced categories. y(v) is null for a
// value with no place on the axis (missing, NaN, infinite): those runs sit on the "none" mark.
function makeAxis(column, rows) {
  const values = rows.map(r => r.values[column.name]);
  const inner = PC.height - PC.top - PC.bottom;
  if (column.type === "number") {
    const nums = values.map(hpNumber).filter(v => v !== null);
    let lo = Math.min(...nums), hi = Math.max(...nums);
    if (!nums.length) [lo, hi] = [0, 1];
    const log = lo > 0 && hi / lo >= 100;
    const f = log ? Math.log10 : (x => x);
    const [flo, fhi] = [f(lo), f(hi)];
    const span = fhi - flo || 1;
    const y = v => (hpNumber(v) === null ? null : PC.top + inner - ((f(v) - flo) / span) * inner);
    const ticks = lo === hi ? [lo] : [lo, log ? Math.pow(10, (flo + fhi) / 2) : (lo + hi) / 2, hi];
    return {column, y, log, ticks, invert: (py) => (log ? Math.pow(10, flo + ((PC.top + inner - py) / inner) * span)
                                                          : flo + ((PC.top + inner - py) / inner) * span)};
  }
  const cats = [...new Set(values.filter(v => v !== null && v !== undefined).map(v => String(v)))].sort();
  const step = cats.length > 1 ? inner / (cats.length - 1) : 0;
  const pos = new Map(cats.map((c, i) => [c, PC.top + inner - (cats.length > 1 ? i * step : inner / 2)]));
  return {column, cats, y: v => (v === null || v === undefined ? null : pos.get(String(v)) ?? null)};
}

// A run's point on an axis: its value's place, or the "none" mark under the axis.
function axisY(axis, v) {
  const y = axis.y(v);
  return y === null ? PC.height - PC.bottom + 18 : y;
}

// Colour by the objective: red (worst) to green (best); grey without a value.
function colourScale(data, rows) {
  const key = data.objective?.name ?? data.columns.find(c => c.kind === "metric" && c.type === "number")?.name;
  if (!key) return () => "#2f6fde";
  const nums = rows.map(r => hpNumber(r.values[key])).filter(v => v !== null);
  const [lo, hi] = [Math.min(...nums), Math.max(...nums)];
  const maximize = data.objective ? data.objective.maximize : true;
  return row => {
    const v = hpNumber(row.values[key]);
    if (v === null) return "#9aa1ad";
    let t = hi > lo ? (v - lo) / (hi - lo) : 1;
    if (!maximize) t = 1 - t;
    return `hsl(${Math.round(t * 120)}, 70%, 42%)`;
  };
}

// The runs the brushes keep (every brushed axis's range holds the run's value).
function inBrushes(row, axes) {
  for (const axis of axes) {
    const b = hparamsState.brushes[axis.column.name];
    if (!b) continue;
    const y = axis.y(row.values[axis.column.name]);
    if (y === null || y < b.y0 || y > b.y1) return false;
  }
  return true;
}

function keptRows() {
  const data = hparamsState.data;
  const columns = [{name: "id", type: "string"}, {name: "status", type: "string"}, ...data.columns];
  const tests = columns.map(c => [c.name, parseFilter(hparamsState.filters[c.name] || "", c.type)])
                       .filter(([, f]) => typeof f === "function");
  const axes = hparamsState.axes || [];
  return data.rows.filter(r => tests.every(([k, f]) => f(hpCell(r, k))) && inBrushes(r, axes));
}

function drawParallel(width) {
  const data = hparamsState.data;
  const rows = data.rows;
  const axes = data.columns.map(c => makeAxis(c, rows));
  hparamsState.axes = axes;
  const gap = axes.length > 1 ? (width - PC.left - PC.right) / (axes.length - 1) : 0;
  const x = i => PC.left + i * gap;
  const colour = colourScale(data, rows);
  const kept = new Set(keptRows().map(r => r.id));
  const lines = svg("g", {class: "pc-lines"});
  // Kept runs last, so they are drawn over the others.
  for (const row of [...rows].sort((a, b) => kept.has(a.id) - kept.has(b.id))) {
    const points = axes.map((a, i) => `${x(i)},${axisY(a, row.values[a.column.name])}`).join(" ");
    const line = svg("polyline", {points, stroke: colour(row), class: kept.has(row.id) ? "pc-line kept" : "pc-line faded",
                                  "data-id": row.id});
    line.append(svg("title", {}, `${row.id} (${row.status})`));
    if (row.task_id !== null) line.addEventListener("click", () => { location.hash = `#/curves?tasks=${row.task_id}`; });
    lines.append(line);
  }
  const axisGroups = axes.map((a, i) => drawAxis(a, x(i), i ? gap : PC.left));
  return svg("svg", {id: "hparams-parallel", width, height: PC.height, viewBox: `0 0 ${width} ${PC.height}`},
             lines, ...axisGroups);
}

function tickText(axis, v) {
  return axis.log ? v.toExponential(1) : formatValue(v);
}

// `text` cut to what `room` px of 10 px labels hold ("…" at the end), the whole in its <title>:
// a long category must not run over the axis to its left.
function fittedLabel(attrs, text, room) {
  const fits = Math.max(4, Math.floor(room / 6));
  const label = svg("text", attrs, text.length > fits ? text.slice(0, fits - 1) + "…" : text);
  if (text.length > fits) label.append(svg("title", {}, text));
  return label;
}

// `room`: px from this axis to the one on its left (where its labels, right-aligned, may go).
function drawAxis(axis, x, room) {
  const name = axis.column.name;
  const g = svg("g", {class: `pc-axis pc-${axis.column.kind}`, "data-axis": name, transform: `translate(${x},0)`});
  g.append(svg("line", {x1: 0, x2: 0, y1: PC.top, y2: PC.height - PC.bottom, class: "pc-spine"}));
  g.append(svg("text", {x: 0, y: PC.top - 12, class: "pc-name", "text-anchor": "middle"}, name));
  const labels = axis.cats ? axis.cats.map(c => [c, axis.y(c)]) : axis.ticks.map(t => [tickText(axis, t), axis.y(t)]);
  for (const [text, y] of labels) {
    g.append(svg("line", {x1: -4, x2: 0, y1: y, y2: y, class: "pc-tick"}));
    g.append(fittedLabel({x: -7, y: y + 4, "text-anchor": "end", class: "pc-label"}, String(text), room - 14));
  }
  g.append(svg("text", {x: -7, y: PC.height - PC.bottom + 22, "text-anchor": "end", class: "pc-label pc-none"}, "none"));
  const brush = hparamsState.brushes[name];
  const band = svg("rect", {x: -7, width: 14, class: "pc-brush", y: brush ? brush.y0 : 0,
                            height: brush ? brush.y1 - brush.y0 : 0});
  band.style.display = brush ? "" : "none";
  if (brush) {
    g.dataset.rangeLo = brush.lo;
    g.dataset.rangeHi = brush.hi;
  }
  const hit = svg("rect", {x: -12, y: PC.top - 4, width: 24, height: PC.height - PC.top - PC.bottom + 8, class: "pc-hit"});
  g.append(band, hit);
  addBrushing(axis, g, hit, band);
  return g;
}

// A drag along an axis keeps the runs whose value lies in the dragged range; a click without a
// drag clears the axis's range.
function addBrushing(axis, g, hit, band) {
  const name = axis.column.name;
  hit.addEventListener("pointerdown", down => {
    down.preventDefault();
    const top = g.ownerSVGElement.getBoundingClientRect().top;
    const y0 = down.clientY - top;
    let y1 = y0;
    hit.setPointerCapture(down.pointerId);
    const move = e => {
      y1 = e.clientY - top;
      band.style.display = "";
      band.setAttribute("y", Math.min(y0, y1));
      band.setAttribute("height", Math.abs(y1 - y0));
    };
    const up = () => {
      hit.removeEventListener("pointermove", move);
      hit.removeEventListener("pointerup", up);
      if (Math.abs(y1 - y0) < 3) delete hparamsState.brushes[name];
      else {
        const [a, b] = [Math.min(y0, y1), Math.max(y0, y1)];
        const range = {y0: a, y1: b};
        if (axis.invert) [range.lo, range.hi] = [axis.invert(b), axis.invert(a)];
        else {
          const inside = axis.cats.filter(c => axis.y(c) >= a && axis.y(c) <= b);
          [range.lo, range.hi] = [inside[0] ?? "", inside[inside.length - 1] ?? ""];
        }
        hparamsState.brushes[name] = range;
      }
      renderHparams();
    };
    hit.addEventListener("pointermove", move);
    hit.addEventListener("pointerup", up);
  });
}

// ---- the table -----------------------------------------------------------------------------------
function compareCells(a, b) {
  const [na, nb] = [hpNumber(a), hpNumber(b)];
  if (na !== null || nb !== null) {
    if (na === null) return 1;  // no value last, whichever the direction
    if (nb === null) return -1;
    return na - nb;
  }
  return formatValue(a).localeCompare(formatValue(b), undefined, {numeric: true});
}

function drawTable(rows) {
  const data = hparamsState.data;
  const columns = [{name: "id", type: "string"}, {name: "status", type: "string"}, ...data.columns];
  const {key, dir} = hparamsState.sort;
  const sorted = [...rows].sort((a, b) => {
    const [va, vb] = [hpCell(a, key), hpCell(b, key)];
    const none = (v) => hpNumber(v) === null && (v === null || v === undefined || typeof v === "object");
    if (none(va) !== none(vb)) return none(va) ? 1 : -1;  // runs with no value stay last
    return dir * compareCells(va, vb) || compareCells(a.id, b.id);
  });
  const headers = columns.map(c => el("th", {class: `sortable ${c.name === key ? (dir > 0 ? "sorted-asc" : "sorted-desc") : ""}`,
                                             "data-key": c.name, onclick: () => {
    hparamsState.sort = {key: c.name, dir: c.name === key ? -dir : (c.kind === "metric" ? -1 : 1)};
    renderHparams();
  }}, c.name));
  const filters = columns.map(c => {
    const input = el("input", {"data-filter": c.name, placeholder: c.type === "number" ? ">0.8, 1..5" : "text",
                               spellcheck: "false"});
    input.value = hparamsState.filters[c.name] || "";
    if (parseFilter(input.value, c.type) === undefined) input.classList.add("invalid");
    const apply = () => {
      if ((hparamsState.filters[c.name] || "") === input.value) return;
      hparamsState.filters[c.name] = input.value;
      renderHparams();
      document.querySelector(`#hparams-table input[data-filter="${CSS.escape(c.name)}"]`)?.focus();
    };
    input.addEventListener("change", apply);
    input.addEventListener("keydown", e => { if (e.key === "Enter") apply(); });
    return el("th", {class: "filter"}, input);
  });
  const body = sorted.map(r => {
    const tr = el("tr", {"data-id": r.id, "data-task": r.task_id, class: r.task_id !== null ? "clickable" : ""},
                  ...columns.map(c => {
                    const v = hpCell(r, c.name);
                    return el("td", {"data-col": c.name, class: c.type === "number" ? "num" : ""},
                              c.name === "status" ? el("span", {class: `status status-${r.status}`}, v) : formatValue(v));
                  }));
    if (r.task_id !== null) tr.addEventListener("click", () => { location.hash = `#/curves?tasks=${r.task_id}`; });
    return tr;
  });
  return el("table", {id: "hparams-table"}, el("thead", {}, el("tr", {}, ...headers), el("tr", {}, ...filters)),
            el("tbody", {}, ...body));
}

// ---- the view ------------------------------------------------------------------------------------
function renderHparams() {
  const data = hparamsState.data;
  const page = document.getElementById("hparams-body");
  if (!page) return;
  const width = Math.max(600, page.clientWidth || 1200);
  const parallel = drawParallel(width);
  const rows = keptRows();
  const brushed = Object.keys(hparamsState.brushes);
  const summary = el("p", {class: "muted", id: "hparams-count"},
                     `${rows.length} of ${data.rows.length} ${data.source === "search" ? "trials" : "tasks"}`,
                     brushed.length ? ` (ranges on ${brushed.join(", ")}; click an axis to clear its range)` : "");
  page.replaceChildren(parallel, summary, drawTable(rows));
}

async function showHparams(gen, arg, params) {
  const search = params.get("search") || "";
  const [data, searches] = await Promise.all([
    api(`/api/hparams${search ? "?search=" + encodeURIComponent(search) : ""}`),
    api("/api/searches"),
  ]);
  if (gen !== viewGeneration) return;
  // Each visit starts from the runs in id order, with no filter or range.
  Object.assign(hparamsState, {data, sort: {key: "id", dir: 1}, filters: {}, brushes: {}});
  const picker = el("select", {id: "hparams-source"}, el("option", {value: ""}, "all tasks of the project"),
                    ...searches.searches.map(s => el("option", {value: s.name}, `search ${s.name} (${s.oracle})`)));
  picker.value = search;
  picker.addEventListener("change", () => {
    location.hash = picker.value ? `#/hparams?search=${encodeURIComponent(picker.value)}` : "#/hparams";
  });
  const objective = data.objective ? `colour: ${data.objective.name} (${data.objective.maximize ? "higher" : "lower"} is better, green)`
                                   : "colour: the first metric";
  main().replaceChildren(
      el("h1", {}, "Hyperparameters", data.search ? ": " : "", data.search ?? ""),
      el("div", {class: "toolbar"}, el("label", {for: "hparams-source"}, "runs"), picker,
         data.search ? el("a", {href: `#/searches/${encodeURIComponent(data.search)}`}, "the search") : null,
         el("span", {class: "muted"}, objective)),
      el("div", {id: "hparams-body"}));
  renderHparams();
}

views.hparams = {show: showHparams};
