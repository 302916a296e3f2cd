// Browser tests of the Try-a-model view (ui/try.js) against `tensorhub ui` on project "try" of
// the seeded hub (seed_try.cpp: two models trained on Fashion-MNIST). The page's answer for an
// uploaded Fashion-MNIST test image (tests/data/fashion_mnist_t10k_0.png) is checked against a
// predict call this test makes itself, from the PNG decoded here with node's zlib and the
// preprocessing try.js documents, written again here from that description.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {readFileSync} from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import {Dashboard, root} from "./harness.mjs";
import {encodeGreyPng} from "../data/grey_png.mjs";

const PNG = path.join(root, "tests/data/fashion_mnist_t10k_0.png");
const FASHION = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];
let d, page, ids, baseUrl;

before(async () => {
  d = await Dashboard.start([], {project: "try"});
  ({page, ids, baseUrl} = d);
});

after(async () => { await d?.close(); });

// An 8-bit grey, non-interlaced PNG (what make_fashion_png.mjs writes): {w, h, pixels}.
function decodeGreyPng(file) {
  const bytes = readFileSync(file);
  let at = 8, w = 0, h = 0;
  const idat = [];
  while (at < bytes.length) {
    const len = bytes.readUInt32BE(at), type = bytes.toString("latin1", at + 4, at + 8);
    const data = bytes.subarray(at + 8, at + 8 + len);
    if (type === "IHDR") {
      [w, h] = [data.readUInt32BE(0), data.readUInt32BE(4)];
      assert.deepEqual([data[8], data[9], data[12]], [8, 0, 0], "8-bit grey, not interlaced");
    }
    if (type === "IDAT") idat.push(data);
    at += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const pixels = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    const filter = raw[y * (w + 1)];
    for (let x = 0; x < w; x++) {
      const v = raw[y * (w + 1) + 1 + x];
      const a = x ? pixels[y * w + x - 1] : 0, b = y ? pixels[(y - 1) * w + x] : 0, c = x && y ? pixels[(y - 1) * w + x - 1] : 0;
      const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
      const predictor = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][filter];
      pixels[y * w + x] = (v + predictor) & 0xff;
    }
  }
  return {w, h, pixels};
}

// try.js's documented preprocessing, written from its description: ink (inverted or not); a
// picture already 28x28 is the input as it is; any other size: the bounding box of ink above 10%
// of the maximum, scaled by area averaging into 20x20 keeping the aspect ratio, placed in 28x28
// with its centre of mass at (14, 14); then / 255.
function preprocess({w, h, pixels}, invert) {
  const ink = Array.from(pixels, g => (invert ? 255 - g : g));
  if (w === 28 && h === 28) return ink.map(v => v / 255);
  const max = Math.max(...ink);
  let [x0, y0, x1, y1] = [w, h, -1, -1];
  ink.forEach((v, i) => {
    if (v <= 0.1 * max) return;
    const x = i % w, y = Math.floor(i / w);
    [x0, y0, x1, y1] = [Math.min(x0, x), Math.min(y0, y), Math.max(x1, x), Math.max(y1, y)];
  });
  const bw = x1 - x0 + 1, bh = y1 - y0 + 1;
  const s = Math.min(20 / bw, 20 / bh);
  const nw = Math.max(1, Math.round(bw * s)), nh = Math.max(1, Math.round(bh * s));
  // Output pixel (i, j) averages source area [x0 + i bw/nw, x0 + (i+1) bw/nw) x [...).
  const cover = (lo, hi, p) => Math.max(0, Math.min(hi, p + 1) - Math.max(lo, p));
  const patch = [];
  for (let j = 0; j < nh; j++)
    for (let i = 0; i < nw; i++) {
      const [ax, bx, ay, by] = [i * bw / nw, (i + 1) * bw / nw, j * bh / nh, (j + 1) * bh / nh];
      let sum = 0;
      for (let y = Math.floor(ay); y < Math.ceil(by) && y < bh; y++)
        for (let x = Math.floor(ax); x < Math.ceil(bx) && x < bw; x++)
          sum += ink[(y + y0) * w + x + x0] * cover(ax, bx, x) * cover(ay, by, y);
      patch.push(sum / ((bx - ax) * (by - ay)));
    }
  const total = patch.reduce((a, b) => a + b, 0);
  const cx = patch.reduce((a, v, k) => a + v * ((k % nw) + 0.5), 0) / total;
  const cy = patch.reduce((a, v, k) => a + v * (Math.floor(k / nw) + 0.5), 0) / total;
  const [ox, oy] = [Math.round(14 - cx), Math.round(14 - cy)];
  const field = new Array(784).fill(0);
  patch.forEach((v, k) => {
    const x = (k % nw) + ox, y = Math.floor(k / nw) + oy;
    if (x >= 0 && x < 28 && y >= 0 && y < 28) field[y * 28 + x] = v / 255;
  });
  return field;
}

// The image twice as large (each pixel 2x2) and in negative: dark on white, as a scan would be.
function scannedTwiceAsLarge({w, h, pixels}) {
  const out = new Uint8Array(4 * w * h);
  for (let y = 0; y < 2 * h; y++)
    for (let x = 0; x < 2 * w; x++) out[y * 2 * w + x] = 255 - pixels[(y >> 1) * w + (x >> 1)];
  return {w: 2 * w, h: 2 * h, pixels: out};
}

// The probabilities a predict call of our own gives (the model outputs logits: softmax).
async function directProbabilities(modelId, input) {
  const res = await fetch(new URL(`/v1/models/${modelId}:predict`, baseUrl), {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({instances: [input]}),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  const logits = body.predictions[0];
  const m = Math.max(...logits), e = logits.map(x => Math.exp(x - m)), sum = e.reduce((a, b) => a + b, 0);
  return e.map(x => x / sum);
}

// What the page shows: each bar's class name and probability, and the top class.
async function shown() {
  const rows = await page.$$eval(".try-row", rs => rs.map(r => [r.querySelector(".try-label").textContent,
                                                                 Number(r.dataset.probability)]));
  return {names: rows.map(r => r[0]), probabilities: rows.map(r => r[1]), top: await page.textContent("#try-top")};
}

const argmax = xs => xs.indexOf(Math.max(...xs));

function assertClose(actual, expected, what) {
  assert.equal(actual.length, expected.length, what);
  actual.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) <= 1e-5, `${what}[${i}]: page ${v}, direct ${expected[i]}`));
}

test("an uploaded Fashion-MNIST PNG answers as a direct predict call, and otherwise with invert switched", async () => {
  await page.goto(`${baseUrl}#/try?model=${ids.try_mlp}`);
  await page.waitForSelector(`#try-panel[data-model="${ids.try_mlp}"]`);
  assert.equal(await page.isChecked("#try-invert"), true, "invert is on by default for a 28x28 grey model");
  assert.equal(await page.inputValue("#try-model"), String(ids.try_mlp));

  // The dataset's own image (28x28, light on black): taken as it is, invert switched off by its
  // dark border, and the model names it (test image 0 is an ankle boot).
  await page.setInputFiles("#try-file", PNG);
  await page.waitForSelector('#try-panel[data-seq="1"]');
  assert.equal(await page.isChecked("#try-invert"), false, "a dark-bordered picture turns invert off");
  const image = decodeGreyPng(PNG);
  const plain = await shown();
  const expectPlain = await directProbabilities(ids.try_mlp, preprocess(image, false));
  assert.deepEqual(plain.names, FASHION);
  assertClose(plain.probabilities, expectPlain, "invert off");
  assert.equal(plain.top, FASHION[argmax(expectPlain)]);
  assert.equal(plain.top, "Ankle boot");
  // The preview is the input the model got: its grey levels are the input's, rounded.
  const preview = await page.evaluate(() => {
    const c = document.getElementById("try-preview");
    return Array.from(c.getContext("2d").getImageData(0, 0, c.width, c.height).data.filter((v, i) => i % 4 === 0));
  });
  const expectedInput = preprocess(image, false);
  preview.forEach((v, i) => assert.ok(Math.abs(v - 255 * expectedInput[i]) <= 0.5 + 1e-6, `preview[${i}]: ${v}`));
  await d.screenshot("try");  // README's picture (docs/images/dashboard.png)

  // Switched on by hand: the negative is another answer, still the direct call's.
  await page.check("#try-invert");
  await page.waitForSelector('#try-panel[data-seq="2"]');
  const inverted = await shown();
  const expectInverted = await directProbabilities(ids.try_mlp, preprocess(image, true));
  assertClose(inverted.probabilities, expectInverted, "invert on");
  assert.notEqual(inverted.top, plain.top);
  assert.ok(Math.max(...plain.probabilities.map((p, i) => Math.abs(p - inverted.probabilities[i]))) > 0.1);
  await d.screenshot("try-inverted");

  // A 56x56 scan of it (dark on white): invert on by its light border, boxed and centred as
  // MNIST's digits; the page again equals the direct call.
  const scan = scannedTwiceAsLarge(image);
  await page.setInputFiles("#try-file", {name: "scan.png", mimeType: "image/png", buffer: encodeGreyPng(scan)});
  await page.waitForSelector('#try-panel[data-seq="3"]');
  assert.equal(await page.isChecked("#try-invert"), true, "a light-bordered picture turns invert on");
  const scanned = await shown();
  assertClose(scanned.probabilities, await directProbabilities(ids.try_mlp, preprocess(scan, true)), "scan");
});

test("drawing with the mouse gives a preview and probabilities (a [28, 28, 1] model taking 0..255)", async () => {
  await page.goto(`${baseUrl}#/try?model=${ids.try_u8}`);
  await page.waitForSelector(`#try-panel[data-model="${ids.try_u8}"]`);
  assert.match(await page.textContent("#try-model-info"), /input \[28,28,1\] in 0\.\.255, softmax/);
  const box = await page.locator("#try-draw").boundingBox();
  // A vertical stroke (a trouser leg, or a 1).
  await page.mouse.move(box.x + 140, box.y + 50);
  await page.mouse.down();
  for (let y = 60; y <= 230; y += 10) await page.mouse.move(box.x + 140, box.y + y);
  await page.mouse.up();
  await page.waitForSelector('#try-panel[data-seq="1"]');
  const lit = await page.evaluate(() => {
    const c = document.getElementById("try-preview");
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i] > 0) n++;
    return {n, w: c.width, h: c.height};
  });
  assert.deepEqual([lit.w, lit.h], [28, 28]);
  assert.ok(lit.n > 20, `lit preview pixels: ${lit.n}`);
  const {names, probabilities} = await shown();
  assert.deepEqual(names, FASHION);
  assert.ok(Math.abs(probabilities.reduce((a, b) => a + b, 0) - 1) < 1e-5);
  await d.screenshot("try-draw");
});
