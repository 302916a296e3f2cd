// Browser tests of the Projector view (#/projector?run=RUN, ui/projector.js) against `tensorhub ui
// --logdir` on the seeded projector runs (seed_projector.cpp: 10,000 x 64 points, 40 words in
// three groups, 25 points with a sprite, and three runs TensorBoard would refuse). Neighbours
// and their distances are checked against a brute-force computation here on the TSV file; the
// PCA's explained variance against numpy (Debian's python3).
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {execFileSync} from "node:child_process";
import {readFileSync} from "node:fs";
import {Dashboard} from "./harness.mjs";

let d, page, facts, baseUrl;

before(async () => {
  d = await Dashboard.start(dd => ["--logdir", dd.ids.projector.logdir]);
  ({page, baseUrl} = d);
  facts = d.ids.projector;
});

after(async () => { await d?.close(); });

// The tensor TSV as float32 values (what the page holds), and the words' labels.
const readTsv = file => readFileSync(file, "utf8").split("\n").filter(l => l).map(l => l.split("\t").map(v => Math.fround(Number(v))));
const wordLabels = () => readFileSync(facts.words.tsv.replace("tensor.tsv", "metadata.tsv"), "utf8").split("\n").slice(1)
    .filter(l => l).map(l => l.split("\t")[0]);

async function open(run, selector = "#projector-canvas[data-first-frame-ms]") {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/projector?run=${encodeURIComponent(run)}`);
  await page.waitForSelector(selector, {timeout: 30000});
}

// [r, g, b] of the canvas at (x, y).
const pixelAt = (x, y) => page.evaluate(([x, y]) =>
  [...document.getElementById("projector-canvas").getContext("2d").getImageData(Math.round(x), Math.round(y), 1, 1).data.slice(0, 3)], [x, y]);

test("10,000 points of 64 dimensions are drawn in 3-D by PCA, which rotates with a drag", async () => {
  await open(facts.big.run);
  const canvas = "#projector-canvas";
  assert.equal(await page.getAttribute(canvas, "data-points"), "10000");
  assert.equal(await page.getAttribute(canvas, "data-projection"), "pca3");
  const painted = () => page.$eval(canvas, c => {
    const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < px.length; i += 4) if (px[i] !== 255 || px[i + 1] !== 255 || px[i + 2] !== 255) ++n;
    return n;
  });
  const before = await painted();
  assert.ok(before > 10000, `${before} painted pixels`);
  // The share of the variance PCA reports, against numpy's eigenvalues of the covariance.
  const shares = JSON.parse(execFileSync("/usr/bin/python3", ["-c", `
import json, sys, numpy as np
x = np.loadtxt(sys.argv[1], delimiter="\\t", dtype=np.float32).astype(np.float64)
w = np.linalg.eigvalsh(np.cov(x, rowvar=False, bias=True))[::-1]
print(json.dumps([float(v) for v in w[:3] / w.sum()]))`, facts.big.tsv], {encoding: "utf8"}));
  const note = await page.textContent("#projector-layout-note");
  assert.match(note, new RegExp(`describe ${(100 * shares.reduce((a, b) => a + b)).toFixed(1)}% of the variance ` +
                                `\\(${shares.map(s => (100 * s).toFixed(1)).join("%, ")}%\\)`));
  const drawn = Number(await page.getAttribute(canvas, "data-drawn"));
  const box = await page.$eval(canvas, c => { const r = c.getBoundingClientRect(); return {x: r.x, y: r.y}; });
  await page.mouse.move(box.x + 300, box.y + 300);
  await page.mouse.down();
  for (let i = 1; i <= 10; ++i) await page.mouse.move(box.x + 300 + 12 * i, box.y + 300 + 4 * i);
  await page.mouse.up();
  await page.waitForFunction(n => Number(document.getElementById("projector-canvas").dataset.drawn) > n, drawn);
  assert.ok(await page.evaluate(() => window.projectorState.view.yaw) > 0.6, "the drag turned the view");
  await d.screenshot("projector-10000x64");
  await page.selectOption("#projector-projection", "pca2");
  await page.waitForFunction(() => document.getElementById("projector-canvas").dataset.projection === "pca2");
  assert.match(await page.textContent("#projector-layout-note"), /components 1-2 describe/);
});

test("points are coloured by a metadata column", async () => {
  await open(facts.words.run);
  assert.equal(await page.inputValue("#projector-colour"), "group");
  const legend = await page.$$eval("#projector-legend .legend-row", rows => rows.map(r => r.dataset.value));
  assert.deepEqual(legend, ["animal", "colour", "royalty"]);
  await page.selectOption("#projector-projection", "pca2");
  await page.waitForFunction(() => document.getElementById("projector-canvas").dataset.projection === "pca2");
  await page.waitForTimeout(100);
  // Each group's colour is under its points (palette order = the legend's sorted order).
  const palette = {animal: [0x1f, 0x77, 0xb4], colour: [0xff, 0x7f, 0x0e], royalty: [0x2c, 0xa0, 0x2c]};
  const points = await page.evaluate(() => { const p = window.projectorState; return [...Array(p.n).keys()].map(i => ({x: p.sx[i], y: p.sy[i], group: p.meta.rows[i][1]})); });
  let agree = 0;
  for (const pt of points) if (JSON.stringify(await pixelAt(pt.x, pt.y)) === JSON.stringify(palette[pt.group])) ++agree;
  assert.ok(agree >= points.length - 3, `${agree} of ${points.length} points show their group's colour`);
  await page.selectOption("#projector-colour", "");
  await page.waitForFunction(() => document.querySelectorAll("#projector-legend .legend-row").length === 0);
});

test("typing a label selects its point", async () => {
  await open(facts.words.run);
  await page.fill("#projector-search", "kin");
  await page.waitForSelector("#projector-matches li");
  assert.deepEqual(await d.cellTexts("#projector-matches li"), ["king", "kingdom"]);
  assert.equal(await page.$("#projector-selected"), null, "a prefix selects nothing yet");
  await page.fill("#projector-search", "king");
  await page.waitForSelector("#projector-selected");
  assert.equal(await page.textContent("#projector-selected"), "king");
  assert.equal(Number(await page.getAttribute("#projector-selected", "data-index")), wordLabels().indexOf("king"));
  await d.screenshot("projector-king");
});

test("the k nearest neighbours in the original space are listed with their distances", async () => {
  const rows = readTsv(facts.words.tsv), labels = wordLabels();
  const king = labels.indexOf("king");
  const expected = metric => rows.map((v, i) => {
    if (metric === "cosine") {
      let dot = 0, a = 0, b = 0;
      for (let j = 0; j < v.length; ++j) { dot += rows[king][j] * v[j]; a += rows[king][j] ** 2; b += v[j] ** 2; }
      return {i, dist: 1 - dot / (Math.sqrt(a) * Math.sqrt(b))};
    }
    return {i, dist: Math.hypot(...v.map((x, j) => x - rows[king][j]))};
  }).filter(x => x.i !== king).sort((x, y) => x.dist - y.dist).slice(0, 10);
  await open(facts.words.run);
  await page.fill("#projector-search", "king");
  for (const metric of ["cosine", "euclidean"]) {
    await page.selectOption("#projector-metric", metric);
    await page.waitForFunction(() => document.querySelectorAll("#projector-neighbours tbody tr").length === 10);
    const shown = await page.$$eval("#projector-neighbours tbody tr", trs => trs.map(tr => ({
      i: Number(tr.dataset.index), dist: Number(tr.dataset.distance), label: tr.children[1].textContent})));
    const want = expected(metric);
    assert.deepEqual(shown.map(s => s.i), want.map(w => w.i), metric);
    assert.deepEqual(shown.map(s => s.label), want.map(w => labels[w.i]));
    shown.forEach((s, r) => assert.ok(Math.abs(s.dist - want[r].dist) < 1e-9, `${metric} #${r}: ${s.dist} vs ${want[r].dist}`));
  }
  // They light up (a ring around each); the other points fade to pale tints.
  const lit = await page.evaluate(() => [...window.projectorState.lit].filter(x => x === 1).length);
  assert.equal(lit, 10);
  await page.waitForTimeout(100);
  const others = await page.evaluate(() => { const p = window.projectorState; return [...Array(p.n).keys()].filter(i => !p.lit[i]).map(i => [p.sx[i], p.sy[i]]); });
  let pale = 0;
  for (const [x, y] of others) if ((await pixelAt(x, y)).every(v => v >= 200)) ++pale;
  assert.ok(pale >= others.length - 3, `${pale} of ${others.length} other points faded`);
  await page.fill("#projector-k", "3");
  await page.dispatchEvent("#projector-k", "change");
  await page.waitForFunction(() => document.querySelectorAll("#projector-neighbours tbody tr").length === 3);
});

test("a click on a point selects it", async () => {
  await open(facts.words.run);
  const target = await page.evaluate(() => { const p = window.projectorState; return {x: p.sx[5], y: p.sy[5], label: p.meta.rows[5][0]}; });
  const box = await page.$eval("#projector-canvas", c => { const r = c.getBoundingClientRect(); return {x: r.x, y: r.y}; });
  await page.mouse.click(box.x + target.x, box.y + target.y);
  await page.waitForSelector("#projector-selected");
  // The nearest point under the cursor: point 5 unless another lies exactly on it.
  const picked = Number(await page.getAttribute("#projector-selected", "data-index"));
  const dist = await page.evaluate(([i, x, y]) => Math.hypot(window.projectorState.sx[i] - x, window.projectorState.sy[i] - y), [picked, target.x, target.y]);
  assert.ok(dist <= 1, `picked point ${picked} at ${dist} px`);
});

test("sprites are drawn where the config gives them", async () => {
  await open(facts.images.run);
  assert.equal(await page.isChecked("#projector-sprites"), true);
  await page.waitForFunction(() => window.projectorState.sprite.naturalWidth > 0);
  assert.equal(await page.evaluate(() => window.projectorState.sprite.naturalWidth), 5 * facts.images.single_image_dim[0]);
  await page.selectOption("#projector-projection", "pca2");
  await page.waitForTimeout(150);
  // Images 7, 15 and 23 are lit in every row, grey 80 + 7 i: their centre pixel shows it
  // (unless another image lies over it).
  let agree = 0;
  for (const i of [7, 15, 23]) {
    const at = await page.evaluate(i => [window.projectorState.sx[i], window.projectorState.sy[i]], i);
    const [r, g, b] = await pixelAt(at[0], at[1]);
    if (r === g && g === b && Math.abs(r - (80 + 7 * i)) <= 1) ++agree;
  }
  assert.ok(agree >= 2, `${agree} of 3 sprite images under their points`);
  await d.screenshot("projector-sprites");
});

test("t-SNE (the npm library, loaded on demand) lays the points out in 2-D", async () => {
  await open(facts.words.run);
  await page.selectOption("#projector-projection", "tsne");
  await page.waitForFunction(() => Number(document.getElementById("projector-status").dataset.iteration) >= 100, null, {timeout: 30000});
  assert.equal(await page.getAttribute("#projector-canvas", "data-projection"), "tsne");
  assert.match(await page.textContent("#projector-layout-note"), /t-SNE .* of the first 40 of 40 points/);
  const spread = await page.evaluate(() => { const c = window.projectorState.layout.coords; return Math.max(...c) - Math.min(...c); });
  assert.ok(spread > 1, `t-SNE coordinates span ${spread}`);
});

for (const [name, run, pattern] of [
  ["a config path that leaves its directory", "bad_path", /tensor_path "\.\.\/outside\.tsv" resolves outside the config's directory/],
  ["tensor rows that disagree with the metadata", "bad_rows", /metadata\.tsv: 4 metadata rows, but the tensor has 5 rows/],
  ["a tensor TSV with a non-number", "bad_number", /tensor\.tsv:2: value 2 "abc" is not a number/],
]) {
  test(`${name} is a clear message in the page`, async () => {
    await open(facts[run], "#projector-error");
    assert.match(await page.textContent("#projector-error"), new RegExp(`The projector cannot show run ${facts[run]}`));
    assert.match(await page.textContent("#projector-error-text"), pattern);
    assert.equal(await page.$("#projector-canvas"), null);
    // The other runs stay one click away.
    assert.ok((await page.$$("#projector-error a")).length >= 3);
    await d.screenshot(`projector-${facts[run]}`);
  });
}
