// Browser tests of the Searches view for what search does beyond one objective, on searches
// run here by the real `tensorhub tune` and `tensorhub runner` in a project of their own
// ("front", so the seeded views' counts stay theirs):
//  - "two": a grid over x in 0..4 with objectives a:min, b:min, (a, b) = (x, (x - 3)^2):
//    (0, 9), (1, 4), (2, 1), (3, 0), (4, 1); x = 4 is dominated by x = 2, the rest is the front;
//  - "pruned": the median pruner on five known curves (as tests/tune_pruner_test.cpp, where the
//    rule's arithmetic is written out): trials 0002 and 0004 are pruned;
//  - "pbt": population-based training, whose trials show their member and whose weights they took.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import {execFileSync, spawn} from "node:child_process";
import {writeFileSync} from "node:fs";
import path from "node:path";
import {Dashboard, bin} from "./harness.mjs";

let d, page, baseUrl;

before(async () => {
  d = await Dashboard.start([], {project: "front"});
  ({page, baseUrl} = d);
  const runner = spawn(path.join(bin, "tensorhub"), ["runner", "--hub", d.hub, "--project", "front", "--task-name", "trial",
                                                     "--slots", "2", "--lease", "0.6", "--poll", "0.05", "--exit-when-idle", "600"],
                       {stdio: "ignore"});
  try {
    const xs = path.join(d.dir, "xs.json"), curves = path.join(d.dir, "curves.json"), h = path.join(d.dir, "h.json");
    writeFileSync(xs, JSON.stringify([{name: "x", type: "Int", min_value: 0, max_value: 4}]));
    writeFileSync(curves, JSON.stringify([{name: "curve", type: "Choice", values: ["1.0,0.8,0.6,0.5,0.4",
        "1.2,0.9,0.7,0.6,0.5", "1.5,1.4,1.3,1.2,1.1", "3.0,0.5,0.4,0.3,0.2", "0.9,0.7,0.6,0.6,0.6"]}]));
    writeFileSync(h, JSON.stringify([{name: "h", type: "Float", min_value: 0, max_value: 1}]));
    // Not d.cli: its --hub and --project would land after `--`, in the trial command.
    const tune = (...args) => execFileSync(path.join(bin, "tensorhub"), ["tune", "--hub", d.hub, "--project", "front",
                                                                          "--poll", "0.05", "--json", ...args], {encoding: "utf8"});
    tune("--name", "two", "--space", xs, "--oracle", "grid", "--objective", "a:min,b:min", "--", "/bin/sh", "-c",
         "awk -v x=\"$TENSORHUB_HP_x\" 'BEGIN { printf \"{\\\"a\\\": %g, \\\"b\\\": %g}\", x, (x - 3) ^ 2 }' > \"$TENSORHUB_RESULT_FILE\"");
    tune("--name", "pruned", "--space", curves, "--oracle", "grid", "--objective", "val_loss", "--parallel", "1",
         "--pruner", "median", "--n-startup-trials", "2", "--n-warmup-steps", "1", "--", "/bin/sh", "-c",
         `e=0; for v in $(echo "$TENSORHUB_HP_curve" | tr , ' '); do ${path.join(bin, "tensorhub")} task report-epoch ` +
         `--epoch $e --logs "{\\"val_loss\\": $v}" || exit 1; e=$((e + 1)); sleep 0.3; done; ` +
         `echo "{\\"val_loss\\": $v}" > "$TENSORHUB_RESULT_FILE"`);
    tune("--name", "pbt", "--space", h, "--oracle", "pbt", "--objective", "q:max", "--population", "4", "--max-epochs", "4",
         "--perturbation-interval", "1", "--seed", "3", "--parallel", "4", "--", "/bin/sh", "-c",
         "awk -v h=\"$TENSORHUB_HP_h\" -v e=\"$TENSORHUB_HP_tuner_2Fepochs\" 'BEGIN { printf \"{\\\"q\\\": %g}\", h * e }' " +
         "> \"$TENSORHUB_RESULT_FILE\"");
  } finally {
    runner.kill("SIGTERM");
  }
});

after(async () => { await d?.close(); });

test("a search of two objectives shows its Pareto front as a scatter and a table", async () => {
  await page.goto(`${baseUrl}#/searches/two`);
  await page.waitForSelector("#pareto-chart");
  assert.equal(await page.textContent("#pareto h2"), "Pareto front: 4 of 5 trials");
  assert.equal(await page.$$eval("#pareto-chart circle.point", cs => cs.length), 5);
  const front = await page.$$eval("#pareto-chart circle.front", cs => cs.map(c => c.dataset.trial).sort());
  assert.deepEqual(front, ["0000", "0001", "0002", "0003"]);
  // Hovering a point names its trial and values (its <title>).
  assert.equal(await page.textContent('#pareto-chart circle[data-trial="0001"] title'), "trial 0001: a 1, b 4");
  assert.equal(await page.textContent('#pareto-chart circle[data-trial="0004"] title'), "trial 0004: a 4, b 1");
  assert.deepEqual(await d.cellTexts('#pareto-front [data-col="b"]'), ["9", "4", "1", "0"]);  // by a, best first
  await d.screenshot("search-pareto");
});

test("pruned trials show as pruned, with the pruner named", async () => {
  await page.goto(`${baseUrl}#/searches/pruned`);
  await page.waitForSelector("#search-trials");
  assert.equal(await page.textContent("#search-pruner"), ", median pruner");
  const status = id => page.textContent(`#search-trials tr[data-trial="${id}"] [data-col="status"]`);
  assert.equal(await status("0002"), "pruned");
  assert.equal(await status("0004"), "pruned");
  assert.equal(await status("0003"), "completed");
  assert.equal(await page.$$eval("#search-trials .status.trial-pruned", s => s.length), 2);
  // Views this search has not (brackets, a front) leave nothing behind, not a "null".
  assert.ok(!(await page.textContent("main")).includes("null"));
  await d.screenshot("search-pruned");
});

test("a PBT search's trials show their member and whose weights they took", async () => {
  await page.goto(`${baseUrl}#/searches/pbt`);
  await page.waitForSelector("#search-trials");
  const members = await d.cellTexts('#search-trials [data-col="member"]');
  assert.deepEqual([...new Set(members)].sort(), ["0", "1", "2", "3"]);
  const lineage = await d.cellTexts('#search-trials [data-col="lineage"]');
  assert.ok(lineage.some(t => /^took trial \d{4} \(member \d\)$/.test(t)), lineage.join(" | "));
  assert.ok(lineage.some(t => /^went on from trial \d{4}$/.test(t)), lineage.join(" | "));
  assert.equal(lineage.filter(t => t === "").length, 4);  // the members' first segments
  await d.screenshot("search-pbt");
});
