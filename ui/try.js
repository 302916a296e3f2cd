// The Try-a-model view (#/try?model=ID): upload a PNG or JPEG, or draw with the mouse; the page
// turns the picture into the model's input, asks `tensorhub ui`'s TF Serving predict endpoint
// (POST /v1/models/<id>:predict, on this page's own origin) and shows the class probabilities.
//
// Images are decoded by the browser (createImageBitmap and a canvas), never by the server. The
// picture becomes the model's H x W input (from /api/models/<id>'s input_shape: [784] is
// 28 x 28, [H, W] and [H, W, 1] are H x W) as MNIST's digits were made (LeCun's MNIST page: size
// normalised into a 20 x 20 box, then centred by the centre of mass in 28 x 28):
//  1. grey = 0.299 R + 0.587 G + 0.114 B of each pixel composited over white (transparent is
//     paper); with "invert colours", ink = 255 - grey, else ink = grey;
//  2. the bounding box of the pixels whose ink is above 10% of the image's largest ink;
//  3. that box scaled, keeping its aspect ratio, to fit a round(H * 20 / 28) x round(W * 20 / 28)
//     box (each new pixel the area-weighted mean of the old pixels it covers);
//  4. placed in an H x W field of zeros so that its centre of mass (pixel centres weighted by
//     ink) lands on the field's centre (W / 2, H / 2), offsets rounded to whole pixels;
//  5. divided by 255 (inputs in [0, 1], as the demo's dataset import scales Fashion-MNIST),
//     unless the model's first layer is a Rescaling layer: then 0..255 as it is.
// A picture already of the model's H x W (an MNIST or Fashion-MNIST image itself) is in the
// model's format: steps 2-4 are skipped, its ink is the input as it is (Fashion-MNIST's items
// fill the frame; boxing them into 20 x 20 would shrink them out of what the model learnt).
// "Invert colours" starts on for 28 x 28 grey models: MNIST-style data is light on black, while
// photos and drawings (black pen on white here) are dark on white. An uploaded picture sets it
// from its own border (the outermost ring of pixels): on when that is light (paper), off when
// it is dark (a dataset's own image); the switch then overrides it. The probabilities are the
// model's outputs when its last activation is softmax, else their softmax (the outputs are
// logits). Class names come from the model's tag class_names (the demo tags Fashion-MNIST's).
"use strict";

const tryState = {model: null, source: null, invert: true, drawing: false, seq: 0, gen: 0};
const TRY_MAX_MODELS = 100;  // the picker lists the newest models that the page can feed

// The H x W the page feeds a model of this per-example input shape, or null when it cannot.
function tryInputSize(shape) {
  if (shape.length === 1 && shape[0] === 784) return {h: 28, w: 28};
  if ((shape.length === 2 || (shape.length === 3 && shape[2] === 1)) && shape[0] > 0 && shape[1] > 0)
    return {h: shape[0], w: shape[1]};
  return null;
}

// What the page needs of a model: its input size, scale, output activation and class names.
function tryModelInfo(m) {
  const size = tryInputSize(m.input_shape || []);
  const layers = (m.architecture && m.architecture.layers) || [];
  const first = layers.find(l => l.type !== "Input");
  const last = layers[layers.length - 1] || {};
  const names = Array.isArray(m.tags.class_names) ? m.tags.class_names.map(String) : null;
  return {
    id: m.id, name: m.model_name, shape: m.input_shape, size,
    scale: first && first.type === "Rescaling" ? 1 : 1 / 255,
    softmax: last.activation === "softmax",
    classNames: names,
    grey28: !!size && size.h === 28 && size.w === 28,
  };
}

// Grey values (0..255, composited over white) of RGBA pixels.
function tryGrey(rgba, w, h) {
  const grey = new Float64Array(w * h);
  for (let i = 0; i < w * h; i++) {
    const a = rgba[4 * i + 3] / 255;
    const r = rgba[4 * i] * a + 255 * (1 - a), g = rgba[4 * i + 1] * a + 255 * (1 - a), b = rgba[4 * i + 2] * a + 255 * (1 - a);
    grey[i] = 0.299 * r + 0.587 * g + 0.114 * b;
  }
  return grey;
}

// Area-weighted resampling of `src` (sw x sh, row-major) to dw x dh.
function tryResample(src, sw, sh, dw, dh) {
  const axis = (sn, dn) => {  // weights[i] = [[source index, weight], ...], weights summing to 1
    const step = sn / dn, out = [];
    for (let i = 0; i < dn; i++) {
      const a = i * step, b = (i + 1) * step, w = [];
      for (let s = Math.floor(a); s < Math.min(sn, Math.ceil(b)); s++) {
        const overlap = Math.min(b, s + 1) - Math.max(a, s);
        if (overlap > 0) w.push([s, overlap / step]);
      }
      out.push(w);
    }
    return out;
  };
  const wx = axis(sw, dw), wy = axis(sh, dh);
  const rows = new Float64Array(sh * dw);
  for (let y = 0; y < sh; y++)
    for (let i = 0; i < dw; i++) {
      let v = 0;
      for (const [s, w] of wx[i]) v += src[y * sw + s] * w;
      rows[y * dw + i] = v;
    }
  const out = new Float64Array(dw * dh);
  for (let j = 0; j < dh; j++)
    for (let i = 0; i < dw; i++) {
      let v = 0;
      for (const [s, w] of wy[j]) v += rows[s * dw + i] * w;
      out[j * dw + i] = v;
    }
  return out;
}

// The model's H x W input (ink 0..255, row-major) from grey pixels, steps 1-4 of the header.
function tryPrepare(grey, w, h, size, invert) {
  const ink = grey.map(g => (invert ? 255 - g : g));
  if (w === size.w && h === size.h) return Float64Array.from(ink);  // already the model's format
  const field = new Float64Array(size.h * size.w);
  const max = ink.reduce((m, v) => Math.max(m, v), 0);
  if (!(max > 0)) return field;
  let x0 = w, x1 = -1, y0 = h, y1 = -1;
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++)
      if (ink[y * w + x] > 0.1 * max) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
  const bw = x1 - x0 + 1, bh = y1 - y0 + 1;
  const box = new Float64Array(bw * bh);
  for (let y = 0; y < bh; y++)
    for (let x = 0; x < bw; x++) box[y * bw + x] = ink[(y + y0) * w + x + x0];
  const s = Math.min(Math.round(size.w * 20 / 28) / bw, Math.round(size.h * 20 / 28) / bh);
  const nw = Math.max(1, Math.round(bw * s)), nh = Math.max(1, Math.round(bh * s));
  const patch = tryResample(box, bw, bh, nw, nh);
  let total = 0, cx = 0, cy = 0;
  for (let y = 0; y < nh; y++)
    for (let x = 0; x < nw; x++) {
      const v = patch[y * nw + x];
      total += v; cx += v * (x + 0.5); cy += v * (y + 0.5);
    }
  const ox = Math.round(size.w / 2 - cx / total), oy = Math.round(size.h / 2 - cy / total);
  for (let y = 0; y < nh; y++)
    for (let x = 0; x < nw; x++) {
      const fx = x + ox, fy = y + oy;
      if (fx >= 0 && fx < size.w && fy >= 0 && fy < size.h) field[fy * size.w + fx] = patch[y * nw + x];
    }
  return field;
}

// The input as the model's shape wants it: [784] flat, [H, W] rows, [H, W, 1] rows of [v].
function tryInstance(values, info) {
  const flat = Array.from(values, v => v * info.scale);
  if (info.shape.length === 1) return flat;
  const rows = [];
  for (let y = 0; y < info.size.h; y++) {
    const row = flat.slice(y * info.size.w, (y + 1) * info.size.w);
    rows.push(info.shape.length === 3 ? row.map(v => [v]) : row);
  }
  return rows;
}

function trySoftmax(xs) {
  const m = Math.max(...xs);
  const e = xs.map(x => Math.exp(x - m));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map(x => x / sum);
}

// Draws the H x W input the model sees (0..255 ink as grey levels) on the preview canvas.
function tryDrawPreview(values, size) {
  const canvas = document.getElementById("try-preview");
  canvas.width = size.w;
  canvas.height = size.h;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(size.w, size.h);
  values.forEach((v, i) => {
    const g = Math.max(0, Math.min(255, Math.round(v)));
    image.data.set([g, g, g, 255], 4 * i);
  });
  ctx.putImageData(image, 0, 0);
}

function tryShowProbabilities(probabilities, info) {
  const order = probabilities.map((p, i) => i);
  const top = order.reduce((a, b) => (probabilities[b] > probabilities[a] ? b : a), 0);
  const label = i => (info.classNames && info.classNames[i] !== undefined ? info.classNames[i] : String(i));
  const rows = order.map(i => {
    const bar = el("div", {class: "try-bar"});
    bar.style.width = `${(100 * probabilities[i]).toFixed(2)}%`;
    return el("div", {class: `try-row${i === top ? " top" : ""}`, "data-class": i, "data-probability": String(probabilities[i])},
              el("span", {class: "try-label"}, label(i)),
              el("span", {class: "try-track"}, bar),
              el("span", {class: "try-percent num"}, `${(100 * probabilities[i]).toFixed(1)}%`));
  });
  document.getElementById("try-bars").replaceChildren(...rows);
  const result = document.getElementById("try-result");
  result.replaceChildren(el("span", {id: "try-top", "data-class": top}, label(top)),
                         ` ${(100 * probabilities[top]).toFixed(1)}%`);
}

// Turns the current picture into the model's input, shows it, and asks for the prediction.
async function tryPredict() {
  const info = tryState.model, source = tryState.source;
  if (!info || !source) return;
  const gen = ++tryState.gen;
  const values = tryPrepare(source.grey, source.w, source.h, info.size, tryState.invert);
  tryDrawPreview(values, info.size);
  const res = await fetch(`/v1/models/${info.id}:predict`, {
    method: "POST", headers: {"Content-Type": "application/json"}, cache: "no-store",
    body: JSON.stringify({instances: [tryInstance(values, info)]}),
  });
  const body = await res.json();
  if (gen !== tryState.gen) return;  // a newer picture or setting is on its way
  if (!res.ok) throw new Error(`predict: ${body.error || `HTTP ${res.status}`}`);
  const outputs = body.predictions[0].flat(Infinity);
  tryShowProbabilities(info.softmax ? outputs : trySoftmax(outputs), info);
  document.getElementById("try-panel").dataset.seq = String(++tryState.seq);
}

function tryRun() {
  tryPredict().then(() => showError(""), e => showError(e.message));
}

// True when the mean grey of the picture's outermost ring of pixels is above mid-grey: dark ink
// on light paper (a photo, a scan), which MNIST-style models see inverted.
function tryBorderIsLight({grey, w, h}) {
  let sum = 0, n = 0;
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++)
      if (x === 0 || y === 0 || x === w - 1 || y === h - 1) { sum += grey[y * w + x]; n++; }
  return sum / n > 127.5;
}

// The picture from a file: decoded by the browser at its own size (no resampling there).
async function tryLoadFile(file) {
  const bitmap = await createImageBitmap(file);
  const canvas = document.createElement("canvas");
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(bitmap, 0, 0);
  const rgba = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
  tryState.source = {grey: tryGrey(rgba, bitmap.width, bitmap.height), w: bitmap.width, h: bitmap.height, kind: "file"};
  if (tryState.model?.grey28) {
    tryState.invert = tryBorderIsLight(tryState.source);
    document.getElementById("try-invert").checked = tryState.invert;
  }
  // Show it on the drawing board (for the eye only: the model gets the pixels above).
  const board = document.getElementById("try-draw"), bctx = board.getContext("2d");
  bctx.fillStyle = "#fff";
  bctx.fillRect(0, 0, board.width, board.height);
  const s = Math.min(board.width / bitmap.width, board.height / bitmap.height);
  bctx.imageSmoothingEnabled = s < 1;
  bctx.drawImage(bitmap, (board.width - bitmap.width * s) / 2, (board.height - bitmap.height * s) / 2,
                 bitmap.width * s, bitmap.height * s);
  bitmap.close();
  tryRun();
}

function tryClearBoard() {
  const board = document.getElementById("try-draw"), ctx = board.getContext("2d");
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, board.width, board.height);
}

// The drawing board: a black pen on white; each finished stroke is predicted.
function tryBoard() {
  const board = el("canvas", {id: "try-draw", width: 280, height: 280, class: "try-board"});
  const ctx = board.getContext("2d");
  const at = e => {
    const r = board.getBoundingClientRect();
    return [(e.clientX - r.left) * board.width / r.width, (e.clientY - r.top) * board.height / r.height];
  };
  board.addEventListener("pointerdown", e => {
    if (tryState.source && tryState.source.kind !== "drawing") tryClearBoard();
    tryState.drawing = true;
    board.setPointerCapture(e.pointerId);
    ctx.lineWidth = 20;
    ctx.lineCap = ctx.lineJoin = "round";
    ctx.strokeStyle = "#000";
    ctx.beginPath();
    ctx.moveTo(...at(e));
    ctx.lineTo(...at(e));
    ctx.stroke();
  });
  board.addEventListener("pointermove", e => {
    if (!tryState.drawing) return;
    ctx.lineTo(...at(e));
    ctx.stroke();
  });
  const end = () => {
    if (!tryState.drawing) return;
    tryState.drawing = false;
    const rgba = ctx.getImageData(0, 0, board.width, board.height).data;
    tryState.source = {grey: tryGrey(rgba, board.width, board.height), w: board.width, h: board.height, kind: "drawing"};
    tryRun();
  };
  board.addEventListener("pointerup", end);
  board.addEventListener("pointercancel", end);
  return board;
}

async function tryPickModel(id) {
  const m = await api(`/api/models/${encodeURIComponent(id)}`);
  const info = tryModelInfo(m);
  if (!info.size)
    throw new Error(`model ${m.id} (${m.model_name}) takes input ${JSON.stringify(m.input_shape)}: this page feeds ` +
                    "images as [784], [H, W] or [H, W, 1]");
  tryState.model = info;
  // Off for a dataset's own image already loaded (dark border), as tryLoadFile sets it.
  tryState.invert = info.grey28 && (tryState.source?.kind !== "file" || tryBorderIsLight(tryState.source));
  document.getElementById("try-invert").checked = tryState.invert;
  document.getElementById("try-model-info").textContent =
      `input ${JSON.stringify(info.shape)} in ${info.scale === 1 ? "0..255" : "0..1"}, ` +
      `${info.softmax ? "softmax" : "logits (softmax applied here)"}` +
      (info.classNames ? "" : ", no class names (tag class_names)");
  document.getElementById("try-bars").replaceChildren();
  document.getElementById("try-result").replaceChildren();
  document.getElementById("try-panel").dataset.model = String(info.id);  // the model picked (tests wait for it)
  if (tryState.source) await tryPredict();
}

async function showTry(gen, arg, params) {
  const list = await api(`/api/models?sort=time:-1&limit=${TRY_MAX_MODELS}`);
  const details = await Promise.all(list.models.map(m => api(`/api/models/${m.id}`).catch(() => null)));
  if (gen !== viewGeneration) return;
  const feedable = details.filter(m => m && tryInputSize(m.input_shape || []));
  const wanted = params.get("model");
  const select = el("select", {id: "try-model"},
                    ...feedable.map(m => el("option", {value: m.id}, `${m.id}: ${m.model_name}`)));
  if (wanted && !feedable.some(m => String(m.id) === wanted)) select.prepend(el("option", {value: wanted}, `${wanted}`));
  if (wanted) select.value = wanted;
  select.addEventListener("change", () => {
    history.replaceState(null, "", `#/try?model=${select.value}`);  // no hashchange: the picture stays
    tryPickModel(select.value).then(() => showError(""), e => showError(e.message));
  });
  const invert = el("input", {type: "checkbox", id: "try-invert"});
  invert.addEventListener("change", () => { tryState.invert = invert.checked; tryRun(); });
  const file = el("input", {type: "file", id: "try-file", accept: "image/png,image/jpeg"});
  file.addEventListener("change", () => { if (file.files[0]) tryLoadFile(file.files[0]).catch(e => showError(e.message)); });
  const clear = el("button", {id: "try-clear", onclick: () => { tryClearBoard(); tryState.source = null; }}, "clear");
  tryState.source = null;
  tryState.model = null;
  main().replaceChildren(
      el("h1", {}, "Try a model"),
      el("div", {class: "toolbar"}, el("label", {for: "try-model"}, "model"), select,
         el("label", {}, invert, " invert colours"), el("label", {for: "try-file"}, "image"), file, clear),
      el("p", {class: "muted", id: "try-model-info"}),
      el("div", {class: "try-panel", id: "try-panel", "data-seq": "0"},
         el("figure", {}, tryBoard(), el("figcaption", {class: "muted"}, "draw here, or choose a PNG or JPEG")),
         el("figure", {}, el("canvas", {id: "try-preview", class: "try-preview", width: 28, height: 28}),
            el("figcaption", {class: "muted"}, "what the model sees")),
         el("div", {class: "try-out"}, el("p", {id: "try-result", class: "try-result"}), el("div", {id: "try-bars"}))));
  tryClearBoard();
  tryState.seq = 0;
  if (!feedable.length && !wanted) {
    showError(`none of the ${list.models.length} newest models takes an image ([784], [H, W] or [H, W, 1])`);
    return;
  }
  await tryPickModel(select.value);
}

views.try = {show: showTry, leave: () => { tryState.gen++; }};
