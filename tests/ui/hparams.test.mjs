// Browser tests of the Hyperparameters view (ui/hparams.js) on the seeded searches
// (seed_searches.cpp): the table's order, a drag on a parallel-coordinates axis, a click that
// opens a trial's curves, and a trial with no metric yet. Run by scripts/test:
//   TENSORHUB_BIN_DIR=build/bin node --test tests/ui/
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {Dashboard} from "./harness.mjs";

let d, page, ids, baseUrl;

before(async () => {
  d = await Dashboard.start([], {project: "tune"});  // seed_searches' project
  ({page, ids, baseUrl} = d);
});

after(async () => { await d?.close(); });

const rowIds = () => page.$$eval("#hparams-table tbody tr", rows => rows.map(r => r.dataset.id));
const scoreOf = (trial) => ids.hb_scores[trial];

// A fresh page each time (a goto to the same #hash would keep the last test's sort and filters).
async function openSearch(name) {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/hparams?search=${name}`);
  await page.waitForSelector("#hparams-table tbody tr");
}

test("a search's trials in trial order, then sorted by the objective, best first", async () => {
  await openSearch("hb-mlp");
  const trials = Object.keys(ids.hb_scores).sort();
  assert.equal(trials.length, ids.hb_trials);
  assert.deepEqual(await rowIds(), trials);
  await page.click('#hparams-table th[data-key="val_accuracy"]');
  await page.waitForSelector('#hparams-table th[data-key="val_accuracy"].sorted-desc');
  // Best first; equal scores keep the trial order.
  const expected = [...trials].sort((a, b) => scoreOf(b) - scoreOf(a) || a.localeCompare(b));
  assert.deepEqual(await rowIds(), expected);
  const cells = await d.cellTexts('#hparams-table tbody [data-col="val_accuracy"]');
  assert.deepEqual(cells.map(Number), expected.map(scoreOf));
  assert.equal(cells[0], String(ids.hb_best_score));
  // One line per trial in the parallel coordinates, and an axis per column.
  assert.equal(await page.$$eval("#hparams-parallel polyline", ls => ls.length), ids.hb_trials);
  assert.deepEqual(await page.$$eval("#hparams-parallel [data-axis]", gs => gs.map(g => g.dataset.axis)),
                   ["lr", "units", "optimizer", "tuner/epochs", "val_accuracy"]);
  await d.screenshot("hparams");
});

test("a filter per column keeps the matching trials", async () => {
  await openSearch("hb-mlp");
  await page.fill('#hparams-table input[data-filter="optimizer"]', "adam");
  await page.press('#hparams-table input[data-filter="optimizer"]', "Enter");
  const adam = await page.evaluate(async () => (await (await fetch("/api/hparams?search=hb-mlp")).json())
      .rows.filter(r => r.values.optimizer === "adam").map(r => r.id));
  assert.ok(adam.length > 0 && adam.length < ids.hb_trials, `adam trials: ${adam.length}`);
  await page.waitForFunction(n => document.querySelectorAll("#hparams-table tbody tr").length === n, adam.length);
  assert.deepEqual(await rowIds(), adam);
  assert.deepEqual(new Set(await d.cellTexts('#hparams-table tbody [data-col="optimizer"]')), new Set(["adam"]));
});

test("a drag on an axis keeps only the trials in the range", async () => {
  await openSearch("hb-mlp");
  const hit = await page.$('#hparams-parallel [data-axis="val_accuracy"] .pc-hit');
  const box = await hit.boundingBox();
  const x = box.x + box.width / 2;
  // From a tenth of the axis down to its middle: the upper half of the scores, roughly.
  await page.mouse.move(x, box.y + box.height * 0.1);
  await page.mouse.down();
  await page.mouse.move(x, box.y + box.height * 0.3, {steps: 4});
  await page.mouse.move(x, box.y + box.height * 0.55, {steps: 4});
  await page.mouse.up();
  const axis = '#hparams-parallel [data-axis="val_accuracy"]';
  await page.waitForSelector(`${axis}[data-range-lo]`);
  const lo = Number(await page.getAttribute(axis, "data-range-lo"));
  const hi = Number(await page.getAttribute(axis, "data-range-hi"));
  // The trials in [lo, hi], counted here from the seed's scores.
  const inside = Object.keys(ids.hb_scores).filter(t => scoreOf(t) >= lo && scoreOf(t) <= hi).sort();
  assert.ok(inside.length > 0 && inside.length < ids.hb_trials, `${inside.length} trials in [${lo}, ${hi}]`);
  assert.deepEqual(await rowIds(), inside);
  assert.equal(await page.textContent("#hparams-count"),
               `${inside.length} of ${ids.hb_trials} trials (ranges on val_accuracy; click an axis to clear its range)`);
  assert.equal(await page.$$eval("#hparams-parallel polyline.kept", ls => ls.length), inside.length);
  await d.screenshot("hparams-range");
  // A click without a drag clears the range.
  const again = await (await page.$(`${axis} .pc-hit`)).boundingBox();
  await page.mouse.click(again.x + again.width / 2, again.y + again.height / 2);
  await page.waitForFunction(n => document.querySelectorAll("#hparams-table tbody tr").length === n, ids.hb_trials);
});

test("clicking a trial opens its curves", async () => {
  await openSearch("hb-mlp");
  await page.click('#hparams-table th[data-key="val_accuracy"]');
  await page.waitForSelector('#hparams-table th[data-key="val_accuracy"].sorted-desc');
  // The Curves view may rewrite its URL once open: the hash the click asked for is recorded.
  await page.evaluate(() => {
    window.__hashes = [];
    addEventListener("hashchange", e => window.__hashes.push(new URL(e.newURL).hash));
  });
  await page.click("#hparams-table tbody tr:first-child td[data-col='lr']");
  await page.waitForFunction(() => window.__hashes.length > 0);
  assert.equal(await page.evaluate(() => window.__hashes[0]), `#/curves?tasks=${ids.hb_best_task}`);
});

test("a trial with no metric yet still appears, on the axis's none mark", async () => {
  await openSearch("asha-live");
  const row = `#hparams-table tr[data-id="${ids.asha_running_trial}"]`;
  await page.waitForSelector(row);
  assert.equal(await page.textContent(`${row} [data-col="val_accuracy"]`), "");
  assert.equal(await page.textContent(`${row} [data-col="status"]`), "running");
  assert.equal(await page.$$eval("#hparams-table tbody tr", rows => rows.length), 5);
  // Its line ends on the "none" mark under the objective's axis.
  const line = await page.getAttribute(`#hparams-parallel polyline[data-id="${ids.asha_running_trial}"]`, "points");
  const lastY = Number(line.trim().split(" ").at(-1).split(",")[1]);
  assert.equal(lastY, 300 - 40 + 18);
  // Sorted by the objective, runs without one stay last.
  await page.click('#hparams-table th[data-key="val_accuracy"]');
  await page.waitForSelector('#hparams-table th[data-key="val_accuracy"].sorted-desc');
  const cells = await d.cellTexts('#hparams-table tbody [data-col="val_accuracy"]');
  assert.deepEqual(cells.slice(-2), ["", ""]);
  await d.screenshot("hparams-asha");
});

test("without a search, every task of the project with its hyperparameters", async () => {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/hparams`);
  await page.waitForSelector(`#hparams-table tr[data-id="${ids.asha_running_task}"]`);
  assert.equal(await page.$eval("#hparams-source", s => s.value), "");
  // Every trial of both searches is a task; the running one has no val_accuracy yet.
  assert.equal(await page.$$eval("#hparams-table tbody tr", rows => rows.length), ids.hb_trials + 5);
  assert.equal(await page.textContent(`#hparams-table tr[data-id="${ids.hb_best_task}"] [data-col="val_accuracy"]`),
               String(ids.hb_best_score));
  assert.equal(await page.textContent(`#hparams-table tr[data-id="${ids.asha_running_task}"] [data-col="val_accuracy"]`), "");
  assert.equal(await page.textContent(`#hparams-table tr[data-id="${ids.asha_running_task}"] [data-col="status"]`), "running");
});

// The Curves view (ui/curves.js) of this project's trials.
// Pixels of the chart's canvas near the colour (r, g, b): what a series drew.
function pixelsOf([r, g, b]) {
  return page.$eval("#curves-chart canvas", (c, [r, g, b]) => {
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < data.length; i += 4)
      if (data[i + 3] > 200 && Math.abs(data[i] - r) < 40 && Math.abs(data[i + 1] - g) < 40 && Math.abs(data[i + 2] - b) < 40) ++n;
    return n;
  }, [r, g, b]);
}

test("runs of a single epoch (first-round Hyperband trials) are dots, on an x range around that epoch", async () => {
  // The seeded Hyperband search's trials that reported one epoch (hb-mlp, seed_searches.cpp).
  await page.goto(`${baseUrl}#/overview`);
  const single = await page.evaluate(async () => {
    const runs = (await (await fetch("/api/runs")).json()).runs.filter(r => r.source === "epochs" && r.tags.includes("val_accuracy"));
    const out = [];
    for (const r of runs) {
      const s = await (await fetch(`/api/scalars?source=epochs&run=${r.run}&tag=val_accuracy&width=900`)).json();
      if (s.count === 1) out.push({run: r.run, x: s.xs[0]});
    }
    return out;
  });
  assert.ok(single.length >= 2, `${single.length} single-epoch runs seeded`);
  const [a, b] = single.filter(s => s.x === single[0].x);
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/curves?tasks=${a.run},${b.run}&tag=val_accuracy&smoothing=0`);
  await page.waitForSelector("#curves-chart[data-drawn]");
  assert.equal(await page.getAttribute("#curves-chart", "data-series"), "2");
  // Each run's colour is on the canvas (its dot): blue #2f6fde and orange #d9480f.
  assert.ok(await pixelsOf([0x2f, 0x6f, 0xde]) > 10, "the first run drew nothing");
  assert.ok(await pixelsOf([0xd9, 0x48, 0x0f]) > 10, "the second run drew nothing");
  const [min, max] = await page.evaluate(() => [window.curvesChart.scales.x.min, window.curvesChart.scales.x.max]);
  assert.ok(min < a.x && a.x < max && max - min <= 2, `x range ${min}..${max} around epoch ${a.x}`);
  // Epochs are whole numbers: every tick of the x axis is an integer.
  const ticks = await page.evaluate(() => window.curvesChart.axes[0]._splits);
  assert.ok(ticks.length && ticks.every(Number.isInteger), `x ticks ${ticks}`);
  await d.screenshot("curves-single-point");
});

test("a long category label is cut short (whole in its title) and does not run over the axis to its left", async () => {
  const long = "an-optimizer-with-a-very-long-name-indeed-longer-than-the-room-between-two-axes-of-the-chart";
  d.cli(["task", "create", "--task-name", "long-label", "--command", "true",
         "--hyper-parameters", JSON.stringify({optimizer: long, units: 64, lr: 0.01})]);
  await page.setViewportSize({width: 1280, height: 800});
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/hparams`);
  await page.waitForSelector('#hparams-parallel [data-axis="optimizer"]');
  const facts = await page.evaluate(long => {
    const axes = [...document.querySelectorAll("#hparams-parallel .pc-axis")];
    const i = axes.findIndex(a => a.dataset.axis === "optimizer");
    const left = axes[i - 1].querySelector(".pc-spine").getBoundingClientRect().x;
    const labels = [...axes[i].querySelectorAll(".pc-label:not(.pc-none)")];
    const cut = labels.find(l => l.querySelector("title")?.textContent === long);
    return {left, minX: Math.min(...labels.map(l => l.getBoundingClientRect().x)), cut: cut?.firstChild.textContent,
            all: labels.map(l => l.textContent)};
  }, long);
  assert.ok(facts.cut && facts.cut.endsWith("…") && long.startsWith(facts.cut.slice(0, -1)), `label ${facts.cut} of ${facts.all}`);
  assert.ok(facts.minX > facts.left, `a label starts at ${facts.minX}, the axis to its left is at ${facts.left}`);
});
