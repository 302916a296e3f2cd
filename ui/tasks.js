// The Tasks view (#/tasks): every task of the project, followed live by long polling /api/tasks,
// each with the resources it asks for, why a pending one waits (no live runner could take it),
// and what its attempts used; a task's detail (#/tasks/<id>) shows its attempts' usage and
// its GPUs' utilisation and memory over time beside its epoch reports (uPlot charts).
"use strict";

let tasksAbort = null;  // the pending /api/tasks long poll, aborted when leaving the view
let taskCharts = [];    // the detail's uPlot charts, destroyed when leaving it

async function cancelTask(id, button) {
  button.disabled = true;
  try {
    await post(`/api/tasks/${id}/cancel`);
    showError("");  // the long poll brings the new status in
  } catch (e) {
    showError(`cancel task ${id}: ${e.message}`);
    button.disabled = false;
  }
}

function cancelCell(t) {
  if (!canCancel() || (t.status !== "pending" && t.status !== "running")) return el("td", {"data-col": "actions"});
  const button = el("button", {class: "cancel"}, "cancel");
  button.addEventListener("click", () => cancelTask(t.id, button));
  return el("td", {"data-col": "actions"}, button);
}

function taskRow(t) {
  const tail = t.error_tail ? el("pre", {}, t.error_tail) : null;
  return el("tr", {"data-id": t.id, "data-status": t.status},
            el("td", {class: "num", "data-col": "id"}, el("a", {href: `#/tasks/${t.id}`}, String(t.id))),
            el("td", {"data-col": "task_name"}, t.task_name, whatRuns(t),
               t.resources ? el("div", {class: "task-resources"}, t.resources.text) : null),
            el("td", {"data-col": "status"}, el("span", {class: `status status-${t.status}`}, t.status),
               t.waiting_for ? el("div", {class: "waiting-for"}, `waiting: ${t.waiting_for}`) : null),
            el("td", {class: "num", "data-col": "attempts"}, `${t.attempt} / ${t.max_attempts}`),
            el("td", {"data-col": "runner"}, t.runner),
            el("td", {class: "num", "data-col": "duration", "data-started": t.status === "running" ? t.started : null},
               formatDuration(t.duration_s)),
            el("td", {"data-col": "progress"}, formatEpoch(t.last_epoch)),
            el("td", {"data-col": "usage"}, ...(t.attempts || []).map(a => el("div", {class: "attempt-usage"}, usageText(a)))),
            el("td", {"data-col": "hyper_parameters"}, formatValue(t.hyper_parameters)),
            el("td", {"data-col": "result"}, formatValue(t.result)),
            el("td", {"data-col": "error"}, t.error, tail),
            cancelCell(t));
}

// "#1 finished: 12.3 s, CPU 9.8 s, 1.2 GiB, GPU 71% (max 98%)": one attempt's usage.
function usageText(a) {
  const gpu = a.gpu_utilization_mean === null ? "" :
      `, GPU ${a.gpu_utilization_mean.toFixed(0)}% (max ${a.gpu_utilization_max.toFixed(0)}%)`;
  if (a.outcome === "running") return `#${a.attempt} running`;
  return `#${a.attempt} ${a.outcome}: ${formatDuration(a.wall_s)}, CPU ${a.cpu_s.toFixed(1)} s, ${a.peak_memory}${gpu}`;
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
  const headers = ["id", "task", "status", "attempts", "runner", "duration", "progress", "usage", "hyperparameters",
                   "result", "error", ""]
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

// ---- a task's detail (#/tasks/<id>) ---------------------------------------------------------

function attemptsTable(attempts) {
  const headers = ["attempt", "runner", "host", "outcome", "wall", "CPU s", "peak memory", "GPUs", "GPU util mean",
                   "GPU util max", "error"].map(h => el("th", {}, h));
  const pct = v => (v === null ? "" : `${v.toFixed(0)}%`);
  const rows = attempts.map(a => el("tr", {"data-attempt": a.attempt},
      el("td", {class: "num", "data-col": "attempt"}, String(a.attempt)),
      el("td", {"data-col": "owner"}, a.owner), el("td", {"data-col": "host"}, a.host),
      el("td", {"data-col": "outcome"}, el("span", {class: `status status-${a.outcome}`}, a.outcome)),
      el("td", {class: "num", "data-col": "wall"}, formatDuration(a.wall_s)),
      el("td", {class: "num", "data-col": "cpu"}, a.cpu_s.toFixed(2)),
      el("td", {class: "num", "data-col": "memory", title: a.memory_source}, a.peak_memory),
      el("td", {"data-col": "gpus"}, a.gpus.join(", ")),
      el("td", {class: "num", "data-col": "gpu_mean"}, pct(a.gpu_utilization_mean)),
      el("td", {class: "num", "data-col": "gpu_max"}, pct(a.gpu_utilization_max)),
      el("td", {"data-col": "error"}, a.error)));
  return el("table", {id: "task-attempts"}, el("thead", {}, el("tr", {}, ...headers)), el("tbody", {}, ...rows));
}

// One uPlot chart of `tables` ([[xs], [ys]] each, one per series `labels`) joined on x.
function drawChart(box, tables, labels, xLabel, yLabel) {
  if (!tables.length || typeof uPlot === "undefined") return;
  const colors = ["#2f6fde", "#116329", "#b35900", "#8a3ffc", "#d12771", "#007d79"];
  const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
  const series = [{label: xLabel}, ...labels.map((l, i) => ({label: l, stroke: colors[i % colors.length], width: 2,
                                                             spanGaps: true, points: {show: true, size: 4}}))];
  taskCharts.push(new uPlot({width: Math.max(400, box.clientWidth || 800), height: 240, scales: {x: {time: false}},
                             axes: [{label: xLabel}, {label: yLabel}], series}, data, box));
}

// The GPU samples of every attempt and GPU as series over seconds since the attempt started.
function gpuSeries(attempts, field, scale) {
  const tables = [], labels = [];
  for (const a of attempts) {
    for (const gpu of [...new Set(a.gpu_samples.map(s => s.gpu))]) {
      const mine = a.gpu_samples.filter(s => s.gpu === gpu);
      tables.push([mine.map(s => s.t), mine.map(s => s[field] / scale)]);
      labels.push(`attempt ${a.attempt} GPU ${gpu}`);
    }
  }
  return {tables, labels};
}

// Every numeric metric of the epoch reports, one series per metric and attempt, over the epoch.
function epochSeries(epochs) {
  const byKey = new Map();
  for (const e of epochs)
    for (const [k, v] of Object.entries(e.logs))
      if (typeof v === "number") {
        const key = `${k}${e.attempt === null ? "" : ` (attempt ${e.attempt})`}`;
        if (!byKey.has(key)) byKey.set(key, [[], []]);
        byKey.get(key)[0].push(e.epoch + 1);
        byKey.get(key)[1].push(v);
      }
  return {tables: [...byKey.values()], labels: [...byKey.keys()]};
}

function renderTaskDetail(d) {
  taskCharts.forEach(c => c.destroy());
  taskCharts = [];
  const samples = d.attempts.reduce((n, a) => n + a.gpu_samples.length, 0);
  const epochBox = el("div", {id: "epoch-chart", class: "chart", "data-points": d.epochs.length});
  const utilBox = el("div", {id: "gpu-util-chart", class: "chart", "data-samples": samples});
  const memBox = el("div", {id: "gpu-memory-chart", class: "chart", "data-samples": samples});
  main().replaceChildren(
      el("h1", {}, `Task ${d.task.id}: ${d.task.task_name}`),
      el("p", {class: "muted", id: "task-detail-summary"},
         `${d.task.status}, attempt ${d.task.attempt} of ${d.task.max_attempts} · `, el("a", {href: "#/tasks"}, "all tasks")),
      d.task.resources ? el("p", {id: "task-detail-resources"}, `asks for ${d.task.resources.text}`) : "",
      d.task.waiting_for ? el("p", {class: "muted", id: "task-detail-waiting"}, `waiting: ${d.task.waiting_for}`) : "",
      el("h2", {}, "Attempts"), d.attempts.length ? attemptsTable(d.attempts) : el("p", {class: "muted"}, "not started yet"),
      el("h2", {}, "Epoch reports"), d.epochs.length ? epochBox : el("p", {class: "muted", id: "no-epochs"}, "no epoch reports"),
      el("h2", {}, "GPU utilisation (%)"), samples ? utilBox : el("p", {class: "muted", id: "no-gpu-samples"},
                                                                 "no GPU samples (no GPU, or no NVIDIA management library on the runner)"),
      samples ? el("h2", {}, "GPU memory (MiB)") : "", samples ? memBox : "");
  if (d.epochs.length) {
    const e = epochSeries(d.epochs);
    drawChart(epochBox, e.tables, e.labels, "epoch", "value");
  }
  if (samples) {
    const u = gpuSeries(d.attempts, "utilization", 1);
    drawChart(utilBox, u.tables, u.labels, "seconds since the attempt started", "%");
    const m = gpuSeries(d.attempts, "memory_bytes", 1 << 20);
    drawChart(memBox, m.tables, m.labels, "seconds since the attempt started", "MiB");
  }
}

async function showTaskDetail(gen, id) {
  const d = await api(`/api/tasks/${encodeURIComponent(id)}/usage`);
  if (gen === viewGeneration) renderTaskDetail(d);
}

views.tasks = {
  show: (gen, id) => (id ? showTaskDetail(gen, id) : showTasks(gen)),
  leave: () => {
    if (tasksAbort) tasksAbort.abort();
    clearInterval(durationTimer);
    taskCharts.forEach(c => c.destroy());
    taskCharts = [];
    document.getElementById("live").textContent = "";
  },
};
