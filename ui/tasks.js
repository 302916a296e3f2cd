// The Tasks view (#/tasks): every task of the project, followed live by long polling /api/tasks.
"use strict";

let tasksAbort = null;  // the pending /api/tasks long poll, aborted when leaving the view

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
            el("td", {"data-col": "task_name"}, t.task_name, whatRuns(t)),
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

// What the task runs, under its name: a script task's file, else its command (a train-spec
// task has neither).
function whatRuns(t) {
  const text = t.script_name ? `script ${t.script_name}` : t.command;
  return text ? el("div", {class: "what-runs"}, text) : null;
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

// Answers at once the first time, then only when something changed (or after 25 s).
function showTasks(gen) {
  return followLive(gen, "tasks",
                    (version, signal) => api(`/api/tasks?since=${encodeURIComponent(version)}&wait=25`, signal),
                    renderTasks, controller => { tasksAbort = controller; });
}


views.tasks = {
  show: showTasks,
  leave: () => {
    if (tasksAbort) tasksAbort.abort();
    clearInterval(durationTimer);
    document.getElementById("live").textContent = "";
  },
};
