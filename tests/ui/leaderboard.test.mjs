// The Models view as a leaderboard: sorted by a loss, NaN (a diverged run) and missing values
// come last in both directions (MLflow's rule) and the page says so, while `tensorhub model
// list` keeps MongoDB's order. Models saved by the real CLI in a project of their own
// ("board"), so the seeded views' counts stay theirs.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {mkdirSync, writeFileSync} from "node:fs";
import path from "node:path";
import {Dashboard} from "./harness.mjs";

let d, page, baseUrl;

before(async () => {
  d = await Dashboard.start([], {project: "board"});
  ({page, baseUrl} = d);
  // A model directory with no weights: model.json and an empty safetensors file (its 8-byte
  // header length, then "{}").
  const dir = path.join(d.dir, "model");
  mkdirSync(dir);
  writeFileSync(path.join(dir, "model.json"), JSON.stringify({layers: []}));
  const header = Buffer.from("{}");
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(path.join(dir, "weights.safetensors"), Buffer.concat([length, header]));
  const tags = [{name: "a", loss: 0.3}, {name: "diverged-1", loss: {$numberDouble: "NaN"}}, {name: "no-loss"},
                {name: "b", loss: 0.1}, {name: "diverged-2", loss: {$numberDouble: "NaN"}}, {name: "c", loss: 0.2}];
  for (const t of tags) d.cli(["model", "save", "--model-name", "mlp", "--path", dir, "--tags", JSON.stringify(t)]);
});

after(async () => { await d?.close(); });

async function names() {
  return d.cellTexts('tbody [data-col="name"]');
}

test("sorted by a loss, NaN and missing come last both ways, and the page says so", async () => {
  await page.goto(`${baseUrl}#/models`);
  await page.waitForSelector('th[data-key="loss"]');
  await page.click('th[data-key="loss"]');  // first click: descending
  await page.waitForSelector('th[data-key="loss"].sorted-desc');
  assert.deepEqual(await names(), ["a", "c", "b", "diverged-2", "diverged-1", "no-loss"]);
  await page.click('th[data-key="loss"]');
  await page.waitForSelector('th[data-key="loss"].sorted-asc');
  assert.deepEqual(await names(), ["b", "c", "a", "diverged-2", "diverged-1", "no-loss"]);
  assert.match(await page.textContent("#sort-note"), /NaN and missing values sort last in either direction/);
  // With a filter (the database sorts): the same rule.
  await page.fill("#model-filter", '{"model_name": "mlp"}');
  await page.press("#model-filter", "Enter");
  await page.waitForFunction(() => document.querySelector("#model-filter").value !== "" &&
                                   document.querySelectorAll("tbody tr").length === 6);
  assert.deepEqual(await names(), ["b", "c", "a", "diverged-2", "diverged-1", "no-loss"]);
  await d.screenshot("models-leaderboard");
  // The CLI keeps MongoDB's order: missing, then NaN, lowest (ties by id, as `model list` sorts).
  const listed = JSON.parse(d.cli(["model", "list", "--sort", "loss:1", "--json"])).map(m => m.name);
  assert.deepEqual(listed, ["no-loss", "diverged-1", "diverged-2", "b", "c", "a"]);
});
