// The Projector view (#/projector?run=RUN&tensor=NAME): TensorBoard's embedding projector for the
// projector configs under `tensorhub ui --logdir` (/api/projector, projector_api.h). The points
// are projected in the browser: PCA (the covariance's eigenvectors by Jacobi rotations, the
// top 3 or 2 components, as TensorBoard's PCA tab, without its "sphereize" option) or t-SNE
// (@keckelt/tsne, embedded as /tsne.js and loaded on demand, on the first kTsneMax points).
// They are drawn on a plain 2-D canvas with our own rotation (drag to rotate in 3-D or pan in
// 2-D, wheel to zoom), each point a square written straight into the canvas's pixels, so
// 10,000 points of any dimension draw in a few milliseconds; with a sprite, each point is its
// image. Colours come from a metadata column. Typing a label selects its point; its k
// nearest neighbours in the ORIGINAL space (cosine distance 1 - cos, or Euclidean, as
// TensorBoard's "nearest points in the original space") light up and are listed with their
// distances. A run whose files TensorBoard would refuse (a path leaving the config's directory,
// metadata rows that disagree with the tensor, a value that is not a number) is explained in
// the page with the server's message, naming the file and line.
//
// For tests and bench/ui_projector.mjs the canvas carries data-first-frame-ms (since the
// navigation started), data-pca-ms, data-points, data-projection; the neighbour list carries
// data-knn-ms.
"use strict";

const kTsneMax = 1000;
const projPalette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                     "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
                     "#dbdb8d", "#9edae5"];
let proj = null;  // the shown embedding and everything drawn from it

// ---- numbers: PCA, neighbours -------------------------------------------------------------------

// Eigenvalues and eigenvectors of a symmetric d x d matrix (row-major Float64Array, destroyed)
// by cyclic Jacobi rotations. Returns {values, vectors: [Float64Array(d)]} sorted by value, largest first.
function symmetricEigen(a, d) {
  const v = new Float64Array(d * d);
  for (let i = 0; i < d; ++i) v[i * d + i] = 1;
  for (let sweep = 0; sweep < 60; ++sweep) {
    let off = 0, diag = 0;
    for (let p = 0; p < d; ++p) {
      diag += a[p * d + p] * a[p * d + p];
      for (let q = p + 1; q < d; ++q) off += a[p * d + q] * a[p * d + q];
    }
    if (off <= 1e-22 * diag || off === 0) break;
    for (let p = 0; p < d; ++p)
      for (let q = p + 1; q < d; ++q) {
        const apq = a[p * d + q];
        if (Math.abs(apq) < 1e-300) continue;
        const theta = (a[q * d + q] - a[p * d + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1), s = t * c;
        for (let k = 0; k < d; ++k) {  // A <- A J (columns p, q)
          const akp = a[k * d + p], akq = a[k * d + q];
          a[k * d + p] = c * akp - s * akq;
          a[k * d + q] = s * akp + c * akq;
        }
        for (let k = 0; k < d; ++k) {  // A <- J^T A (rows p, q)
          const apk = a[p * d + k], aqk = a[q * d + k];
          a[p * d + k] = c * apk - s * aqk;
          a[q * d + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < d; ++k) {  // V <- V J
          const vkp = v[k * d + p], vkq = v[k * d + q];
          v[k * d + p] = c * vkp - s * vkq;
          v[k * d + q] = s * vkp + c * vkq;
        }
      }
  }
  const order = [...Array(d).keys()].sort((i, j) => a[j * d + j] - a[i * d + i]);
  return {values: order.map(i => a[i * d + i]), vectors: order.map(i => Float64Array.from({length: d}, (_, k) => v[k * d + i]))};
}

// The first `k` principal components of n x d `data`: coordinates (n * k, scaled into [-1, 1])
// and the share of the variance each describes. The centred data is copied column by column
// (Float64Array, n * d), so that each covariance entry and each projection is a loop over
// contiguous memory.
function pcaProject(data, n, d, k) {
  const mean = new Float64Array(d);
  for (let i = 0; i < n; ++i) for (let j = 0; j < d; ++j) mean[j] += data[i * d + j];
  for (let j = 0; j < d; ++j) mean[j] /= n;
  const cols = new Float64Array(n * d);
  for (let i = 0; i < n; ++i) for (let j = 0; j < d; ++j) cols[j * n + i] = data[i * d + j] - mean[j];
  const cov = new Float64Array(d * d);
  let trace = 0;
  for (let a = 0; a < d; ++a) {
    const oa = a * n;
    for (let b = a; b < d; ++b) {
      const ob = b * n;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0, i = 0;
      for (; i + 3 < n; i += 4) {
        s0 += cols[oa + i] * cols[ob + i]; s1 += cols[oa + i + 1] * cols[ob + i + 1];
        s2 += cols[oa + i + 2] * cols[ob + i + 2]; s3 += cols[oa + i + 3] * cols[ob + i + 3];
      }
      for (; i < n; ++i) s0 += cols[oa + i] * cols[ob + i];
      cov[a * d + b] = cov[b * d + a] = (s0 + s1 + s2 + s3) / n;
    }
    trace += cov[a * d + a];
  }
  const eig = symmetricEigen(cov, d);
  const kk = Math.min(k, d);
  const coords = new Float32Array(n * k), acc = new Float64Array(n);
  let scale = 1e-30;
  for (let c = 0; c < kk; ++c) {
    acc.fill(0);
    const vec = eig.vectors[c];
    for (let j = 0; j < d; ++j) {
      const w = vec[j], o = j * n;
      for (let i = 0; i < n; ++i) acc[i] += cols[o + i] * w;
    }
    for (let i = 0; i < n; ++i) {
      coords[i * k + c] = acc[i];
      scale = Math.max(scale, Math.abs(acc[i]));
    }
  }
  for (let i = 0; i < coords.length; ++i) coords[i] /= scale;
  return {coords, variance: eig.values.slice(0, kk).map(v => (trace > 0 ? v / trace : 0))};
}

// The k nearest points to point `i` in the original space: [{index, distance}] ascending.
// cosine: 1 - a.b / (|a| |b|) (TensorBoard's cosDistNorm on unit vectors); euclidean: |a - b|.
function nearestNeighbours(p, i, k, metric) {
  const {data, n, d} = p;
  if (metric === "cosine" && !p.norms) {
    p.norms = new Float64Array(n);
    for (let r = 0; r < n; ++r) {
      let s = 0;
      for (let j = 0; j < d; ++j) s += data[r * d + j] * data[r * d + j];
      p.norms[r] = Math.sqrt(s);
    }
  }
  const best = [];  // sorted ascending, at most k
  const base = i * d;
  for (let r = 0; r < n; ++r) {
    if (r === i) continue;
    let dist = 0;
    if (metric === "cosine") {
      let dot = 0;
      for (let j = 0; j < d; ++j) dot += data[base + j] * data[r * d + j];
      const norms = p.norms[i] * p.norms[r];
      dist = norms > 0 ? 1 - dot / norms : 1;
    } else {
      for (let j = 0; j < d; ++j) { const t = data[base + j] - data[r * d + j]; dist += t * t; }
      dist = Math.sqrt(dist);
    }
    if (best.length === k && dist >= best[k - 1].distance) continue;
    let at = best.length;
    while (at > 0 && best[at - 1].distance > dist) --at;
    best.splice(at, 0, {index: r, distance: dist});
    if (best.length > k) best.pop();
  }
  return best;
}

// ---- colours --------------------------------------------------------------------------------------

const hexRgb = h => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];

// Columns that can colour the points: at most 20 distinct values, or all numbers.
function colourableColumns(meta) {
  if (!meta) return [];
  return meta.columns.map((name, c) => {
    const values = meta.rows.map(r => r[c]);
    const distinct = [...new Set(values)];
    if (distinct.length <= projPalette.length) return {name, c, kind: "category", distinct: distinct.sort()};
    if (values.every(v => v !== "" && Number.isFinite(Number(v)))) return {name, c, kind: "number"};
    return null;
  }).filter(Boolean);
}

// Per point r, g, b (Uint8Array n * 3) for the chosen column, and the legend's entries.
function pointColours(p) {
  const rgb = new Uint8Array(p.n * 3);
  const col = p.colourable.find(x => x.name === p.colourBy);
  const legend = [];
  if (!col) {
    for (let i = 0; i < p.n; ++i) rgb.set([47, 111, 222], i * 3);
    return {rgb, legend};
  }
  if (col.kind === "category") {
    const index = new Map(col.distinct.map((v, k) => [v, k]));
    const counts = new Array(col.distinct.length).fill(0);
    for (let i = 0; i < p.n; ++i) {
      const k = index.get(p.meta.rows[i][col.c]);
      ++counts[k];
      rgb.set(hexRgb(projPalette[k]), i * 3);
    }
    col.distinct.forEach((v, k) => legend.push({value: v === "" ? "(empty)" : v, colour: projPalette[k], count: counts[k]}));
  } else {
    const xs = p.meta.rows.map(r => Number(r[col.c]));
    const lo = Math.min(...xs), hi = Math.max(...xs);
    xs.forEach((x, i) => {
      const t = hi > lo ? (x - lo) / (hi - lo) : 0.5;
      rgb.set([Math.round(40 + 200 * t), Math.round(90 + 40 * (1 - Math.abs(2 * t - 1))), Math.round(220 - 190 * t)], i * 3);
    });
    legend.push({value: `${formatValue(lo)} (blue) .. ${formatValue(hi)} (red)`, colour: "#888", count: p.n});
  }
  return {rgb, legend};
}

// ---- drawing ----------------------------------------------------------------------------------------

function projCanvasSize(canvas) {
  const w = Math.max(320, canvas.parentElement.clientWidth - 2), h = Math.max(360, Math.min(720, window.innerHeight - 170));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  return [w, h];
}

// Screen positions (sx, sy, depth) of every shown point under the current rotation and zoom.
function projectToScreen(p, w, h) {
  const {coords, dims} = p.layout;
  const cy = Math.cos(p.view.yaw), sy = Math.sin(p.view.yaw), cp = Math.cos(p.view.pitch), sp = Math.sin(p.view.pitch);
  const s = 0.42 * Math.min(w, h) * p.view.zoom;
  for (let i = 0; i < p.n; ++i) {
    const x = coords[i * dims], y = coords[i * dims + 1], z = dims === 3 ? coords[i * dims + 2] : 0;
    let X = x, Y = y, Z = z;
    if (dims === 3) {  // yaw about the vertical axis, then pitch about the horizontal
      const x1 = cy * x + sy * z, z1 = -sy * x + cy * z;
      X = x1; Y = cp * y - sp * z1; Z = sp * y + cp * z1;
    }
    p.sx[i] = w / 2 + s * (X + p.view.panX);
    p.sy[i] = h / 2 - s * (Y + p.view.panY);
    p.depth[i] = Z;
  }
}

function drawPoints(p) {
  const canvas = p.canvas, ctx = canvas.getContext("2d");
  const [w, h] = projCanvasSize(canvas);
  projectToScreen(p, w, h);
  const order = p.order;
  if (p.layout.dims === 3) order.sort((a, b) => p.depth[a] - p.depth[b]);  // far first
  const lit = p.lit;  // 0 plain, 1 neighbour, 2 selected
  const dim = p.selected !== null;
  if (p.spriteOn && p.sprite.complete && p.sprite.naturalWidth) {
    drawSprites(p, ctx, w, h, order, dim);
  } else {
    const img = ctx.createImageData(w, h), px = new Uint32Array(img.data.buffer);
    px.fill(0xffffffff);
    const r = p.n > 3000 ? 1 : 2;  // squares of 3 or 5 pixels
    for (let o = 0; o < order.length; ++o) {
      const i = order[o];
      if (!p.shown[i]) continue;
      const x = Math.round(p.sx[i]), y = Math.round(p.sy[i]);
      if (x < r || y < r || x >= w - r || y >= h - r) continue;
      let R = p.rgb[i * 3], G = p.rgb[i * 3 + 1], B = p.rgb[i * 3 + 2];
      if (dim && !lit[i]) { R += (255 - R) * 0.8; G += (255 - G) * 0.8; B += (255 - B) * 0.8; }  // faded: 20% colour on white
      const colour = ((255 << 24) | (B << 16) | (G << 8) | R) >>> 0;  // little-endian RGBA
      for (let yy = y - r; yy <= y + r; ++yy) px.fill(colour, yy * w + x - r, yy * w + x + r + 1);
    }
    ctx.putImageData(img, 0, 0);
  }
  drawHighlights(p, ctx);
  canvas.dataset.drawn = String((Number(canvas.dataset.drawn) || 0) + 1);
  if (!canvas.dataset.firstFrameMs) canvas.dataset.firstFrameMs = performance.now().toFixed(1);
}

function drawSprites(p, ctx, w, h, order, dim) {
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, w, h);
  const [iw, ih] = p.embedding.sprite.single_image_dim;
  const perRow = Math.floor(p.sprite.naturalWidth / iw);
  const size = Math.max(8, Math.min(48, 20 * p.view.zoom));
  for (const i of order) {
    if (!p.shown[i]) continue;
    ctx.globalAlpha = dim && !p.lit[i] ? 0.2 : 1;
    ctx.drawImage(p.sprite, (i % perRow) * iw, Math.floor(i / perRow) * ih, iw, ih,
                  p.sx[i] - size / 2, p.sy[i] - size / 2, size, size);
  }
  ctx.globalAlpha = 1;
}

// Rings and labels of the selected point and its neighbours, over the points.
function drawHighlights(p, ctx) {
  if (p.selected === null) return;
  ctx.font = "12px system-ui, sans-serif";
  ctx.lineWidth = 2;
  for (const {index} of p.neighbours) {
    ctx.strokeStyle = "#d9480f";
    ctx.beginPath();
    ctx.arc(p.sx[index], p.sy[index], 5, 0, 2 * Math.PI);
    ctx.stroke();
    ctx.fillStyle = "#7a2e0b";
    ctx.fillText(p.label(index), p.sx[index] + 7, p.sy[index] - 5);
  }
  const i = p.selected;
  ctx.fillStyle = "#111";
  ctx.beginPath();
  ctx.arc(p.sx[i], p.sy[i], 6, 0, 2 * Math.PI);
  ctx.fill();
  ctx.font = "bold 14px system-ui, sans-serif";
  ctx.fillText(p.label(i), p.sx[i] + 9, p.sy[i] - 7);
}

function requestDraw(p) {
  if (p.frame) return;
  p.frame = requestAnimationFrame(() => { p.frame = 0; if (proj === p) drawPoints(p); });
}

// ---- layouts: PCA and t-SNE -----------------------------------------------------------------------

function pcaLayout(p, dims) {
  const t0 = performance.now();
  if (!p.pca) p.pca = pcaProject(p.data, p.n, p.d, 3);
  const coords = dims === 3 ? p.pca.coords : Float32Array.from({length: p.n * 2}, (_, k) => p.pca.coords[Math.floor(k / 2) * 3 + (k % 2)]);
  p.canvas.dataset.pcaMs = (performance.now() - t0).toFixed(1);
  const v = p.pca.variance.slice(0, dims);
  p.layout = {coords, dims, note: `PCA: components 1-${dims} describe ${(100 * v.reduce((a, b) => a + b, 0)).toFixed(1)}% of the variance ` +
                                  `(${v.map(x => (100 * x).toFixed(1) + "%").join(", ")})`};
  p.shown.fill(1);
}

function loadTsneLibrary() {
  if (window.TSNE) return Promise.resolve(window.TSNE);
  return new Promise((resolve, reject) => {
    window.exports = {};  // tsne.js is CommonJS: it sets exports.TSNE
    const s = document.createElement("script");
    s.src = "/tsne.js";
    s.onload = () => { window.TSNE = window.exports.TSNE; delete window.exports; window.TSNE ? resolve(window.TSNE) : reject(new Error("/tsne.js defined no TSNE")); };
    s.onerror = () => reject(new Error("t-SNE is not in this build (/tsne.js missing: run scripts/setup, then rebuild)"));
    document.head.append(s);
  });
}

// t-SNE on the first kTsneMax points, a few iterations per frame until 500 or another layout.
async function tsneLayout(p, status) {
  const TSNE = await loadTsneLibrary();
  const m = Math.min(p.n, kTsneMax);
  const rows = Array.from({length: m}, (_, i) => Array.from(p.data.subarray(i * p.d, (i + 1) * p.d)));
  const tsne = new TSNE({dim: 2, perplexity: Math.min(30, Math.max(2, Math.floor((m - 1) / 3))), epsilon: 10});
  tsne.initDataRaw(rows);
  const run = {stopped: false};
  p.tsne = run;
  p.shown.fill(0);
  p.shown.fill(1, 0, m);
  const coords = new Float32Array(p.n * 2);
  p.layout = {coords, dims: 2, note: `t-SNE (@keckelt/tsne, perplexity ${tsne.perplexity}) of the first ${m} of ${p.n} points`};
  let iter = 0;
  const tick = () => {
    if (run.stopped || proj !== p) return;
    const until = performance.now() + 25;
    while (iter < 500 && performance.now() < until) { tsne.step(); ++iter; }
    const sol = tsne.getSolution();
    let scale = 1e-30;
    for (let i = 0; i < m; ++i) scale = Math.max(scale, Math.abs(sol[i][0]), Math.abs(sol[i][1]));
    for (let i = 0; i < m; ++i) { coords[i * 2] = sol[i][0] / scale; coords[i * 2 + 1] = sol[i][1] / scale; }
    status.textContent = `t-SNE iteration ${iter}${iter < 500 ? "…" : " (done)"}`;
    status.dataset.iteration = iter;
    requestDraw(p);
    if (iter < 500) setTimeout(tick, 0);
  };
  tick();
}

async function applyLayout(p, status) {
  if (p.tsne) p.tsne.stopped = true;
  p.tsne = null;
  p.view = {yaw: 0.6, pitch: 0.35, zoom: 1, panX: 0, panY: 0};
  status.textContent = "";
  delete status.dataset.iteration;
  if (p.projection === "tsne") await tsneLayout(p, status);
  else pcaLayout(p, p.projection === "pca2" ? 2 : 3);
  p.canvas.dataset.projection = p.projection;
  document.getElementById("projector-layout-note").textContent = p.layout.note;
  if (p.selected !== null && !p.shown[p.selected]) select(p, null);
  requestDraw(p);
}

// ---- selection and neighbours ------------------------------------------------------------------

function select(p, i) {
  p.selected = i;
  p.lit.fill(0);
  p.neighbours = [];
  const box = document.getElementById("projector-neighbours");
  if (i === null) {
    box.replaceChildren(el("p", {class: "muted"}, "Type a label or click a point to see its nearest neighbours."));
    delete box.dataset.selected;
    requestDraw(p);
    return;
  }
  const t0 = performance.now();
  p.neighbours = nearestNeighbours(p, i, p.k, p.metric);
  const knnMs = performance.now() - t0;
  p.lit[i] = 2;
  for (const nb of p.neighbours) p.lit[nb.index] = 1;
  const rows = p.neighbours.map((nb, r) => el("tr", {"data-index": nb.index, "data-distance": String(nb.distance), class: "clickable",
                                                    onclick: () => select(p, nb.index)},
      el("td", {class: "num"}, r + 1), el("td", {}, p.label(nb.index)), el("td", {class: "num"}, nb.distance.toFixed(4))));
  box.replaceChildren(
      el("p", {}, el("strong", {id: "projector-selected", "data-index": i}, p.label(i)),
         el("span", {class: "muted small"}, ` point ${i}; ${p.k} nearest by ${p.metric} distance in the original ${p.d}-D space`)),
      table(["#", "label", "distance"].map(h => el("th", {}, h)), rows));
  box.dataset.selected = i;
  box.dataset.knnMs = knnMs.toFixed(2);
  requestDraw(p);
}

// Exact label matches (any case) first, then labels that contain the text; at most 50.
function searchLabels(p, text) {
  const q = text.trim().toLowerCase();
  if (!q) return [];
  const exact = [], part = [];
  for (let i = 0; i < p.n && exact.length + part.length < 5000; ++i) {
    const l = p.label(i).toLowerCase();
    if (l === q) exact.push(i);
    else if (l.includes(q)) part.push(i);
  }
  return [...exact, ...part].slice(0, 50);
}

function onSearch(p, input) {
  const matches = searchLabels(p, input.value);
  const list = document.getElementById("projector-matches");
  list.replaceChildren(...matches.map(i => el("li", {"data-index": i, class: "clickable", onclick: () => select(p, i)}, p.label(i))));
  list.dataset.count = matches.length;
  if (matches.length && p.label(matches[0]).toLowerCase() === input.value.trim().toLowerCase()) select(p, matches[0]);
}

// ---- interaction ----------------------------------------------------------------------------------

function pickPoint(p, x, y) {
  let best = null, bestD = 64;  // within 8 px
  for (let i = 0; i < p.n; ++i) {
    if (!p.shown[i]) continue;
    const dx = p.sx[i] - x, dy = p.sy[i] - y, dd = dx * dx + dy * dy;
    if (dd < bestD) { bestD = dd; best = i; }
  }
  return best;
}

function wireCanvas(p) {
  const c = p.canvas;
  let drag = null;
  c.addEventListener("pointerdown", e => { drag = {x: e.clientX, y: e.clientY, moved: false}; c.setPointerCapture(e.pointerId); });
  c.addEventListener("pointermove", e => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
    drag.x = e.clientX; drag.y = e.clientY;
    if (p.layout.dims === 3) {
      p.view.yaw += dx * 0.01;
      p.view.pitch = Math.max(-1.5, Math.min(1.5, p.view.pitch + dy * 0.01));
    } else {
      const s = 0.42 * Math.min(c.width, c.height) * p.view.zoom;
      p.view.panX += dx / s; p.view.panY -= dy / s;
    }
    requestDraw(p);
  });
  c.addEventListener("pointerup", e => {
    if (drag && !drag.moved) {
      const r = c.getBoundingClientRect();
      const i = pickPoint(p, e.clientX - r.left, e.clientY - r.top);
      if (i !== null) select(p, i);
    }
    drag = null;
  });
  c.addEventListener("wheel", e => {
    e.preventDefault();
    p.view.zoom = Math.max(0.2, Math.min(50, p.view.zoom * Math.exp(-e.deltaY * 0.001)));
    requestDraw(p);
  }, {passive: false});
}

// ---- the page -------------------------------------------------------------------------------------

function projectorMessage(id, ...children) {
  return el("div", {id, class: "error-box"}, ...children);
}

function controls(p, runs, status) {
  const runSelect = el("select", {id: "projector-run"}, ...runs.map(r => el("option", {value: r.run}, r.run)));
  runSelect.value = p.run;
  runSelect.addEventListener("change", () => { location.hash = `#/projector?${new URLSearchParams({run: runSelect.value})}`; });
  const tensorSelect = el("select", {id: "projector-tensor"}, ...p.embedding.embeddings.map(t => el("option", {value: t}, t)));
  tensorSelect.value = p.embedding.tensor_name;
  tensorSelect.addEventListener("change", () => { location.hash = `#/projector?${new URLSearchParams({run: p.run, tensor: tensorSelect.value})}`; });
  const projection = el("select", {id: "projector-projection"}, el("option", {value: "pca3"}, "PCA 3-D"),
                        el("option", {value: "pca2"}, "PCA 2-D"), el("option", {value: "tsne"}, `t-SNE 2-D (first ${kTsneMax} points)`));
  projection.value = p.projection;
  projection.addEventListener("change", () => { p.projection = projection.value; applyLayout(p, status).catch(e => showError(e.message)); });
  const colour = el("select", {id: "projector-colour"}, el("option", {value: ""}, "none"),
                    ...p.colourable.map(c => el("option", {value: c.name}, c.name)));
  colour.value = p.colourBy;
  colour.addEventListener("change", () => { p.colourBy = colour.value; recolour(p); });
  const labelBy = el("select", {id: "projector-label-by"}, ...(p.meta ? p.meta.columns : ["index"]).map(c => el("option", {value: c}, c)));
  labelBy.addEventListener("change", () => { p.labelColumn = Math.max(0, p.meta ? p.meta.columns.indexOf(labelBy.value) : 0); select(p, p.selected); });
  const search = el("input", {id: "projector-search", placeholder: "label, e.g. king", spellcheck: "false", autocomplete: "off"});
  search.addEventListener("input", () => onSearch(p, search));
  search.addEventListener("keydown", e => { if (e.key === "Enter") { const m = searchLabels(p, search.value); if (m.length) select(p, m[0]); } });
  const k = el("input", {id: "projector-k", type: "number", min: "1", max: "100", value: String(p.k)});
  k.addEventListener("change", () => { p.k = Math.max(1, Math.min(100, Math.round(Number(k.value)) || 10)); k.value = p.k; select(p, p.selected); });
  const metric = el("select", {id: "projector-metric"}, el("option", {value: "cosine"}, "cosine"), el("option", {value: "euclidean"}, "Euclidean"));
  metric.value = p.metric;
  metric.addEventListener("change", () => { p.metric = metric.value; select(p, p.selected); });
  const sprites = el("input", {id: "projector-sprites", type: "checkbox"});
  sprites.checked = p.spriteOn;
  sprites.disabled = !p.embedding.sprite;
  sprites.addEventListener("change", () => { p.spriteOn = sprites.checked; requestDraw(p); });
  return el("div", {class: "projector-side"},
      el("label", {}, "run ", runSelect), el("label", {}, "tensor ", tensorSelect),
      el("label", {}, "projection ", projection), el("label", {}, "colour by ", colour),
      el("label", {}, "label by ", labelBy), el("label", {}, sprites, " sprites"),
      el("div", {id: "projector-legend"}),
      el("h3", {}, "Search"), search, el("ul", {id: "projector-matches"}),
      el("h3", {}, "Nearest neighbours"),
      el("div", {class: "toolbar"}, el("label", {}, "k ", k), el("label", {}, "distance ", metric)),
      el("div", {id: "projector-neighbours"}));
}

function recolour(p) {
  const {rgb, legend} = pointColours(p);
  p.rgb = rgb;
  document.getElementById("projector-legend").replaceChildren(...legend.map(l => el("div", {class: "legend-row", "data-value": l.value},
      el("span", {class: "swatch", style: `background:${l.colour}`}), ` ${l.value} `, el("span", {class: "muted small"}, `(${l.count})`))));
  requestDraw(p);
}

async function loadEmbedding(run, tensor) {
  const q = new URLSearchParams({run});
  if (tensor) q.set("tensor", tensor);
  const [embedding, res] = await Promise.all([api(`/api/projector/embedding?${q}`), fetch(`/api/projector/tensor?${q}`, {cache: "no-store"})]);
  if (!res.ok) throw new Error((await res.json()).error || `HTTP ${res.status}`);
  const data = new Float32Array(await res.arrayBuffer());
  if (data.length !== embedding.rows * embedding.cols)
    throw new Error(`the tensor holds ${data.length} values, not ${embedding.rows} x ${embedding.cols}`);
  return {embedding, data};
}

async function showProjector(gen, arg, params) {
  leaveProjector();
  const listing = await api("/api/projector");
  if (gen !== viewGeneration) return;
  const title = el("h1", {}, "Projector");
  if (!listing.logdir || !listing.runs.length) {
    main().replaceChildren(title, projectorMessage("projector-none", listing.logdir
        ? `No projector_config.pbtxt under ${listing.logdir}: train with the TensorBoard callback's embeddings_freq, or run tensorhub embed --logdir DIR.`
        : "Start tensorhub ui with --logdir DIR to show the embeddings of DIR's projector configs (projector_config.pbtxt)."));
    return;
  }
  const run = params.get("run") || (listing.runs.find(r => !r.error) || listing.runs[0]).run;
  main().replaceChildren(title, el("p", {class: "muted", id: "projector-loading"}, `loading ${run}…`));
  let loaded;
  try {
    loaded = await loadEmbedding(run, params.get("tensor") || "");
  } catch (e) {
    if (gen !== viewGeneration) return;
    const others = listing.runs.filter(r => r.run !== run).map(r => el("a", {href: `#/projector?run=${encodeURIComponent(r.run)}`}, r.run));
    main().replaceChildren(title, projectorMessage("projector-error",
        el("p", {}, el("strong", {}, `The projector cannot show run ${run}: `), el("span", {id: "projector-error-text"}, e.message)),
        others.length ? el("p", {}, "Other runs: ", ...others.flatMap((a, i) => (i ? [", ", a] : [a]))) : null));
    return;
  }
  if (gen !== viewGeneration) return;
  drawProjector(run, listing.runs, loaded);
}

function drawProjector(run, runs, {embedding, data}) {
  const n = embedding.rows, d = embedding.cols, meta = embedding.metadata;
  const p = proj = {
    run, embedding, data, n, d, meta, k: 10, metric: "cosine", projection: "pca3", selected: null, neighbours: [],
    labelColumn: 0, colourable: colourableColumns(meta), spriteOn: !!embedding.sprite,
    sx: new Float32Array(n), sy: new Float32Array(n), depth: new Float32Array(n), order: new Uint32Array(n).map((_, i) => i),
    lit: new Uint8Array(n), shown: new Uint8Array(n).fill(1), sprite: new Image(), frame: 0,
  };
  p.label = i => (meta ? meta.rows[i][p.labelColumn] : String(i));
  p.colourBy = p.colourable.find(c => c.kind === "category" && c.distinct.length > 1)?.name || "";
  if (embedding.sprite) {
    p.sprite.onload = () => requestDraw(p);
    p.sprite.src = `/api/projector/sprite?${new URLSearchParams({run, tensor: embedding.tensor_name})}`;
  }
  p.canvas = el("canvas", {id: "projector-canvas", "data-points": n, "data-dims": d});
  const status = el("span", {id: "projector-status", class: "muted small"});
  main().replaceChildren(
      el("h1", {}, "Projector: ", run, " ", el("span", {class: "muted small"}, `${embedding.tensor_name}, ${n.toLocaleString("en-US")} points x ${d} dimensions`)),
      el("div", {class: "projector-layout"}, controls(p, runs, status),
         el("div", {class: "projector-main"}, p.canvas,
            el("p", {class: "muted small"}, el("span", {id: "projector-layout-note"}), " ", status,
               " Drag to rotate (3-D) or pan (2-D), wheel to zoom, click a point to select it."))));
  wireCanvas(p);
  recolour(p);
  select(p, null);
  applyLayout(p, status);
  p.onResize = () => requestDraw(p);
  window.addEventListener("resize", p.onResize);
  window.projectorState = p;  // for tests and the bench
}

function leaveProjector() {
  if (!proj) return;
  if (proj.tsne) proj.tsne.stopped = true;
  if (proj.frame) cancelAnimationFrame(proj.frame);
  window.removeEventListener("resize", proj.onResize);
  proj = null;
}

views.projector = {show: showProjector, leave: leaveProjector};
