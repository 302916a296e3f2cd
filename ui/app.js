// tensorhub ui: the dashboard's page. Views are built with DOM calls; every string from the hub
// goes in with textContent (never innerHTML), so a model named "<img src=x onerror=...>" is
// shown as those characters.
"use strict";

const main = () => document.getElementById("main");
let viewGeneration = 0;  // bumped on every navigation: a stale view's loops stop
let tasksAbort = null;   // the pending /api/tasks long poll, aborted when leaving the view
// Set by `tensorhub ui --allow-cancel` (a new one at each start); empty: no cancel buttons.
const cancelToken = document.querySelector('meta[name="tensorhub-cancel-token"]')?.content || "";

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

async function api(path, signal) {
  const res = await fetch(path, {signal, cache: "no-store"});
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
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

// ---- Overview ----------------------------------------------------------------------------

async function showOverview(gen) {
  const data = await api("/api/projects");
  if (gen !== viewGeneration) return;
  const cards = data.projects.map(p => {
    const t = p.tasks;
    const rows = [["datasets", p.datasets], ["models", p.models], ["searches", p.searches],
                  ["tasks pending", t.pending], ["tasks running", t.running], ["tasks finished", t.finished],
                  ["tasks failed", t.failed], ["tasks cancelled", t.cancelled]];
    return el("div", {class: "card", "data-project": p.name},
              el("h2", {}, p.name),
              el("dl", {}, ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {"data-count": k}, v)])));
  });
  main().replaceChildren(el("h1", {}, "Projects"), el("div", {class: "cards"}, ...cards));
}

// ---- Tasks: followed live by long polling /api/tasks -----------------------------------------

async function cancelTask(id, button) {
  button.disabled = true;
  try {
    const res = await fetch(`/api/tasks/${id}/cancel`, {method: "POST", headers: {"X-Tensorhub-Token": cancelToken}});
    const body = await res.json();
    if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
    showError("");  // the long poll brings the new status in
  } catch (e) {
    showError(`cancel task ${id}: ${e.message}`);
    button.disabled = false;
  }
}

function cancelCell(t) {
  if (!cancelToken || (t.status !== "pending" && t.status !== "running")) return el("td", {"data-col": "actions"});
  const button = el("button", {class: "cancel"}, "cancel");
  button.addEventListener("click", () => cancelTask(t.id, button));
  return el("td", {"data-col": "actions"}, button);
}

function taskRow(t) {
  const tail = t.error_tail ? el("pre", {}, t.error_tail) : null;
  return el("tr", {"data-id": t.id, "data-status": t.status},
            el("td", {class: "num", "data-col": "id"}, t.id),
            el("td", {"data-col": "task_name"}, t.task_name),
            el("td", {"data-col": "status"}, el("span", {class: `status status-${t.status}`}, t.status)),
            el("td", {class: "num", "data-col": "attempts"}, `${t.attempt} / ${t.max_attempts}`),
            el("td", {"data-col": "runner"}, t.runner),
            el("td", {class: "num", "data-col": "duration", "data-started": t.status === "running" ? t.started : null},
               formatDuration(t.duration_s)),
            el("td", {"data-col": "progress"}, formatEpoch(t.last_epoch)),
            el("td", {"data-col": "hyper_parameters"}, formatValue(t.hyper_parameters)),
            el("td", {"data-col": "result"}, formatValue(t.result)),
            el("td", {"data-col": "error"}, t.error, tail),
            cancelCell(t));
}

// "epoch 3: loss 0.41, val_accuracy 0.85" (1-based, as Keras prints it).
function formatEpoch(e) {
  if (!e) return "";
  const logs = Object.entries(e.logs).map(([k, v]) => `${k} ${formatValue(v)}`).join(", ");
  return `epoch ${e.epoch + 1}${logs ? ": " + logs : ""}`;
}

// Running tasks' durations count on between answers: the server's clock at the answer plus
// the time since it came.
let durationTimer = null;
function tickDurations(serverNow, receivedAt) {
  clearInterval(durationTimer);
  durationTimer = setInterval(() => {
    for (const td of document.querySelectorAll('td[data-col="duration"][data-started]')) {
      const s = (serverNow - Number(td.dataset.started)) / 1e6 + (performance.now() - receivedAt) / 1000;
      td.textContent = formatDuration(s);
    }
  }, 1000);
}

function renderTasks(data) {
  tickDurations(data.now, performance.now());
  const headers = ["id", "task", "status", "attempts", "runner", "duration", "progress", "hyperparameters", "result",
                   "error", ""]
      .map(h => el("th", {}, h));
  const counts = {};
  for (const t of data.tasks) counts[t.status] = (counts[t.status] || 0) + 1;
  const summary = Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(", ") || "no tasks";
  main().replaceChildren(el("h1", {}, "Tasks"), el("p", {class: "muted", id: "task-summary"}, summary),
                         table(headers, data.tasks.map(taskRow)));
}

async function showTasks(gen) {
  let version = "";
  const live = document.getElementById("live");
  while (gen === viewGeneration) {
    tasksAbort = new AbortController();
    try {
      // Answers at once the first time, then only when something changed (or after 25 s).
      const data = await api(`/api/tasks?since=${encodeURIComponent(version)}&wait=25`, tasksAbort.signal);
      if (gen !== viewGeneration) return;
      if (data.version !== version || !version) renderTasks(data);
      version = data.version;
      live.textContent = "live";
      showError("");
    } catch (e) {
      if (gen !== viewGeneration || e.name === "AbortError") return;
      live.textContent = "reconnecting";
      showError(`tasks: ${e.message}`);
      await new Promise(r => setTimeout(r, 1000));
    }
  }
}

// ---- Models: the leaderboard --------------------------------------------------------------

const modelsState = {filter: "", sort: "time:-1", offset: 0, limit: 50};

function sortState(key) {
  const [k, d] = modelsState.sort.split(":");
  return k === key ? (d === "-1" ? "desc" : "asc") : "";
}

async function showModels(gen) {
  const q = new URLSearchParams({sort: modelsState.sort, offset: modelsState.offset, limit: modelsState.limit});
  if (modelsState.filter.trim()) q.set("filter", modelsState.filter.trim());
  let data;
  try {
    data = await api(`/api/models?${q}`);
    showError("");
  } catch (e) {
    if (gen !== viewGeneration) return;
    showError(`models: ${e.message}`);
    data = {total: 0, offset: 0, limit: modelsState.limit, keys: [], models: []};
  }
  if (gen !== viewGeneration) return;
  const tagKeys = data.keys.filter(k => k !== "model_name");
  const columns = ["id", "model_name", "time", ...tagKeys];
  const headers = columns.map(key => {
    const s = sortState(key);
    return el("th", {class: `sortable ${s ? "sorted-" + s : ""}`, "data-key": key, onclick: () => {
      // A metric's first click sorts best (largest) first; a second click reverses.
      modelsState.sort = `${key}:${s === "desc" ? 1 : -1}`;
      modelsState.offset = 0;
      showModels(viewGeneration);
    }}, key);
  });
  const rows = data.models.map(m => el("tr", {"data-id": m.id},
      el("td", {class: "num", "data-col": "id"}, el("a", {href: `#/models/${m.id}`}, m.id)),
      el("td", {"data-col": "model_name"}, m.model_name),
      el("td", {"data-col": "time"}, formatTime(m.time)),
      ...tagKeys.map(k => el("td", {class: typeof m.tags[k] === "number" ? "num" : "", "data-col": k},
                             formatValue(m.tags[k])))));
  const filter = el("input", {id: "model-filter", placeholder: '{"test_accuracy": {"$gte": 0.8}}',
                              spellcheck: "false"});
  filter.value = modelsState.filter;
  filter.addEventListener("keydown", e => {
    if (e.key !== "Enter") return;
    modelsState.filter = filter.value;
    modelsState.offset = 0;
    showModels(viewGeneration);
  });
  const last = Math.min(data.offset + data.limit, data.total);
  const pager = el("span", {class: "muted", id: "model-page"},
                   data.total ? `${data.offset + 1}-${last} of ${data.total}` : "no models");
  const prev = el("button", {onclick: () => { modelsState.offset = Math.max(0, data.offset - data.limit); showModels(viewGeneration); }}, "previous");
  const next = el("button", {onclick: () => { modelsState.offset = data.offset + data.limit; showModels(viewGeneration); }}, "next");
  prev.disabled = data.offset === 0;
  next.disabled = last >= data.total;
  main().replaceChildren(el("h1", {}, "Models"),
                         el("div", {class: "toolbar"}, el("label", {for: "model-filter"}, "filter"), filter, prev, pager, next),
                         table(headers, rows));
}

async function showModel(gen, id) {
  const m = await api(`/api/models/${encodeURIComponent(id)}`);
  if (gen !== viewGeneration) return;
  const layers = m.layers.map(l => el("tr", {},
      el("td", {}, l.name), el("td", {}, l.type),
      el("td", {}, JSON.stringify(l.output_shape)), el("td", {class: "num"}, l.params.toLocaleString("en-US"))));
  const tags = Object.entries(m.tags).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, formatValue(v))));
  main().replaceChildren(
      el("h1", {}, `Model ${m.id}: `, m.model_name),
      el("h2", {}, "Layers"),
      table(["layer", "type", "output shape", "params"].map(h => el("th", {}, h)), layers),
      el("p", {class: "muted", id: "total-params"}, `input ${JSON.stringify(m.input_shape)}, `,
         `${m.total_params.toLocaleString("en-US")} parameters`),
      el("h2", {}, "Tags"),
      table(["tag", "value"].map(h => el("th", {}, h)), tags),
      el("h2", {}, "Files"),
      el("p", {}, el("a", {href: `/api/models/${m.id}/model.json`, download: "", id: "download-json"}, "model.json"), " ",
         el("a", {href: `/api/models/${m.id}/weights.safetensors`, download: "", id: "download-weights"}, "weights.safetensors")),
      el("h2", {}, "Serve it"),
      el("pre", {id: "serve-command"}, m.serve_command));
}

// ---- routing -------------------------------------------------------------------------------

async function route() {
  const gen = ++viewGeneration;
  if (tasksAbort) tasksAbort.abort();
  clearInterval(durationTimer);
  document.getElementById("live").textContent = "";
  const hash = location.hash || "#/overview";
  const [, view, arg] = hash.split("/");
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === view);
  showError("");
  try {
    if (view === "tasks") await showTasks(gen);
    else if (view === "models" && arg) await showModel(gen, arg);
    else if (view === "models") await showModels(gen);
    else await showOverview(gen);
  } catch (e) {
    if (gen === viewGeneration) showError(e.message);
  }
}

window.addEventListener("hashchange", route);
route();
