// The browser tests' harness (tests/ui/*.test.mjs): a hub seeded by ui_seed_hub, a real
// `tensorhub ui` on it, and Debian's chromium driven by playwright-core (ui/node_modules, never a
// downloaded browser). Each test file starts its own (node --test runs files in parallel
// processes), so files do not see each other's changes to the hub.
import {spawn, execFileSync} from "node:child_process";
import {mkdtempSync, mkdirSync, rmSync} from "node:fs";
import {createRequire} from "node:module";
import {tmpdir} from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const bin = process.env.TENSORHUB_BIN_DIR || path.join(root, "build/bin");
/// Where screenshots go (scripts/test keeps them in build/ui-test-output/).
export const output = process.env.TENSORHUB_UI_TEST_OUTPUT || path.join(root, "build/ui-test-output");
const {chromium} = createRequire(path.join(root, "ui/package.json"))("playwright-core");

/// The ids ui_seed_hub printed are in `ids`; the page in `page`; `dialogs` collects every
/// alert/confirm the page opened (a test of markup shown as text expects none).
export class Dashboard {
  /// Seeds a new SQLite hub (project "p"), starts `tensorhub ui --port 0 <uiArgs>` on it and a
  /// headless chromium. uiArgs: extra flags, e.g. ["--allow-cancel"]; project: the project the
  /// ui serves and cli() uses (the seed fills "p"; seed_try.cpp fills "try"). uiArgs may be a
  /// function of the seeded Dashboard (d => ["--logdir", d.ids.curves.logdir]).
  static async start(uiArgs = ["--allow-cancel"], {project = "p"} = {}) {
    const d = new Dashboard();
    d.project = project;
    d.dir = mkdtempSync(path.join(tmpdir(), "tensorhub-ui-test-"));
    mkdirSync(output, {recursive: true});
    d.hub = `sqlite://${d.dir}/hub.db`;
    d.ids = JSON.parse(execFileSync(path.join(bin, "ui_seed_hub"), [d.hub, "p", d.dir], {encoding: "utf8"}));
    if (typeof uiArgs === "function") uiArgs = uiArgs(d);  // flags naming seeded files, e.g. --logdir
    ({child: d.ui, url: d.baseUrl} = await startUi(d.hub, project, uiArgs));
    d.context = await chromium.launchPersistentContext(path.join(d.dir, "chromium-profile"), {
      executablePath: "/usr/bin/chromium",
      headless: true,
      viewport: {width: 1280, height: 800},
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-proxy-server"],
    });
    d.page = d.context.pages()[0] || await d.context.newPage();
    d.dialogs = [];
    d.page.on("dialog", dialog => { d.dialogs.push(dialog.message()); dialog.dismiss(); });
    return d;
  }

  /// Runs the tensorhub CLI on this hub's project: tensorhub <args...> --hub H --project p.
  cli(args) {
    return execFileSync(path.join(bin, "tensorhub"), [...args, "--hub", this.hub, "--project", this.project], {encoding: "utf8"});
  }

  /// The text of every element matching `selector`, in document order.
  cellTexts(selector) {
    return this.page.$$eval(selector, cells => cells.map(c => c.textContent));
  }

  screenshot(name) {
    return this.page.screenshot({path: path.join(output, `${name}.png`), fullPage: true});
  }

  // The ui is waited for before its directory goes: it may still be writing there (SQLite's
  // journal), and rmSync would then meet a directory that is not empty (ENOTEMPTY).
  async close() {
    await this.context?.close();
    if (this.ui && this.ui.exitCode === null && this.ui.signalCode === null) {
      const exited = new Promise(resolve => this.ui.once("exit", resolve));
      this.ui.kill("SIGTERM");
      await exited;
    }
    if (this.dir) rmSync(this.dir, {recursive: true, force: true, maxRetries: 5, retryDelay: 100});
  }
}

/// Starts `tensorhub ui --hub <hub> --project <project> --port 0 <uiArgs...>` and resolves to
/// {child, url} once it prints its address (the benches under bench/ use it too).
export function startUi(hub, project, uiArgs) {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(bin, "tensorhub"), ["ui", "--hub", hub, "--project", project, "--port", "0", ...uiArgs],
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
