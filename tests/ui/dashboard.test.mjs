// Browser tests of `tensorhub ui`'s Overview, Tasks and Models views (harness.mjs: Debian's
// chromium driven by playwright-core against a real `tensorhub ui` on a hub seeded by
// ui_seed_hub). They check what a person sees. Run by scripts/test:
//   TENSORHUB_BIN_DIR=build/bin node --test tests/ui/
// Screenshots go to $TENSORHUB_UI_TEST_OUTPUT (default build/ui-test-output/).
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {Dashboard} from "./harness.mjs";

const XSS_NAME = "<img src=x onerror=alert(1)>";
let d, page, ids, baseUrl;

before(async () => {
  d = await Dashboard.start();
  ({page, ids, baseUrl} = d);
});

after(async () => { await d?.close(); });

const cellTexts = (selector) => d.cellTexts(selector);

test("overview shows the project's counts", async () => {
  await page.goto(`${baseUrl}#/overview`);
  await page.waitForSelector('[data-project="p"]');
  const count = (k) => page.textContent(`[data-project="p"] [data-count="${k}"]`);
  assert.equal(await count("datasets"), "1");
  assert.equal(await count("models"), "50");
  for (const s of ["pending", "running", "finished", "failed", "cancelled"]) assert.equal(await count(`tasks ${s}`), "1");
  await d.screenshot("overview");
});

test("tasks table holds every task, newest first, with status, runner and error tail", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector("tbody tr");
  const rowIds = await page.$$eval("tbody tr", rows => rows.map(r => Number(r.dataset.id)));
  assert.deepEqual(rowIds, [ids.pending, ids.running, ids.cancelled, ids.failed, ids.finished]);
  assert.deepEqual(await cellTexts('tbody [data-col="status"] .status'), ["pending", "running", "cancelled", "failed", "finished"]);
  assert.equal(await page.textContent(`tr[data-id="${ids.running}"] [data-col="runner"]`), "runner-b");
  assert.equal(await page.textContent(`tr[data-id="${ids.finished}"] [data-col="result"]`), '{"test_accuracy":0.875}');
  assert.match(await page.textContent(`tr[data-id="${ids.failed}"] [data-col="error"] pre`), /CUDA out of memory/);
  // What each task runs, under its name: the seed's command, or the script task's file.
  assert.equal(await page.textContent(`tr[data-id="${ids.failed}"] [data-col="task_name"] .what-runs`), "train.sh {lr}");
  assert.equal(await page.textContent(`tr[data-id="${ids.finished}"] [data-col="task_name"] .what-runs`),
               "script task_script.py");
  await d.screenshot("tasks");
});

test("each task's row shows what its attempts used", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.finished}"] [data-col="usage"] .attempt-usage`);
  // The seed's figures (seed_tasks.cpp): 125 s, 98.4 CPU s, 1.5 GiB, GPU samples of mean 46.25 %, max 95 %.
  assert.deepEqual(await cellTexts(`tr[data-id="${ids.finished}"] [data-col="usage"] .attempt-usage`),
                   ["#1 finished: 2 min 5 s, CPU 98.4 s, 1.5 GiB, GPU 46% (max 95%)"]);
  assert.deepEqual(await cellTexts(`tr[data-id="${ids.failed}"] [data-col="usage"] .attempt-usage`),
                   ["#1 failed: 3.5 s, CPU 2.0 s, 256 MiB"]);
  assert.equal(await page.textContent(`tr[data-id="${ids.cancelled}"] [data-col="usage"]`), "");  // never started
});

test("a task's row and detail show the resources it asks for and why a pending one waits", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.pending}"] .waiting-for`);
  // The seed's pending task asks for 2 cpus, 1 GPU, 8 GiB; the one live runner of its name has no GPU.
  assert.equal(await page.textContent(`tr[data-id="${ids.pending}"] [data-col="task_name"] .task-resources`),
               "2 cpus, 1 GPU, 8 GiB");
  assert.equal(await page.textContent(`tr[data-id="${ids.pending}"] .waiting-for`),
               "waiting: needs 1 GPU; the live runner has 0");
  // Only a pending task waits; the others ask for nothing.
  assert.equal(await page.$$eval(".waiting-for", e => e.length), 1);
  assert.equal(await page.$$eval(".task-resources", e => e.length), 1);
  await d.screenshot("tasks-waiting");
  await page.goto(`${baseUrl}#/tasks/${ids.pending}`);
  await page.waitForSelector("#task-detail-resources");
  assert.equal(await page.textContent("#task-detail-resources"), "asks for 2 cpus, 1 GPU, 8 GiB");
  assert.equal(await page.textContent("#task-detail-waiting"), "waiting: needs 1 GPU; the live runner has 0");
  const api = await page.evaluate(async () => (await fetch("/api/tasks")).json());
  const row = api.tasks.find(t => t.id === ids.pending);
  assert.deepEqual(row.resources, {cpus: 2, gpus: 1, memory: "8 GiB", memory_bytes: 8589934592, text: "2 cpus, 1 GPU, 8 GiB"});
  assert.equal(row.waiting_for, "needs 1 GPU; the live runner has 0");
  assert.equal(api.tasks.find(t => t.id === ids.running).waiting_for, null);
});

test("a task's detail shows its attempts and its GPUs over time beside its epoch reports", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.click(`tr[data-id="${ids.finished}"] [data-col="id"] a`);
  await page.waitForSelector("#task-attempts tbody tr");
  assert.equal(await page.evaluate(() => location.hash), `#/tasks/${ids.finished}`);
  const cell = (c) => page.textContent(`#task-attempts tr[data-attempt="1"] [data-col="${c}"]`);
  assert.equal(await cell("owner"), "runner-a");
  assert.equal(await cell("host"), "gpu-node-1");
  assert.equal(await cell("outcome"), "finished");
  assert.equal(await cell("cpu"), "98.40");
  assert.equal(await cell("memory"), "1.5 GiB");
  assert.equal(await cell("gpus"), "0, 1");
  assert.equal(await cell("gpu_mean"), "46%");
  assert.equal(await cell("gpu_max"), "95%");
  // The charts: 20 GPU samples (10 per GPU) and the 20 epoch reports seed_curves.cpp gives the task,
  // each drawn by uPlot with its series.
  assert.equal(await page.getAttribute("#gpu-util-chart", "data-samples"), "20");
  assert.equal(await page.getAttribute("#epoch-chart", "data-points"), "20");
  for (const id of ["gpu-util-chart", "gpu-memory-chart", "epoch-chart"])
    assert.equal(await page.$$eval(`#${id} .uplot canvas`, c => c.length), 1, id);
  const legend = await cellTexts("#gpu-util-chart .u-legend .u-label");
  assert.ok(legend.includes("attempt 1 GPU 0") && legend.includes("attempt 1 GPU 1"), legend.join(" | "));
  const epochLegend = await cellTexts("#epoch-chart .u-legend .u-label");
  assert.ok(epochLegend.includes("loss (attempt 1)") && epochLegend.includes("accuracy (attempt 1)"), epochLegend.join(" | "));
  await d.screenshot("task-detail");
  // A task without GPU samples says so instead of drawing an empty chart.
  await page.goto(`${baseUrl}#/tasks/${ids.failed}`);
  await page.waitForSelector("#task-attempts tbody tr");
  assert.equal(await page.textContent('#task-attempts [data-col="error"]'), "exit status 1");
  assert.match(await page.textContent("#no-gpu-samples"), /no GPU samples/);
  assert.equal(await page.$$eval("#gpu-util-chart", c => c.length), 0);
});

test("a status change appears without a reload", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="pending"]`);
  await page.evaluate(() => { window.__sameDocument = true; });
  // Another process changes the hub: the page's long poll must bring it in by itself.
  d.cli(["task", "cancel", "--filter", JSON.stringify({id: ids.pending})]);
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="cancelled"]`, {timeout: 15000});
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
  assert.equal(await page.textContent(`tr[data-id="${ids.pending}"] [data-col="status"]`), "cancelled");
  await d.screenshot("tasks-after-cancel");
});

test("the cancel button cancels a running task (--allow-cancel)", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.running}"][data-status="running"]`);
  // Only pending and running tasks offer it.
  assert.equal(await page.$$eval(`tr[data-id="${ids.finished}"] button.cancel`, b => b.length), 0);
  await page.click(`tr[data-id="${ids.running}"] button.cancel`);
  await page.waitForSelector(`tr[data-id="${ids.running}"][data-status="cancelled"]`, {timeout: 15000});
  assert.equal(await page.$$eval(`tr[data-id="${ids.running}"] button.cancel`, b => b.length), 0);
  const status = d.cli(["task", "list", "--json", "--filter", JSON.stringify({id: ids.running})]);
  assert.match(status, /"status":\s*"cancelled"/);
});

test("a model named like markup is shown as text, never run", async () => {
  await page.goto(`${baseUrl}#/models`);
  await page.waitForSelector("tbody tr");
  const names = await cellTexts('tbody [data-col="model_name"]');
  assert.ok(names.includes(XSS_NAME), `model names on the page: ${JSON.stringify(names)}`);
  assert.equal(await page.$$eval("main img", imgs => imgs.length), 0);
  assert.deepEqual(d.dialogs, []);
  await page.goto(`${baseUrl}#/models/${ids.model_xss}`);
  await page.waitForSelector("main h1");
  assert.equal(await page.textContent("main h1"), `Model ${ids.model_xss}: ${XSS_NAME}`);
  assert.equal(await page.$$eval("main img", imgs => imgs.length), 0);
  assert.deepEqual(d.dialogs, []);
});

test("models sort by a metric and filter with a MongoDB query", async () => {
  await page.goto(`${baseUrl}#/models`);
  await page.waitForSelector('th[data-key="test_accuracy"]');
  await page.click('th[data-key="test_accuracy"]');
  await page.waitForSelector('th[data-key="test_accuracy"].sorted-desc');
  // The 50 seeded models fit on one page: high, the markup-named one, cnn-46 .. cnn-0, low.
  const cnn = Array.from({length: 47}, (_, i) => String((646 - i) / 1000));
  const best_first = ["0.9", "0.7", ...cnn, "0.5"];
  assert.deepEqual(await cellTexts('tbody [data-col="test_accuracy"]'), best_first);
  await page.click('th[data-key="test_accuracy"]');
  await page.waitForSelector('th[data-key="test_accuracy"].sorted-asc');
  assert.deepEqual(await cellTexts('tbody [data-col="test_accuracy"]'), [...best_first].reverse());
  assert.equal(await page.textContent("#model-page"), "1-50 of 50");
  await page.fill("#model-filter", '{"model_name": "mlp"}');
  await page.press("#model-filter", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 2);
  assert.deepEqual(await cellTexts('tbody [data-col="name"]'), ["low", "high"]);
  assert.equal(await page.textContent("#model-page"), "1-2 of 2");
  await d.screenshot("models");
});

test("a model's layers with shapes and parameter counts", async () => {
  await page.goto(`${baseUrl}#/models/${ids.model_high}`);
  await page.waitForSelector("#total-params");
  const rows = await page.$$eval("main table:first-of-type tbody tr",
                                 trs => trs.map(tr => [...tr.cells].map(c => c.textContent)));
  assert.deepEqual(rows, [["dropout", "Dropout", "[784]", "0"], ["dense", "Dense", "[32]", "25,120"],
                          ["dense_1", "Dense", "[10]", "330"]]);
  assert.equal(await page.textContent("#total-params"), "input [784], 25,450 parameters");
  assert.equal(await page.textContent("#serve-command"),
               `tensorhub serve --hub '${d.hub}' --project 'p' --hub_model 'mlp' --hub_filter '{"id":${ids.model_high}}' --model_name 'mlp'`);
  assert.equal(await page.getAttribute("#download-json", "href"), `/api/models/${ids.model_high}/model.json`);
  const download = await page.evaluate(async (href) => (await fetch(href)).json(),
                                       `/api/models/${ids.model_high}/model.json`);
  assert.deepEqual(download.layers.map(l => l.type), ["Dropout", "Dense", "Dense"]);
  await d.screenshot("model");
});

test("a page load has no console error and asks for no /favicon.ico (the icon is inline)", async () => {
  const errors = [], asked = [];
  const onConsole = m => { if (m.type() === "error") errors.push(m.text()); };
  const onRequest = r => { if (new URL(r.url()).pathname === "/favicon.ico") asked.push(r.url()); };
  page.on("console", onConsole);
  page.on("request", onRequest);
  await page.goto("about:blank");
  await page.goto(`${baseUrl}#/overview`);
  await page.waitForSelector("#main h1");
  await page.waitForTimeout(1000);  // the browser asks for the icon after the load
  page.off("console", onConsole);
  page.off("request", onRequest);
  assert.deepEqual(errors, []);
  assert.deepEqual(asked, []);
});
