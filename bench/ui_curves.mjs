// bench/ui_curves.mjs (scripts/bench ui-curves): time from navigation to a drawn chart of the
// 100,000-point series (seed_curves.cpp's logdir run "big") in headless Chromium, the Curves view
// as it is (the server reduces the series to a few points per pixel) against a naive baseline
// in the same run: the same page with &reduce=0, fed every point.
//
// Each round loads the page afresh (about:blank, then the view's URL) and reads the chart's
// data-drawn-at, performance.now() in uPlot's draw hook: milliseconds since the navigation
// started. The first load of each kind is reported apart (the server reads the event file once,
// then keeps it while unchanged). Prints one line per kind and a JSON line.
//   node bench/ui_curves.mjs [--rounds N]      (TENSORHUB_BIN_DIR: default build/bin)
import {execFileSync} from "node:child_process";
import {mkdtempSync, rmSync} from "node:fs";
import {createRequire} from "node:module";
import {tmpdir} from "node:os";
import path from "node:path";

import {bin, root, startUi} from "../tests/ui/harness.mjs";

const {chromium} = createRequire(path.join(root, "ui/package.json"))("playwright-core");
const rounds = Number(process.argv[process.argv.indexOf("--rounds") + 1]) || 10;

const median = xs => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timeDraw(page, url) {
  await page.goto("about:blank");
  await page.goto(url);
  await page.waitForSelector("#curves-chart[data-drawn-at]", {timeout: 60000});
  return page.evaluate(() => {
    const box = document.getElementById("curves-chart");
    const row = document.querySelector("#curves-legend tr[data-run]");
    return {ms: Number(box.dataset.drawnAt), points: Number(row.dataset.points), max: Number(row.dataset.max)};
  });
}

const dir = mkdtempSync(path.join(tmpdir(), "tensorhub-bench-ui-curves-"));
let ui, browser;
try {
  const hub = `sqlite://${dir}/hub.db`;
  const ids = JSON.parse(execFileSync(path.join(bin, "ui_seed_hub"), [hub, "p", dir], {encoding: "utf8"}));
  const {child, url} = await startUi(hub, "p", ["--logdir", ids.curves.logdir]);
  ui = child;
  browser = await chromium.launch({executablePath: "/usr/bin/chromium", headless: true,
                                   args: ["--no-sandbox", "--disable-gpu", "--no-proxy-server"]});
  const page = await browser.newPage({viewport: {width: 1280, height: 800}});
  const view = `${url}#/curves?runs=logdir:big&tag=loss&smoothing=0.6`;
  const kinds = {"reduced on the server": view, "every point (reduce=0)": `${view}&reduce=0`};
  const results = {};
  for (const [name, u] of Object.entries(kinds)) results[name] = {first: await timeDraw(page, u), times: []};
  for (let r = 0; r < rounds; ++r)
    for (const [name, u] of Object.entries(kinds)) results[name].times.push((await timeDraw(page, u)).ms);
  console.log(`ui-curves: navigation -> drawn chart of ${ids.curves.big.points} points, ${rounds} rounds, ` +
              `load average ${execFileSync("cut", ["-d ", "-f1-3", "/proc/loadavg"], {encoding: "utf8"}).trim()}`);
  const json = {rounds};
  for (const [name, r] of Object.entries(results)) {
    const m = median(r.times);
    console.log(`  ${name.padEnd(24)} median ${m.toFixed(0)} ms (min ${Math.min(...r.times).toFixed(0)}, max ` +
                `${Math.max(...r.times).toFixed(0)}; first load ${r.first.ms.toFixed(0)} ms), ${r.first.points} points drawn, ` +
                `series max ${r.first.max}`);
    json[name] = {median_ms: m, first_ms: r.first.ms, points: r.first.points, max: r.first.max};
  }
  const ours = median(results["reduced on the server"].times), naive = median(results["every point (reduce=0)"].times);
  console.log(`  goal < 500 ms: ${ours < 500 ? "met" : "NOT met"}; the naive baseline takes ${(naive / ours).toFixed(1)}x as long`);
  console.log(JSON.stringify({bench: "ui_curves", ...json}));
} finally {
  await browser?.close();
  ui?.kill("SIGTERM");
  rmSync(dir, {recursive: true, force: true});
}
