// The Curves view (#/curves): any metric of any runs on one uPlot chart against the step (or
// epoch), the relative time or the wall time. Runs come from /api/runs (tasks' epoch reports,
// training logs, TensorBoard event files under --logdir); each series is reduced on the server
// to a few points per pixel that keep every bucket's minimum and maximum (/api/scalars), and
// smoothed there with TensorBoard's debiased moving average over the whole series, so the
// smoothed value at a point is TensorBoard's. NaN and infinities are never chart values: the
// server sends them as marks, drawn as triangles on the chart's edges and listed below it. The
// log scale leaves out (and counts) non-positive points. A logdir run's histograms are drawn as
// TensorBoard's distributions (percentile bands over the steps).
//
// URL: #/curves?runs=SOURCE:RUN,...&tag=T&x=step|relative|wall&smoothing=W&log=1, and the agreed
// shortcuts ?tasks=ID,ID (their epoch reports) and ?logdir_run=RUN.
"use strict";

const curvesColors = ["#2f6fde", "#d9480f", "#116329", "#9c36b5", "#c2255c", "#0b7285", "#5c940d", "#e67700"];
let curvesChart = null, distChart = null, curvesResize = null;

function curvesState(params) {
  const runs = [];
  for (const r of (params.get("runs") || "").split(",").filter(Boolean)) {
    const at = r.indexOf(":");
    if (at > 0) runs.push({source: r.slice(0, at), run: r.slice(at + 1)});
  }
  for (const id of (params.get("tasks") || "").split(",").filter(Boolean)) runs.push({source: "epochs", run: id});
  if (params.get("logdir_run")) runs.push({source: "logdir", run: params.get("logdir_run")});
  const smoothing = Number(params.get("smoothing") ?? 0.6);
  // A URL that names runs (even none: every box unticked) is followed; one that names none gets the default.
  const named = params.has("runs") || params.has("tasks") || params.has("logdir_run");
  return {
    runs, named, tag: params.get("tag") || "", x: ["step", "relative", "wall"].includes(params.get("x")) ? params.get("x") : "step",
    smoothing: smoothing >= 0 && smoothing < 1 ? smoothing : 0.6, log: params.get("log") === "1", hist: params.get("hist") || "",
    reduce: params.get("reduce") !== "0",
  };
}

const runKey = r => `${r.source}:${r.run}`;

// The URL of the state, written without a new navigation (replaceState fires no hashchange).
function curvesSaveUrl(st) {
  const q = new URLSearchParams({runs: st.runs.map(runKey).join(","), tag: st.tag, x: st.x, smoothing: String(st.smoothing)});
  if (st.log) q.set("log", "1");
  if (st.hist) q.set("hist", st.hist);
  if (!st.reduce) q.set("reduce", "0");
  history.replaceState(null, "", `#/curves?${q}`);
}

function hparamsText(h) {
  const values = Object.entries(h.hparams).map(([k, v]) => `${k}=${formatValue(v)}`).join(", ");
  return `hparams ${values}; ${h.status}`;
}

// The runs list: a checkbox per run, grouped by source.
function runsPanel(all, st, onChange) {
  const groups = {epochs: "Tasks' epoch reports", logs: "Training logs", logdir: "Event files (--logdir)"};
  const selected = new Set(st.runs.map(runKey));
  const panel = el("div", {id: "curves-runs"});
  for (const [source, title] of Object.entries(groups)) {
    const runs = all.filter(r => r.source === source);
    if (!runs.length) continue;
    panel.append(el("h3", {}, title));
    for (const r of runs) {
      const box = el("input", {type: "checkbox", "data-run": runKey(r)});
      box.checked = selected.has(runKey(r));
      box.addEventListener("change", () => onChange(r, box.checked));
      const extra = r.hparams ? el("div", {class: "muted small", "data-hparams": runKey(r)}, hparamsText(r.hparams)) : null;
      const tags = r.tags.length ? `${r.tags.length} metric${r.tags.length > 1 ? "s" : ""}` : "no scalars";
      panel.append(el("label", {class: "run-choice", title: r.tags.join(", ")}, box, " ", r.name,
                      el("span", {class: "muted small"}, ` ${tags}${r.histograms?.length ? `, ${r.histograms.length} histograms` : ""}`)));
      if (extra) panel.append(extra);
    }
  }
  if (!all.length) panel.append(el("p", {class: "muted"}, "Nothing to plot yet: no task reported an epoch, no training logs, no --logdir."));
  return panel;
}

// Index of the point of `xs` (ascending) nearest to x.
function nearest(xs, x) {
  let lo = 0, hi = xs.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo > 0 && Math.abs(xs[lo - 1] - x) <= Math.abs(xs[lo] - x) ? lo - 1 : lo;
}

// The legend: one row per run with its value and smoothed value at the cursor, the series'
// max and min as received (after the reduction) and its marks.
function legendRows(series, st) {
  return series.map(s => {
    const attrs = {"data-run": runKey(s.run), "data-points": s.data?.xs.length ?? 0};
    if (s.data) {
      const ys = s.data.ys;
      // Of the points received (after the reduction): the spike must be among them.
      attrs["data-max"] = ys.length ? ys.reduce((a, b) => Math.max(a, b), -Infinity) : "";
      attrs["data-min"] = ys.length ? ys.reduce((a, b) => Math.min(a, b), Infinity) : "";
      attrs["data-count"] = s.data.count;
      attrs["data-reduced"] = s.data.reduced;
      attrs["data-marks"] = s.data.marks.length;
      attrs["data-dropped"] = s.dropped;
    }
    const swatch = el("span", {class: "swatch", style: `background:${s.color}`});
    const csv = el("a", {href: `/api/scalars.csv?${new URLSearchParams({source: s.run.source, run: s.run.run, tag: st.tag})}`,
                         download: "", class: "csv"}, "CSV");
    return el("tr", attrs,
              el("td", {}, swatch, " ", s.name),
              el("td", {class: "num", "data-col": "step"}), el("td", {class: "num", "data-col": "value"}),
              el("td", {class: "num", "data-col": "smoothed"}),
              el("td", {class: "num", "data-col": "max"}, s.data ? formatValue(s.data.max) : s.run.missing || !st.tag ? "" : `no ${st.tag}`),
              el("td", {"data-col": "notes"}, s.notes), el("td", {}, s.data ? csv : null));
  });
}

// Updates the legend for the cursor's x (every run's nearest point; the last ones without a cursor).
function showAtCursor(u, series) {
  const idx = u.cursor.idx;
  const x = idx === null || idx === undefined ? null : u.data[0][idx];
  for (const s of series) {
    const row = document.querySelector(`#curves-legend tr[data-run="${CSS.escape(runKey(s.run))}"]`);
    if (!row || !s.data || !s.data.xs.length) continue;
    const i = x === null ? s.data.xs.length - 1 : nearest(s.data.xs, x);
    const cell = c => row.querySelector(`[data-col="${c}"]`);
    cell("step").textContent = s.data.steps[i];
    cell("value").textContent = formatValue(s.data.ys[i]);
    cell("value").dataset.value = s.data.ys[i];
    cell("smoothed").textContent = formatValue(s.data.smoothed[i]);
    cell("smoothed").dataset.value = s.data.smoothed[i];
    row.dataset.step = s.data.steps[i];
  }
}

// NaN / +Inf / -Inf (and, on a log scale, non-positive points) as marks on the plot's edges.
function drawMarks(u, series) {
  const ctx = u.ctx, {left, top, width, height} = u.bbox;
  const r = 5 * devicePixelRatio;
  ctx.save();
  for (const s of series) {
    if (!s.data) continue;
    const marks = s.data.marks.concat(s.droppedMarks);
    for (const m of marks) {
      const x = u.valToPos(m.x, "x", true);
      if (x < left - 1 || x > left + width + 1) continue;
      ctx.fillStyle = s.color;
      ctx.strokeStyle = s.color;
      ctx.beginPath();
      if (m.value === "Infinity") {  // at the top, pointing up
        ctx.moveTo(x, top); ctx.lineTo(x - r, top + 2 * r); ctx.lineTo(x + r, top + 2 * r); ctx.fill();
      } else if (m.value === "-Infinity" || m.value === "non-positive") {  // at the bottom, pointing down
        ctx.moveTo(x, top + height); ctx.lineTo(x - r, top + height - 2 * r); ctx.lineTo(x + r, top + height - 2 * r);
        if (m.value === "-Infinity") ctx.fill(); else { ctx.closePath(); ctx.stroke(); }
      } else {  // NaN: a hollow circle at the top
        ctx.lineWidth = 2 * devicePixelRatio;
        ctx.arc(x, top + r + 2, r, 0, 2 * Math.PI);
        ctx.stroke();
      }
    }
  }
  ctx.restore();
}

function axisLabel(st, series) {
  if (st.x === "wall") return "wall time";
  if (st.x === "relative") return "seconds since the run's first point";
  return series.every(s => s.run.source !== "logdir") ? "epoch" : "step";
}

function drawCurves(box, series, st) {
  curvesChart?.destroy();
  curvesChart = null;
  window.curvesChart = null;
  const withData = series.filter(s => s.data && s.data.xs.length);
  box.dataset.series = withData.length;
  if (!withData.length || typeof uPlot === "undefined") return;
  // One x column for every run (uPlot.join fills the gaps with null; spanGaps draws across them).
  const tables = withData.map(s => {
    const keep = v => (st.log && !(v > 0) ? null : v);
    return [s.data.xs, s.data.ys.map(keep), s.data.smoothed.map(keep)];
  });
  const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
  const smoothing = st.smoothing > 0;
  const uSeries = [{label: st.x}];
  for (const s of withData) {
    // A run of a few points (a first-round Hyperband trial has one) would be no line at all: dots.
    const few = s.data.xs.length <= 3;
    const points = {show: few, size: 8, fill: s.color, stroke: s.color};
    uSeries.push({label: s.name, stroke: smoothing ? s.color + "55" : s.color, width: 1, spanGaps: true, points: few && !smoothing ? points : {show: false}});
    uSeries.push({label: `${s.name} (smoothed)`, stroke: s.color, width: 2, spanGaps: true, points: few && smoothing ? points : {show: false}, show: smoothing});
  }
  // One x for every point (runs of one epoch): uPlot would show 0..100 (min == max padded
  // before a range function sees it, hence the data); centre the x instead.
  const xRange = (u, min, max) => {
    const xs = u.data[0];
    return xs.length && xs[0] === xs[xs.length - 1] ? [xs[0] - 1, xs[0] + 1] : [min, max];
  };
  // Epochs and steps are whole numbers: no ticks at 0.1 steps.
  const wholeIncrs = [1, 2, 5].flatMap(m => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9].map(p => m * p)).sort((a, b) => a - b);
  const opts = {
    width: Math.max(300, box.clientWidth || 900), height: 380,
    scales: {x: {time: st.x === "wall", range: xRange}, y: st.log ? {distr: 3, log: 10} : {}},
    axes: [st.x === "step" ? {label: axisLabel(st, withData), incrs: wholeIncrs} : {label: axisLabel(st, withData)}, {label: st.tag, size: 70}],
    series: uSeries,
    legend: {show: false},
    cursor: {points: {show: false}},
    // drawnAt: ms since the navigation when the canvas was last drawn (bench/ui_curves.mjs).
    hooks: {draw: [u => drawMarks(u, withData), () => { box.dataset.drawnAt = performance.now().toFixed(1); }],
            setCursor: [u => showAtCursor(u, withData)]},
  };
  curvesChart = new uPlot(opts, data, box);
  window.curvesChart = curvesChart;  // for the browser tests and the console
  showAtCursor(curvesChart, withData);
}

function marksList(series, st) {
  const items = [];
  for (const s of series) {
    if (!s.data) continue;
    for (const m of s.data.marks) items.push(el("li", {"data-mark": m.value, "data-run": runKey(s.run), "data-step": m.step},
                                               `${s.name}: ${m.value} at step ${m.step}`));
    for (const m of s.droppedMarks) items.push(el("li", {"data-mark": "non-positive", "data-run": runKey(s.run), "data-step": m.step},
                                                  `${s.name}: ${formatValue(m.y)} at step ${m.step}, left out of the log scale`));
  }
  if (!items.length) return el("p", {id: "curves-marks", class: "muted"}, "No NaN or infinite values.");
  const shown = items.slice(0, 200);
  return el("div", {id: "curves-marks"},
            el("p", {class: "muted"}, "Values that are no points of the chart (NaN and ± infinity at the top and bottom edges):"),
            el("ul", {}, ...shown), items.length > shown.length ? el("p", {class: "muted"}, `and ${items.length - shown.length} more`) : null);
}

// A logdir run's histogram as TensorBoard's distribution: the percentile lines (min, ±1..3
// standard deviations of a normal, median, max) over the steps, bands between them.
async function drawDistribution(box, run, tag, gen) {
  distChart?.destroy();
  distChart = null;
  const d = await api(`/api/histograms?${new URLSearchParams({run, tag})}`);
  if (gen !== viewGeneration) return;
  box.dataset.steps = d.steps.length;
  if (!d.steps.length || typeof uPlot === "undefined") return;
  const columns = d.bps.map((_, j) => d.percentiles.map(p => p[j]));
  const alpha = ["22", "33", "55", "77", "77", "55", "33", "22"];
  const series = [{label: "step"}, ...d.bps.map(bp => ({label: `${bp / 100}%`, stroke: bp === 5000 ? "#d9480f" : "#d9480f66",
                                                       width: bp === 5000 ? 2 : 1, points: {show: false}}))];
  const bands = alpha.map((a, j) => ({series: [j + 2, j + 1], fill: `#d9480f${a}`}));
  distChart = new uPlot({width: Math.max(300, box.clientWidth || 900), height: 280, series, bands, scales: {x: {time: false}},
                         axes: [{label: "step"}, {label: tag, size: 70}], legend: {show: false}},
                        [d.steps, ...columns], box);
  window.curvesDistChart = distChart;
}

async function showCurves(gen, arg, params) {
  const st = curvesState(params);
  const listing = await api("/api/runs");
  if (gen !== viewGeneration) return;
  const all = listing.runs;
  const known = new Map(all.map(r => [runKey(r), r]));
  if (!st.named) {  // default: every task's epoch reports, else the first run with scalars
    st.runs = all.filter(r => r.source === "epochs");
    if (!st.runs.length) st.runs = all.filter(r => r.tags.length).slice(0, 1);
  }
  st.runs = st.runs.map(r => known.get(runKey(r)) || {...r, name: `${r.source} ${r.run}`, tags: [], missing: true});
  const tags = [...new Set(st.runs.flatMap(r => r.tags))].sort();
  if (!tags.includes(st.tag)) st.tag = tags.includes("loss") ? "loss" : tags.includes("epoch_loss") ? "epoch_loss" : (tags[0] || "");

  const rerender = () => { curvesSaveUrl(st); renderCurves(gen, st, all, tags); };
  const tagSelect = el("select", {id: "curves-tag"}, ...tags.map(t => el("option", {value: t}, t)));
  tagSelect.value = st.tag;
  tagSelect.addEventListener("change", () => { st.tag = tagSelect.value; rerender(); });
  const xSelect = el("select", {id: "curves-x"}, el("option", {value: "step"}, "step / epoch"),
                     el("option", {value: "relative"}, "relative time"), el("option", {value: "wall"}, "wall time"));
  xSelect.value = st.x;
  xSelect.addEventListener("change", () => { st.x = xSelect.value; rerender(); });
  const slider = el("input", {id: "curves-smoothing", type: "range", min: "0", max: "0.99", step: "0.01"});
  slider.value = String(st.smoothing);
  const sliderValue = el("span", {id: "curves-smoothing-value", class: "num"}, st.smoothing.toFixed(2));
  let pending = null;
  slider.addEventListener("input", () => {
    sliderValue.textContent = Number(slider.value).toFixed(2);
    clearTimeout(pending);
    pending = setTimeout(() => { st.smoothing = Number(slider.value); rerender(); }, 120);
  });
  const log = el("input", {id: "curves-log", type: "checkbox"});
  log.checked = st.log;
  log.addEventListener("change", () => { st.log = log.checked; rerender(); });
  const onRun = (r, on) => {
    st.runs = on ? [...st.runs, r] : st.runs.filter(x => runKey(x) !== runKey(r));
    const now = [...new Set(st.runs.flatMap(x => x.tags))].sort();
    showCurves(gen, "", new URLSearchParams({runs: st.runs.map(runKey).join(","), tag: now.includes(st.tag) ? st.tag : "",
                                             x: st.x, smoothing: String(st.smoothing), log: st.log ? "1" : "0"}));
  };
  main().replaceChildren(
      el("h1", {}, "Curves"),
      el("div", {class: "curves-layout"},
         runsPanel(all, st, onRun),
         el("div", {class: "curves-main"},
            el("div", {class: "toolbar curves-toolbar"},
               el("label", {for: "curves-tag"}, "metric"), tagSelect,
               el("label", {for: "curves-x"}, "x"), xSelect,
               el("label", {for: "curves-smoothing"}, "smoothing"), slider, sliderValue,
               el("label", {}, log, " log scale")),
            el("div", {id: "curves-chart", class: "chart"}),
            el("table", {id: "curves-legend"}),
            el("div", {id: "curves-marks-box"}),
            el("div", {id: "curves-dist-box"}))));
  curvesSaveUrl(st);
  await renderCurves(gen, st, all, tags);
}

// Fetches the selected runs' series for the chart's width and draws chart, legend and marks.
async function renderCurves(gen, st, all, tags) {
  const box = document.getElementById("curves-chart");
  if (!box) return;
  const width = Math.max(300, Math.round(box.clientWidth || 900));
  const series = await Promise.all(st.runs.map(async (r, i) => {
    const s = {run: r, name: r.name, color: curvesColors[i % curvesColors.length], data: null, notes: "", dropped: 0, droppedMarks: []};
    if (r.missing) { s.notes = "no such run"; return s; }
    if (!r.tags.includes(st.tag)) { s.notes = `no ${st.tag}`; return s; }
    const q = new URLSearchParams({source: r.source, run: r.run, tag: st.tag, x: st.x, width: String(width),
                                   smoothing: String(st.smoothing)});
    if (!st.reduce) q.set("reduce", "0");
    s.data = await api(`/api/scalars?${q}`);
    if (st.log) {
      s.data.ys.forEach((y, j) => { if (!(y > 0)) s.droppedMarks.push({x: s.data.xs[j], step: s.data.steps[j], y, value: "non-positive"}); });
      s.dropped = s.droppedMarks.length;
    }
    const notes = [];
    if (s.data.reduced) notes.push(`${s.data.xs.length.toLocaleString("en-US")} of ${s.data.count.toLocaleString("en-US")} points (each pixel's min and max kept)`);
    if (s.data.marks.length) notes.push(`${s.data.marks.length} NaN/infinite`);
    if (s.dropped) notes.push(`${s.dropped} non-positive left out (log)`);
    s.notes = notes.join("; ");
    return s;
  }));
  if (gen !== viewGeneration) return;
  const legend = document.getElementById("curves-legend");
  legend.replaceChildren(el("thead", {}, el("tr", {}, ...["run", "step", "value", "smoothed", "max", "", ""].map(h => el("th", {}, h)))),
                         el("tbody", {}, ...legendRows(series, st)));
  document.getElementById("curves-marks-box").replaceChildren(marksList(series, st));
  drawCurves(box, series, st);
  box.dataset.drawn = String(Date.now());
  await renderDistributions(gen, st);
}

// The distribution chart of the first selected logdir run that has histograms.
async function renderDistributions(gen, st) {
  const holder = document.getElementById("curves-dist-box");
  const run = st.runs.find(r => r.histograms?.length);
  distChart?.destroy();
  distChart = null;
  if (!run) { holder.replaceChildren(); return; }
  if (!run.histograms.includes(st.hist)) st.hist = run.histograms[0];
  const select = el("select", {id: "curves-hist"}, ...run.histograms.map(h => el("option", {value: h}, h)));
  select.value = st.hist;
  const box = el("div", {id: "curves-dist", class: "chart"});
  select.addEventListener("change", () => { st.hist = select.value; curvesSaveUrl(st); drawDistribution(box, run.run, st.hist, gen); });
  holder.replaceChildren(el("h2", {}, "Distributions of ", run.name), el("div", {class: "toolbar"}, el("label", {for: "curves-hist"}, "histogram"), select), box);
  await drawDistribution(box, run.run, st.hist, gen);
}

views.curves = {
  show: showCurves,
  leave: () => {
    curvesChart?.destroy();
    distChart?.destroy();
    curvesChart = distChart = null;
    window.curvesChart = null;
  },
};
