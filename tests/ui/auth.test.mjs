// A dashboard shared with a team (tensorhub ui with users, src/ui/auth.h), in Chromium: the
// login form, a viewer who sees no cancel or alias button and whose POSTs the API refuses
// (403), an editor who cancels a task and points an alias at a model from the page, a request
// without a session (401), a form POST from a page of another origin (refused: no CSRF token),
// a user deleted with the CLI (logged out at the next request), and wrong tokens rate limited
// (429). Users are added by the real `tensorhub user add` before the ui starts.
import {test, before, after} from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import {Dashboard} from "./harness.mjs";

let d, page, baseUrl, ids;
const tokens = {};

before(async () => {
  d = await Dashboard.start(dash => {
    for (const [name, role] of [["vera", "viewer"], ["ed", "editor"], ["gone", "editor"]])
      tokens[name] = JSON.parse(dash.cli(["user", "add", name, "--role", role, "--json"])).token;
    return [];
  });
  ({page, baseUrl, ids} = d);
});

after(async () => { await d?.close(); });

async function logIn(name) {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector("#login");
  await page.fill("#login-token", tokens[name]);
  await page.click("#login-submit");
  await page.waitForSelector("#who-user");
}

async function logOut() {
  await page.click("#logout");
  await page.waitForSelector("#login");
}

// The page's own fetch, as its scripts send it: [status, body].
function pageFetch(path, init) {
  return page.evaluate(async ([p, i]) => {
    const r = await fetch(p, i);
    return [r.status, await r.text()];
  }, [path, init]);
}

test("without a session the page asks for a token and the API answers 401", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector("#login");
  assert.equal(await page.$$eval("tbody tr", rows => rows.length), 0, "no task shown before a login");
  const [status, body] = await pageFetch("/api/tasks");
  assert.equal(status, 401);
  assert.equal(JSON.parse(body).login, true);
  await page.fill("#login-token", "thu_not-a-token");
  await page.click("#login-submit");
  await page.waitForFunction(() => document.querySelector("#login-error").textContent !== "");
  assert.match(await page.textContent("#login-error"), /wrong or revoked token/);
  await d.screenshot("auth-login");
});

test("a viewer reads but has no cancel or alias button, and the API refuses both", async () => {
  await logIn("vera");
  assert.equal(await page.textContent("#who-user"), "vera (viewer)");
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="pending"]`);
  assert.equal(await page.$$eval("button.cancel", b => b.length), 0);
  await page.goto(`${baseUrl}#/models/${ids.model_high}`);
  await page.waitForSelector("#aliases");
  assert.equal(await page.$$eval("#alias-set", b => b.length), 0);
  // The page's own session and CSRF token, by hand: still 403 for a viewer.
  const csrf = await page.evaluate(() => session.csrf_token);
  const headers = {"X-CSRF-Token": csrf, "Content-Type": "application/json"};
  const [cancel] = await pageFetch(`/api/tasks/${ids.pending}/cancel`, {method: "POST", headers, body: ""});
  assert.equal(cancel, 403);
  const [move] = await pageFetch(`/api/models/${ids.model_high}/alias`,
                                 {method: "POST", headers, body: JSON.stringify({alias: "champion"})});
  assert.equal(move, 403);
  assert.match(d.cli(["task", "list", "--json", "--filter", JSON.stringify({id: ids.pending})]), /"status":\s*"pending"/);
  await logOut();
});

test("a form POST from another origin is refused, even for a logged-in editor", async () => {
  await logIn("ed");
  // Another site on the same host (same-site for SameSite, so the cookie goes with it).
  const evil = http.createServer((req, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end(`<form id="f" method="POST" action="${baseUrl}api/tasks/${ids.pending}/cancel"></form>
             <script>document.getElementById("f").submit()</script>`);
  });
  await new Promise(r => evil.listen(0, "127.0.0.1", r));
  const other = await d.context.newPage();
  const answered = other.waitForResponse(r => r.url().includes("/cancel"));
  await other.goto(`http://127.0.0.1:${evil.address().port}/`);
  const response = await answered;
  assert.equal(response.status(), 403);
  assert.match(await response.text(), /cross-site request refused/);
  await other.close();
  evil.close();
  assert.match(d.cli(["task", "list", "--json", "--filter", JSON.stringify({id: ids.pending})]), /"status":\s*"pending"/);
});

test("an editor cancels a task and points an alias at a model from the page", async () => {
  await page.goto(`${baseUrl}#/tasks`);
  await page.waitForSelector(`tr[data-id="${ids.pending}"] button.cancel`);
  await page.click(`tr[data-id="${ids.pending}"] button.cancel`);
  await page.waitForSelector(`tr[data-id="${ids.pending}"][data-status="cancelled"]`, {timeout: 15000});

  await page.goto(`${baseUrl}#/models/${ids.model_high}`);
  await page.waitForSelector("#alias-set");
  await page.fill("#alias-name", "champion");
  await page.fill("#alias-reason", "best on the seed");
  await page.click("#alias-set");
  await page.waitForSelector('tr[data-alias="champion"]');
  assert.match(await page.textContent('tr[data-alias="champion"]'), /championthis modeled/);
  const history = JSON.parse(d.cli(["model", "alias", "history", "mlp", "champion", "--json"]));
  assert.equal(history.length, 1);
  assert.equal(history[0].to_id, ids.model_high);
  assert.equal(history[0].user, "ed");
  assert.equal(history[0].reason, "best on the seed");
  await d.screenshot("auth-editor-model");
  await logOut();
});

test("a user deleted with the CLI is logged out at the next request", async () => {
  await logIn("gone");
  await page.waitForSelector(`tr[data-id="${ids.running}"]`);
  d.cli(["user", "delete", "gone"]);
  await page.goto(`${baseUrl}#/models`);
  await page.reload();
  await page.waitForSelector("#login");
  const [status, body] = await pageFetch("/api/models");
  assert.equal(status, 401);
  assert.match(body, /log in/);
});

test("wrong tokens are rate limited: 429, then even the right token", async () => {
  // 10 failures a minute per address (the first test's wrong token was one of them).
  const statuses = [];
  while (statuses.length < 12 && statuses.at(-1) !== 429) {
    const [status] = await pageFetch("/api/login", {method: "POST", body: JSON.stringify({token: `thu_guess${statuses.length}`})});
    statuses.push(status);
  }
  assert.deepEqual(statuses, [...Array(9).fill(401), 429]);
  const [right, body] = await pageFetch("/api/login", {method: "POST", body: JSON.stringify({token: tokens.ed})});
  assert.equal(right, 429);
  assert.match(body, /too many failed logins/);
});
