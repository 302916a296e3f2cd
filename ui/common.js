// tensorhub ui: what every view of the dashboard's page shares. Views are built with DOM calls;
// every string from the hub goes in with textContent (never innerHTML), so a model named
// "<img src=x onerror=...>" is shown as those characters.
//
// The page is plain scripts loaded in order by index.html (common.js first, app.js last): each
// view's file registers itself in `views` (below) and app.js routes #/<name>/<arg>?<query> to it.
"use strict";

const main = () => document.getElementById("main");
let viewGeneration = 0;  // bumped on every navigation: a stale view's loops stop
// Set by `tensorhub ui --allow-cancel` without logins (a new one at each start); empty: no
// cancel buttons unless a logged-in editor is here.
const cancelToken = document.querySelector('meta[name="tensorhub-cancel-token"]')?.content || "";
// What /api/session said (app.js asks before the first view): {auth: false} without logins,
// else {auth: true, user, role, csrf_token}.
let session = {auth: false};
const isEditor = () => session.auth && session.role === "editor";
const canCancel = () => (session.auth ? isEditor() : !!cancelToken);

// The headers of the page's POSTs: the session's CSRF token with logins (auth.h), else the
// start's cancel token.
function postHeaders(extra = {}) {
  return {...extra, ...(session.auth ? {"X-CSRF-Token": session.csrf_token} : {"X-Tensorhub-Token": cancelToken})};
}

// POSTs `body` as JSON (or nothing) and resolves to the answer's JSON; throws its error.
async function post(path, body) {
  const init = {method: "POST", headers: postHeaders(body === undefined ? {} : {"Content-Type": "application/json"})};
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(path, init);
  const answer = await res.json();
  if (res.status === 401 && answer.login) showLogin(answer.error);
  if (!res.ok) throw Object.assign(new Error(answer.error || `HTTP ${res.status}`), {status: res.status});
  return answer;
}

// The views by the name in their URL (#/tasks -> views.tasks). Each is
//   {show: async (gen, arg, params) => ..., leave: () => ...}
// show draws the view (and returns when drawn; long-lived loops check gen !== viewGeneration);
// arg is the path part after the name (#/models/12 -> "12"), params the URLSearchParams after
// "?" (#/curves?tasks=1,2); leave (optional) stops what show started when the user navigates away.
const views = {};

// el("td", {class: "num"}, "text", child...): an element; strings become text nodes.
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// svg("rect", {x: 0, ...}, child...): an SVG element (the Hyperparameters' parallel coordinates,
// the Graph view); strings become text nodes, as el().
const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function api(path, signal) {
  const res = await fetch(path, {signal, cache: "no-store"});
  const body = await res.json();
  if (res.status === 401 && body.login) showLogin(body.error);
  if (!res.ok) throw Object.assign(new Error(body.error || `HTTP ${res.status}`), {status: res.status});
  return body;
}

// Whether a live view should ask again after this error: a network error or a 5xx may pass, a
// 4xx (no such search, a bad query) is permanent.
const retryable = e => !(e.status >= 400 && e.status < 500);

// Follows a long-polled endpoint while view `gen` is shown (Tasks, Searches). ask(version, signal)
// asks with since=version and resolves to an answer holding a `version`; show(answer, signal)
// draws it (it may await more requests) the first time and whenever the version moves. Network
// errors and 5xx are retried each second ("reconnecting", the error shown under `label`); a 4xx
// ends the loop, thrown to the router, which shows it once. onRequest(controller) receives each
// request's AbortController, which the view's leave() aborts.
async function followLive(gen, label, ask, show, onRequest) {
  let version = "";
  const live = document.getElementById("live");
  while (gen === viewGeneration) {
    const controller = new AbortController();
    onRequest(controller);
    try {
      const answer = await ask(version, controller.signal);
      if (gen !== viewGeneration) return;
      if (answer.version !== version || !version) await show(answer, controller.signal);
      if (gen !== viewGeneration) return;
      version = answer.version;
      live.textContent = "live";
      showError("");
    } catch (e) {
      if (gen !== viewGeneration || e.name === "AbortError") return;
      // Nothing of this view drawn yet: not the previous view's page under this view's tab.
      if (!version) main().replaceChildren();
      if (!retryable(e)) {
        live.textContent = "";
        throw e;  // the router clears the page and shows the error, once
      }
      live.textContent = "reconnecting";
      showError(`${label}: ${e.message}`);
      await new Promise(r => setTimeout(r, 1000));
    }
  }
}

function showError(message) {
  const p = document.getElementById("error");
  p.textContent = message || "";
  p.hidden = !message;
}

// Numbers as people read them; {"$numberDouble": "NaN"} as NaN; objects as compact JSON.
function formatValue(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "object" && "$numberDouble" in v && Object.keys(v).length === 1) return v.$numberDouble;
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(6).replace(/\.?0+$/, "");
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function formatTime(micros) {
  if (!micros) return "";
  return new Date(micros / 1000).toLocaleString();
}

function formatDuration(s) {
  if (s === null || s === undefined) return "";
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...headers)), el("tbody", {}, ...rows));
}

// Long values (a spec task's whole `history` as its result, a model's hyperparameters) are cut
// short to one line with the whole value in the cell's tooltip, so that every table stays within
// the window and its buttons on screen. Applied to every cell any view adds (a plain text cell
// of more than 60 characters); the text itself is unchanged, so tests and sorting read it whole.
const longCell = 60;
function cutLongCells(node) {
  const cells = node.matches?.("td") ? [node] : [...(node.querySelectorAll?.("td") || [])];
  for (const td of cells) {
    if (td.children.length || td.textContent.length <= longCell) continue;
    td.title = td.textContent;
    td.replaceChildren(el("span", {class: "cut"}, td.textContent));
  }
}
new MutationObserver(records => {
  for (const r of records) for (const n of r.addedNodes) if (n.nodeType === Node.ELEMENT_NODE) cutLongCells(n);
}).observe(main(), {childList: true, subtree: true});
