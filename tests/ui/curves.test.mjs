// Browser tests of the Curves view (#/curves, ui/curves.js) against `tensorhub ui --logdir` on
// the seeded hub (seed_curves.cpp: a 100,000-point event-file series with NaN, +Inf, -Inf, a
// zero, a negative value and a spike at a known step; a fit written by the TensorBoard
// callback; three tasks' epoch reports). They check what a person sees: a drawn chart, the
// smoothed value TensorBoard would show, the spike after the server's reduction, the log scale,
// the marks, many runs on one chart, the CSV download.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {readFileSync} from "node:fs";
import {Dashboard} from "./harness.mjs";

let d, page, facts, baseUrl;

before(async () => {
  d = await Dashboard.start(dd => ["--logdir", dd.ids.curves.logdir]);
  ({page, baseUrl} = d);
  facts = d.ids.curves;
});

after(async () => { await d?.close(); });

const big = () => `${baseUrl}#/curves?runs=logdir:big&tag=loss`;
const legendRow = run => `#curves-legend tr[data-run="${run}"]`;

// Waits for the chart of the current URL to be drawn.
async function open(url) {
  await page.goto("about:blank");
  await page.goto(url);
  await page.waitForSelector("#curves-chart[data-drawn]");
}

// Non-transparent pixels of the chart's canvas (uPlot draws on a transparent canvas).
function paintedPixels() {
  return page.$eval("#curves-chart canvas", c => {
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) ++n;
    return n;
  });
}

// Puts the chart's cursor on x (the real cursor path: uPlot's setCursor hook fills the legend).
function cursorAt(x) {
  return page.evaluate(x => {
    const u = window.curvesChart;
    u.setCursor({left: u.valToPos(x, "x"), top: 20});
  }, x);
}

test("the 100,000-point series is drawn, reduced on the server, with its spike", async () => {
  await open(big());
  assert.ok(await paintedPixels() > 2000, "the chart is blank");
  const row = legendRow("logdir:big");
  assert.equal(await page.getAttribute(row, "data-count"), "100000");
  assert.equal(await page.getAttribute(row, "data-reduced"), "true");
  const points = Number(await page.getAttribute(row, "data-points"));
  assert.ok(points < 10000, `${points} points sent`);
  // The maximum of the points the page received is the spike: the reduction kept it.
  assert.equal(Number(await page.getAttribute(row, "data-max")), facts.big.spike);
  assert.equal(await page.textContent(`${row} [data-col="max"]`), String(facts.big.spike));
  await d.screenshot("curves");
});

test("the smoothed value at a known step is TensorBoard's", async () => {
  await open(`${big()}&smoothing=0.9`);
  // TensorBoard's debiased EMA computed here from the whole series (the CSV download).
  const csv = await page.evaluate(async () => (await fetch("/api/scalars.csv?source=logdir&run=big&tag=loss")).text());
  const rows = csv.trim().split("\n").slice(1).map(l => l.split(","));
  let last = 0, n = 0, want = null, raw = null;
  for (const [step, , value] of rows) {
    const v = Number(value);  // "nan", "inf" are NaN here: not finite either way
    if (Number.isFinite(v)) {
      last = last * 0.9 + 0.1 * v;
      ++n;
    }
    if (Number(step) === facts.big.spike_step) {
      want = last / (1 - Math.pow(0.9, n));
      raw = v;
      break;
    }
  }
  await cursorAt(facts.big.spike_step);
  const row = legendRow("logdir:big");
  assert.equal(await page.getAttribute(row, "data-step"), String(facts.big.spike_step));
  assert.equal(Number(await page.getAttribute(`${row} [data-col="value"]`, "data-value")), raw);
  const shown = Number(await page.getAttribute(`${row} [data-col="smoothed"]`, "data-value"));
  assert.ok(Math.abs(shown - want) <= 1e-9 * Math.abs(want), `smoothed ${shown}, TensorBoard's ${want}`);
  assert.equal(await page.textContent(`${row} [data-col="smoothed"]`), want.toPrecision(6).replace(/\.?0+$/, ""));
  // The slider's value is the weight used.
  assert.equal(await page.inputValue("#curves-smoothing"), "0.9");
});

test("NaN and infinities are marks, not values, and the chart did not crash", async () => {
  await open(big());
  const marks = await page.$$eval("#curves-marks li", lis => lis.map(li => [li.dataset.mark, Number(li.dataset.step)]));
  assert.deepEqual(marks, [["NaN", facts.big.nan_step], ["Infinity", facts.big.inf_step], ["-Infinity", facts.big.neg_inf_step]]);
  // The y axis stays finite: the plotted range is the finite values' (spike 50 at the top).
  const [min, max] = await page.evaluate(() => [window.curvesChart.scales.y.min, window.curvesChart.scales.y.max]);
  assert.ok(Number.isFinite(min) && Number.isFinite(max) && max >= facts.big.spike && max < 1000, `y range ${min}..${max}`);
  assert.ok(await paintedPixels() > 2000);
});

test("the log scale leaves out the non-positive points and marks them", async () => {
  await open(`${big()}&log=1`);
  const row = legendRow("logdir:big");
  assert.equal(await page.getAttribute(row, "data-dropped"), String(facts.big.nonpositive_steps.length));
  const dropped = await page.$$eval('#curves-marks li[data-mark="non-positive"]', lis => lis.map(li => Number(li.dataset.step)));
  assert.deepEqual(dropped, facts.big.nonpositive_steps);
  const scale = await page.evaluate(() => ({distr: window.curvesChart.scales.y.distr, min: window.curvesChart.scales.y.min}));
  assert.equal(scale.distr, 3, "the y scale is not logarithmic");
  assert.ok(scale.min > 0, `log scale minimum ${scale.min}`);
  assert.ok(await paintedPixels() > 2000);
  await d.screenshot("curves-log");
});

test("many runs on one chart, with every run's value at the cursor", async () => {
  const tasks = facts.epoch_tasks;
  await open(`${baseUrl}#/curves?tasks=${tasks.join(",")}&tag=loss&smoothing=0`);
  assert.equal(await page.getAttribute("#curves-chart", "data-series"), "3");
  assert.equal(await page.evaluate(() => window.curvesChart.series.length), 1 + 2 * 3);
  await cursorAt(4);
  for (const [k, id] of tasks.entries()) {
    const row = legendRow(`epochs:${id}`);
    assert.equal(await page.getAttribute(row, "data-step"), "4");
    assert.equal(Number(await page.getAttribute(`${row} [data-col="value"]`, "data-value")), 1 / 5 + 0.1 * k);
  }
  // The task whose loss was NaN at epoch 7 has one mark.
  assert.deepEqual(await page.$$eval("#curves-marks li", lis => lis.map(li => [li.dataset.run, li.dataset.mark, li.dataset.step])),
                   [[`epochs:${tasks[1]}`, "NaN", "7"]]);
  assert.ok(await paintedPixels() > 1000);
  await d.screenshot("curves-runs");
  // Unticking a run in the list takes it off the chart (and the URL).
  await page.uncheck(`#curves-runs input[data-run="epochs:${tasks[2]}"]`);
  await page.waitForSelector('#curves-chart[data-series="2"]');
  assert.equal(await page.evaluate(() => window.curvesChart.series.length), 1 + 2 * 2);
  assert.match(await page.evaluate(() => location.hash), new RegExp(`runs=epochs%3A${tasks[0]}%2Cepochs%3A${tasks[1]}&`));
});

test("the TensorBoard callback's run: its scalars and its weights' distributions", async () => {
  await open(`${baseUrl}#/curves?logdir_run=${facts.fit.run}&tag=${facts.fit.tag}&smoothing=0`);
  const row = legendRow(`logdir:${facts.fit.run}`);
  assert.equal(await page.getAttribute(row, "data-count"), String(facts.fit.epochs));
  await cursorAt(facts.fit.epochs - 1);
  // The callback wrote each epoch's loss as a float32.
  const last = facts.fit.losses[facts.fit.epochs - 1];
  assert.equal(Number(await page.getAttribute(`${row} [data-col="value"]`, "data-value")), Math.fround(last));
  await page.waitForSelector(`#curves-dist[data-steps="${facts.fit.epochs}"] canvas`);
  assert.equal(await page.inputValue("#curves-hist"), "dense.bias");
  await page.selectOption("#curves-hist", facts.fit.histogram);
  await page.waitForSelector(`#curves-dist[data-steps="${facts.fit.epochs}"] canvas`);
  // The session's hyperparameters are shown beside its run.
  assert.match(await page.textContent('[data-hparams="logdir:fit"]'), /optimizer=adam.*units=8.*success/);
  await d.screenshot("curves-distributions");
});

test("the CSV download holds every point of the series", async () => {
  await open(big());
  const [download] = await Promise.all([page.waitForEvent("download"), page.click(`${legendRow("logdir:big")} a.csv`)]);
  const lines = readFileSync(await download.path(), "utf8").trim().split("\n");
  assert.equal(lines[0], "step,wall_time,value");
  assert.equal(lines.length - 1, facts.big.points);
  assert.equal(lines[1 + facts.big.spike_step].split(",")[2], String(facts.big.spike));
  assert.equal(lines[1 + facts.big.nan_step].split(",")[2], "nan");
  assert.equal(lines[1 + facts.big.inf_step].split(",")[2], "inf");
});

test("a run that does not exist says so once, with no stray text", async () => {
  await open(`${baseUrl}#/curves?tasks=99999`);
  const row = legendRow("epochs:99999");
  assert.equal(await page.textContent(`${row} [data-col="notes"]`), "no such run");
  assert.equal(await page.textContent(`${row} [data-col="max"]`), "");
});
