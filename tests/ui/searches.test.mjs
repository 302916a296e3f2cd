// Browser tests of the Searches view (ui/searches.js) on the seeded searches
// (seed_searches.cpp): the list, a finished Hyperband search's brackets and best objective so
// far, and an ASHA search followed live. Run by scripts/test:
//   TENSORHUB_BIN_DIR=build/bin node --test tests/ui/
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {execFileSync, spawn} from "node:child_process";
import {writeFileSync} from "node:fs";
import path from "node:path";
import {Dashboard, bin} from "./harness.mjs";

let d, page, ids, baseUrl;

before(async () => {
  d = await Dashboard.start([], {project: "tune"});  // seed_searches' project
  ({page, ids, baseUrl} = d);
});

after(async () => { await d?.close(); });

test("the project's searches, with their best", async () => {
  await page.goto(`${baseUrl}#/searches`);
  await page.waitForSelector("tr[data-search]");
  assert.deepEqual(await page.$$eval("tr[data-search]", rows => rows.map(r => r.dataset.search)), ["hb-mlp", "asha-live"]);
  assert.equal(await page.textContent('tr[data-search="hb-mlp"] [data-col="best"]'),
               `${ids.hb_best_score} (trial ${ids.hb_best_trial})`);
  assert.equal(await page.textContent('tr[data-search="hb-mlp"] [data-col="state"]'), "done");
  await d.screenshot("searches");
});

test("a Hyperband search's brackets, trials and best objective so far", async () => {
  await page.goto(`${baseUrl}#/searches/hb-mlp`);
  await page.waitForFunction(() => document.querySelector("main h1")?.textContent === "Search hb-mlp");
  await page.waitForSelector("#best-so-far tbody tr", {state: "attached"});  // in a closed <details>
  // Best so far: the running maximum of the seed's scores in the order the trials ended.
  const trials = await d.cellTexts('#best-so-far tbody [data-col="trial"]');
  assert.equal(trials.length, ids.hb_trials);
  let best = -Infinity;
  const expected = trials.map(t => (best = Math.max(best, ids.hb_scores[t])));
  assert.deepEqual((await d.cellTexts('#best-so-far tbody [data-col="best"]')).map(Number), expected);
  assert.deepEqual((await d.cellTexts('#best-so-far tbody [data-col="score"]')).map(Number), trials.map(t => ids.hb_scores[t]));
  assert.equal(expected.at(-1), ids.hb_best_score);
  assert.equal(await page.textContent("#search-best"), `best val_accuracy ${ids.hb_best_score} (trial ${ids.hb_best_trial})`);
  // The chart is drawn: its canvas holds non-background pixels.
  const drawn = await page.$eval("#best-chart canvas", c => {
    const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < px.length; i += 4) n += px[i] > 0;
    return n;
  });
  assert.ok(drawn > 500, `${drawn} drawn pixels`);
  // The tuner's brackets for max_epochs 9, factor 3 (hyperband_schedule): 2, 1, 0 with
  // 9 -> 3 -> 1, 5 -> 2 and 3 trials.
  assert.deepEqual(await page.$$eval(".bracket", bs => bs.map(b => Number(b.dataset.bracket))), [2, 1, 0]);
  assert.deepEqual(await page.$$eval(".bracket", bs => bs.map(b => [...b.querySelectorAll(".round")].map(r => r.querySelectorAll(".chip").length))),
                   [[9, 3, 1], [5, 2], [3]]);
  assert.equal(await page.$$eval("#search-trials tbody tr", rows => rows.length), ids.hb_trials);
  assert.equal(await page.$$eval(".chip.best", cs => cs.map(c => c.dataset.trial)).then(t => t.join()), ids.hb_best_trial);
  await d.screenshot("search-hyperband");
});

test("an ASHA search's rungs, followed live: a trial's epoch and its task's change appear without a reload", async () => {
  await page.goto(`${baseUrl}#/searches/asha-live`);
  await page.waitForFunction(() => document.querySelector("main h1")?.textContent === "Search asha-live");
  const row = `#search-trials tr[data-trial="${ids.asha_running_trial}"]`;
  await page.waitForSelector(row);
  assert.equal(await page.textContent(`${row} [data-col="score"]`), "");
  assert.match(await page.textContent(`${row} [data-col="task"]`), /running$/);
  assert.deepEqual(await page.$$eval('.bracket .round', rs => rs.map(r => r.querySelectorAll(".chip").length)), [4, 1]);
  assert.match(await page.textContent(".bracket .round .muted"), /^rung 0 · 1 epochs/);
  await d.screenshot("search-asha");
  await page.evaluate(() => { window.__sameDocument = true; });
  // The trial's task reports an epoch as a training would (`tensorhub task report-epoch` under a
  // runner's environment): its progress appears, then its cancellation, with no reload.
  execFileSync(path.join(bin, "tensorhub"), ["task", "report-epoch", "--epoch", "0", "--logs", '{"val_accuracy": 0.41}'],
               {env: {...process.env, TENSORHUB_URI: d.hub, TENSORHUB_PROJECT: d.project,
                      TENSORHUB_TASK_ID: String(ids.asha_running_task), TENSORHUB_ATTEMPT: "1"}});
  await page.waitForFunction(sel => document.querySelector(sel)?.textContent === "epoch 1: val_accuracy 0.41",
                             `${row} [data-col="progress"]`, {timeout: 15000});
  d.cli(["task", "cancel", "--filter", JSON.stringify({id: ids.asha_running_task})]);
  await page.waitForFunction(sel => /cancelled$/.test(document.querySelector(sel)?.textContent || ""),
                             `${row} [data-col="task"]`, {timeout: 15000});
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
});

test("the overview lists every project of the hub, the served one first and marked", async () => {
  await page.goto(`${baseUrl}#/overview`);
  await page.waitForSelector("[data-project]");
  // Served "tune" first, then the others by name (ui_seed_hub fills "graph", "p", "try" and "tune").
  assert.deepEqual(await page.$$eval(".card[data-project]", cs => cs.map(c => c.dataset.project)), ["tune", "graph", "p", "try"]);
  assert.deepEqual(await page.$$eval(".card.served", cs => cs.map(c => c.dataset.project)), ["tune"]);
  const count = (p, k) => page.textContent(`[data-project="${p}"] [data-count="${k}"]`);
  assert.equal(await count("tune", "searches"), "2");
  assert.equal(await count("tune", "tasks finished"), String(ids.hb_trials + 3));  // every trial with a score
  assert.equal(await count("p", "models"), "50");
  assert.equal(await count("p", "searches"), "0");
  await d.screenshot("overview-projects");
});

test("long values are cut short with the whole value in a tooltip: the Tasks table fits a 1280 px window", async () => {
  await page.setViewportSize({width: 1280, height: 800});
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector('#main td[data-col="result"]');
  // A trial's result holds its whole history (seed_searches.cpp): hundreds of characters.
  const result = await page.evaluate(async () => {
    const tasks = (await (await fetch("/api/tasks")).json()).tasks;
    return tasks.map(t => t.result).filter(Boolean).map(r => JSON.stringify(r)).sort((a, b) => b.length - a.length)[0];
  });
  assert.ok(result.length > 200, `longest result ${result.length} characters`);
  const cell = await page.$(`td[data-col="result"][title="${result.replaceAll('"', '\\"')}"]`);
  assert.ok(cell, "no cell carries the whole result in its title");
  assert.equal(await cell.textContent(), result);  // the text is whole, only its box is cut
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 1280, `the page is ${width} px wide`);
});

test("a search that does not exist: the previous page is cleared, the error shown, the 404 asked once", async () => {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/try`);
  await page.waitForSelector("#main h1");
  const asked = [];
  const onRequest = r => { if (r.url().includes("/api/searches/nope")) asked.push(r.url()); };
  page.on("request", onRequest);
  await page.evaluate(() => { location.hash = "#/searches/nope"; });
  await page.waitForSelector("#error:not([hidden])");
  await page.waitForTimeout(2500);  // the old loop asked again every second
  page.off("request", onRequest);
  assert.match(await page.textContent("#error"), /nope/);
  assert.equal(await page.evaluate(() => document.getElementById("main").children.length), 0, "the Try page is still shown");
  assert.notEqual(await page.textContent("#live"), "reconnecting");
  assert.equal(asked.length, 1, `asked ${asked.length} times`);
});

test("the searches list follows the project: a new search appears without a reload; states are done / running", async () => {
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/searches`);
  await page.waitForSelector('tr[data-search="hb-mlp"]');
  assert.equal(await page.textContent('tr[data-search="hb-mlp"] [data-col="state"]'), "done");
  assert.equal(await page.textContent('tr[data-search="asha-live"] [data-col="state"]'), "running");
  await page.evaluate(() => { window.__sameDocument = true; });
  // A real `tensorhub tune` starts a search (and waits for runners: killed at the end).
  const space = path.join(d.dir, "space.json");
  writeFileSync(space, JSON.stringify([{name: "x", type: "Int", min_value: 1, max_value: 3}]));
  const tune = spawn(path.join(bin, "tensorhub"), ["tune", "--hub", d.hub, "--project", d.project, "--name", "late",
                                                   "--space", space, "--oracle", "grid", "--objective", "loss:min",
                                                   "--", "true", "{x}"], {stdio: "ignore"});
  try {
    await page.waitForSelector('tr[data-search="late"]', {timeout: 20000});
    assert.equal(await page.textContent('tr[data-search="late"] [data-col="state"]'), "running");
    assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
  } finally {
    tune.kill("SIGTERM");
  }
});
