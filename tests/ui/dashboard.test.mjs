// Browser tests of `tensorhub ui`: Debian's chromium driven by playwright-core (ui/node_modules,
// never a downloaded browser) against a real `tensorhub ui` on a hub seeded by ui_seed_hub.
// They check what a person sees. Run by scripts/test:
//   TENSORHUB_BIN_DIR=build/bin node --test tests/ui/
// Screenshots go to $TENSORHUB_UI_TEST_OUTPUT (default build/ui-test-output/).
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {spawn, execFileSync} from "node:child_process";
import {mkdtempSync, mkdirSync, rmSync} from "node:fs";
import {createRequire} from "node:module";
import {tmpdir} from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = process.env.TENSORHUB_BIN_DIR || path.join(root, "build/bin");
const output = process.env.TENSORHUB_UI_TEST_OUTPUT || path.join(root, "build/ui-test-output");
const {chromium} = createRequire(path.join(root, "ui/package.json"))("playwright-core");

const XSS_NAME = "<img src=x onerror=alert(1)>";
let dir, hub, ids, ui, baseUrl, context, page;
const dialogs = [];

function startUi() {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(bin, "tensorhub"), ["ui", "--hub", hub, "--project", "p", "--port", "0", "--allow-cancel"],
                        {stdio: ["ignore", "pipe", "inherit"]});
    let out = "";
    child.stdout.on("data", chunk => {
      out += chunk;
      const m = out.match(/tensorhub ui: (http:\/\/127\.0\.0\.1:\d+\/)/);
      if (m) resolve({child, url: m[1]});
    });
    child.on("exit", code => reject(new Error(`tensorhub ui exited with ${code}: ${out}`)));
  });
}

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "tensorhub-ui-test-"));
  mkdirSync(output, {recursive: true});
  hub = `sqlite://${dir}/hub.db`;
  ids = JSON.parse(execFileSync(path.join(bin, "ui_seed_hub"), [hub, "p"], {encoding: "utf8"}));
  ({child: ui, url: baseUrl} = await startUi());
  context = await chromium.launchPersistentContext(path.join(dir, "chromium-profile"), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: {width: 1280, height: 800},
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-proxy-server"],
  });
  page = context.pages()[0] || await context.newPage();
  page.on("dialog", d => { dialogs.push(d.message()); d.dismiss(); });
});

after(async () => {
  await context?.close();
  ui?.kill("SIGTERM");
  if (dir) rmSync(dir, {recursive: true, force: true});
});

const cellTexts = (selector) => page.$$eval(selector, cells => cells.map(c => c.textContent));

test("overview shows the project's counts", async () => {
  await page.goto(`${baseUrl}#/overview`);
  await page.waitForSelector('[data-project="p"]');
  const count = (k) => page.textContent(`[data-project="p"] [data-count="${k}"]`);
  assert.equal(await count("datasets"), "1");
  assert.equal(await count("models"), "3");
  for (const s of ["pending", "running", "finished", "failed", "cancelled"]) assert.equal(await count(`tasks ${s}`), "1");
  await page.screenshot({path: path.join(output, "overview.png"), fullPage: true});
});

test("tasks table holds every task, newest first, with status, runner and error tail", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector("tbody tr");
  const rowIds = await page.$$eval("tbody tr", rows => rows.map(r => Number(r.dataset.id)));
  assert.deepEqual(rowIds, [ids.pending, ids.running, ids.cancelled, ids.failed, ids.finished]);
  assert.deepEqual(await cellTexts('tbody [data-col="status"]'), ["pending", "running", "cancelled", "failed", "finished"]);
  assert.equal(await page.textContent(`tr[data-id="${ids.running}"] [data-col="runner"]`), "runner-b");
  assert.equal(await page.textContent(`tr[data-id="${ids.finished}"] [data-col="result"]`), '{"test_accuracy":0.875}');
  assert.match(await page.textContent(`tr[data-id="${ids.failed}"] [data-col="error"] pre`), /CUDA out of memory/);
  await page.screenshot({path: path.join(output, "tasks.png"), fullPage: true});
});

test("a status change appears without a reload", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="pending"]`);
  await page.evaluate(() => { window.__sameDocument = true; });
  // Another process changes the hub: the page's long poll must bring it in by itself.
  execFileSync(path.join(bin, "tensorhub"), ["task", "cancel", "--hub", hub, "--project", "p",
                                             "--filter", JSON.stringify({id: ids.pending})]);
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="cancelled"]`, {timeout: 15000});
  assert.equal(await page.evaluate(() => window.__sameDocument), true, "the page was reloaded");
  assert.equal(await page.textContent(`tr[data-id="${ids.pending}"] [data-col="status"]`), "cancelled");
  await page.screenshot({path: path.join(output, "tasks-after-cancel.png"), fullPage: true});
});

test("the cancel button cancels a running task (--allow-cancel)", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.running}"][data-status="running"]`);
  // Only pending and running tasks offer it.
  assert.equal(await page.$$eval(`tr[data-id="${ids.finished}"] button.cancel`, b => b.length), 0);
  await page.click(`tr[data-id="${ids.running}"] button.cancel`);
  await page.waitForSelector(`tr[data-id="${ids.running}"][data-status="cancelled"]`, {timeout: 15000});
  assert.equal(await page.$$eval(`tr[data-id="${ids.running}"] button.cancel`, b => b.length), 0);
  const status = execFileSync(path.join(bin, "tensorhub"), ["task", "list", "--hub", hub, "--project", "p", "--json",
                                                            "--filter", JSON.stringify({id: ids.running})], {encoding: "utf8"});
  assert.match(status, /"status":\s*"cancelled"/);
});

test("a model named like markup is shown as text, never run", async () => {
  await page.goto(`${baseUrl}#/models`);
  await page.waitForSelector("tbody tr");
  const names = await cellTexts('tbody [data-col="model_name"]');
  assert.ok(names.includes(XSS_NAME), `model names on the page: ${JSON.stringify(names)}`);
  assert.equal(await page.$$eval("main img", imgs => imgs.length), 0);
  assert.deepEqual(dialogs, []);
  await page.goto(`${baseUrl}#/models/${ids.model_xss}`);
  await page.waitForSelector("main h1");
  assert.equal(await page.textContent("main h1"), `Model ${ids.model_xss}: ${XSS_NAME}`);
  assert.equal(await page.$$eval("main img", imgs => imgs.length), 0);
  assert.deepEqual(dialogs, []);
});

test("models sort by a metric and filter with a MongoDB query", async () => {
  await page.goto(`${baseUrl}#/models`);
  await page.waitForSelector('th[data-key="test_accuracy"]');
  await page.click('th[data-key="test_accuracy"]');
  await page.waitForSelector('th[data-key="test_accuracy"].sorted-desc');
  assert.deepEqual(await cellTexts('tbody [data-col="test_accuracy"]'), ["0.9", "0.7", "0.5"]);
  await page.click('th[data-key="test_accuracy"]');
  await page.waitForSelector('th[data-key="test_accuracy"].sorted-asc');
  assert.deepEqual(await cellTexts('tbody [data-col="test_accuracy"]'), ["0.5", "0.7", "0.9"]);
  await page.fill("#model-filter", '{"model_name": "mlp"}');
  await page.press("#model-filter", "Enter");
  await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 2);
  assert.deepEqual(await cellTexts('tbody [data-col="name"]'), ["low", "high"]);
  assert.equal(await page.textContent("#model-page"), "1-2 of 2");
  await page.screenshot({path: path.join(output, "models.png"), fullPage: true});
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
               `tensorhub serve --hub '${hub}' --project 'p' --hub_model 'mlp' --hub_filter '{"id":${ids.model_high}}' --model_name 'mlp'`);
  assert.equal(await page.getAttribute("#download-json", "href"), `/api/models/${ids.model_high}/model.json`);
  const download = await page.evaluate(async (href) => (await fetch(href)).json(),
                                       `/api/models/${ids.model_high}/model.json`);
  assert.deepEqual(download.layers.map(l => l.type), ["Dropout", "Dense", "Dense"]);
  await page.screenshot({path: path.join(output, "model.png"), fullPage: true});
});
