// Browser tests of the Graph view (#/graph?model=ID, ui/graph.js) against `tensorhub ui --logdir`
// on the seeded project "graph" (seed_graph.cpp: a CNN trained with the TensorBoard callback's
// histograms and linked to its run by the tag log_dir, an MLP without a run, a model.json with a
// layer type tensorhub does not know). Shapes and parameter counts are checked against Keras's
// formulas computed here from the stored model.json; histograms against the stored
// weights.safetensors read here.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {Dashboard} from "./harness.mjs";

let d, page, facts, baseUrl;

before(async () => {
  d = await Dashboard.start(dd => ["--logdir", dd.ids.graph.logdir], {project: "graph"});
  ({page, baseUrl} = d);
  facts = d.ids.graph;
});

after(async () => { await d?.close(); });

const getJson = async path => (await fetch(new URL(path, baseUrl))).json();

// Keras's names ("conv2d", "batch_normalization", "dense_1", ...), output shapes and parameter
// counts (trainable, non-trainable) of a Sequential model of these layer types, from its config.
function kerasSummary(config) {
  // Keras's to_snake_case (keras/src/utils/naming.py).
  const snake = t => t.replace(/(.)([A-Z][a-z]+)/g, "$1_$2").replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
  const seen = {};
  let shape = config.input_shape;
  return config.layers.map(l => {
    const base = snake(l.type);
    const name = seen[base] === undefined ? base : `${base}_${seen[base]}`;
    seen[base] = (seen[base] ?? 0) + 1;
    let trainable = 0, nonTrainable = 0;
    const last = shape.at(-1);
    if (l.type === "Conv2D") {
      const k = l.kernel_size;
      shape = [shape[0] - k + 1, shape[1] - k + 1, l.filters];  // padding "valid", strides 1
      trainable = k * k * last * l.filters + l.filters;
    } else if (l.type === "BatchNormalization") {
      trainable = 2 * last;     // gamma, beta
      nonTrainable = 2 * last;  // moving_mean, moving_variance
    } else if (l.type === "MaxPooling2D") {
      shape = [Math.floor(shape[0] / l.pool_size), Math.floor(shape[1] / l.pool_size), last];
    } else if (l.type === "Flatten") {
      shape = [shape.reduce((a, b) => a * b, 1)];
    } else if (l.type === "Dense") {
      shape = [...shape.slice(0, -1), l.units];
      trainable = last * l.units + (l.use_bias === false ? 0 : l.units);
    } else if (l.type !== "Dropout") {
      throw new Error(`kerasSummary: no formula for ${l.type}`);
    }
    return {name, type: l.type, shape: `(None, ${shape.join(", ")})`, params: trainable + nonTrainable, trainable, nonTrainable};
  });
}

// The float32 tensors of a safetensors file (8-byte little-endian header length, JSON header).
function readSafetensors(buffer) {
  const view = new DataView(buffer);
  const n = Number(view.getBigUint64(0, true));
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 8, n)));
  const out = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__" || t.dtype !== "F32") continue;
    const [begin, end] = t.data_offsets;
    out[name] = new Float32Array(buffer.slice(8 + n + begin, 8 + n + end));
  }
  return out;
}

async function openGraph(id) {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/graph?model=${id}`);
}

test("the graph draws each layer with Keras's name, output shape and parameter count, and Keras's totals", async () => {
  const config = await getJson(`/api/models/${facts.cnn}/model.json`);
  const expected = kerasSummary(config);
  await openGraph(facts.cnn);
  await page.waitForSelector("#graph-svg .graph-node");
  const nodes = await page.$$eval("#graph-svg .graph-node", gs => gs.map(g => ({
    name: g.dataset.layer, type: g.dataset.type, shape: g.dataset.shape, params: Number(g.dataset.params)})));
  assert.deepEqual(nodes[0], {name: "input", type: "InputLayer", shape: `(None, ${config.input_shape.join(", ")})`, params: 0});
  assert.deepEqual(nodes.slice(1), expected.map(({name, type, shape, params}) => ({name, type, shape, params})));
  // One arrow into each layer from the one before it.
  const edges = await page.$$eval("#graph-svg .graph-edge", ls => ls.map(l => `${l.dataset.from}->${l.dataset.to}`));
  assert.deepEqual(edges, expected.map((l, i) => `${i ? expected[i - 1].name : "input"}->${l.name}`));
  const sum = k => expected.reduce((a, l) => a + l[k], 0).toLocaleString("en-US");
  assert.equal(await page.textContent("#graph-total"), `Total params: ${sum("params")}`);
  assert.equal(await page.textContent("#graph-trainable"), `Trainable params: ${sum("trainable")}`);
  assert.equal(await page.textContent("#graph-non-trainable"), `Non-trainable params: ${sum("nonTrainable")}`);
  assert.ok(expected.some(l => l.nonTrainable > 0), "the seed has non-trainable weights");
  await d.screenshot("graph");
});

test("the Models view links to the model's graph", async () => {
  await page.goto(`${baseUrl}#/models/${facts.cnn}`);
  await page.click("#graph-link");
  await page.waitForSelector("#graph-svg");
  assert.equal(await page.evaluate(() => location.hash), `#/graph?model=${facts.cnn}`);
});

test("a click on a layer shows its stored weights' histogram and how it moved over the epochs", async () => {
  const weights = readSafetensors(await (await fetch(new URL(`/api/models/${facts.cnn}/weights.safetensors`, baseUrl))).arrayBuffer());
  await openGraph(facts.cnn);
  await page.click('#graph-svg .graph-node[data-layer="dense"]');
  const box = '#graph-layer .weight-tensor[data-tensor="dense.weight"]';
  await page.waitForSelector(`${box} .weight-hist`);
  // 30 equal bins over [min, max] of the stored kernel, counted here.
  const values = weights["dense.weight"];
  let lo = Infinity, hi = -Infinity;
  for (const v of values) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  const counts = new Array(30).fill(0);
  for (const v of values) counts[Math.min(29, Math.max(0, Math.floor((v - lo) / ((hi - lo) / 30))))] += 1;
  const shown = (await page.getAttribute(`${box} .weight-hist`, "data-counts")).split(",").map(Number);
  assert.deepEqual(shown, counts);
  assert.equal(shown.reduce((a, b) => a + b, 0), values.length);
  const edges = (await page.getAttribute(`${box} .weight-hist`, "data-edges")).split(",").map(Number);
  assert.equal(edges[0], lo);
  assert.equal(edges.at(-1), hi);
  // The TensorBoard callback's histograms, one per epoch; the last is of the weights saved.
  assert.equal(await page.getAttribute(`${box} .weight-history`, "data-steps"),
               Array.from({length: facts.epochs}, (_, i) => i).join(","));
  assert.equal(await page.$$eval(`${box} .weight-history .ridge`, rs => rs.length), facts.epochs);
  const api = await getJson(`/api/models/${facts.cnn}/layers/dense/histograms`);
  const history = api.tensors.find(t => t.name === "dense.weight").history;
  assert.equal(history.run, "cnn/train");
  assert.deepEqual([history.min.at(-1), history.max.at(-1)], [lo, hi]);
  assert.deepEqual(history.num, new Array(facts.epochs).fill(values.length));
  await d.screenshot("graph-layer-histograms");
});

test("a model a spec trained with the TensorBoard callback is linked to its run by the spec itself", async () => {
  await openGraph(facts.spec);
  await page.click('#graph-svg .graph-node[data-layer="dense"]');
  const box = '.weight-tensor[data-tensor="dense.weight"]';
  await page.waitForSelector(`${box} .weight-history`);
  assert.equal(await page.getAttribute(`${box} .weight-history`, "data-steps"),
               Array.from({length: facts.spec_epochs}, (_, i) => i).join(","));
  const graph = await getJson(`/api/models/${facts.spec}/graph`);
  assert.equal(graph.run, "spec/train");
  assert.equal(graph.tags.log_dir, `${facts.logdir}/spec`);
});

test("a model without a TensorBoard run shows its histograms and says why there is no history", async () => {
  await openGraph(facts.mlp);
  await page.click('#graph-svg .graph-node[data-layer="dense_1"]');
  await page.waitForSelector('.weight-tensor[data-tensor="dense_1.weight"] .weight-hist');
  assert.match(await page.textContent('.weight-tensor[data-tensor="dense_1.weight"] .history-note'), /no "log_dir" tag/);
  // use_bias false: the kernel alone.
  assert.deepEqual(await page.$$eval(".weight-tensor", ts => ts.map(t => t.dataset.tensor)), ["dense_1.weight"]);
});

test("a model.json the graph cannot place is explained in the page, with its text", async () => {
  await openGraph(facts.bad);
  await page.waitForSelector("#graph-error");
  const message = await page.textContent("#graph-error");
  assert.match(message, /cannot be drawn as a graph/);
  assert.match(message, /layers\[1\]\.type "Transformer" is not a layer/);
  assert.deepEqual(JSON.parse(await page.textContent("#graph-model-json")), await getJson(`/api/models/${facts.bad}/model.json`));
  assert.equal(await page.$("#graph-svg"), null);
  assert.equal(await page.isVisible("#error"), false);
  await d.screenshot("graph-unplaceable");
});
