// The Searches view: the project's `tensorhub tune` searches (#/searches) and one search as it
// runs (#/searches/<name>): its trials, Hyperband's brackets and ASHA's rungs, and the best
// objective so far against time (uPlot). One search is followed live by long polling
// /api/searches/<name>?since=VERSION (answered when its tasks change: the queue's wait/notify).
"use strict";

let searchAbort = null;  // the pending long poll, aborted when leaving the view
let searchChart = null;

function renderSearchList(data) {
  const headers = ["search", "oracle", "objective", "trials", "state", "best", "created"].map(h => el("th", {}, h));
  const rows = data.searches.map(s => el("tr", {"data-search": s.name},
      el("td", {"data-col": "name"}, el("a", {href: `#/searches/${encodeURIComponent(s.name)}`}, s.name)),
      el("td", {"data-col": "oracle"}, s.oracle),
      el("td", {"data-col": "objective"}, s.objective),
      el("td", {"data-col": "trials"}, `${s.trials}: `, Object.entries(s.statuses).map(([k, v]) => `${v} ${k}`).join(", ")),
      el("td", {"data-col": "state"}, searchState(s)),
      el("td", {class: "num", "data-col": "best"}, s.best ? `${formatValue(s.best.score)} (trial ${s.best.trial_id})` : ""),
      el("td", {"data-col": "created"}, formatTime(s.created))));
  main().replaceChildren(el("h1", {}, "Searches"),
                         data.searches.length ? table(headers, rows)
                                              : el("p", {class: "muted"}, "No search in this project: see `tensorhub tune`."));
}

// "done", "running" (a trial still queued or running) or "stopped" with the tuner's reason.
function searchState(s) {
  if (s.done) return "done";
  if (s.statuses.running || s.statuses.pending) return "running";
  return s.reason ? `stopped: ${s.reason}` : "stopped";
}

// The list follows the project: a new search or a trial's change is a change of its tasks, so
// it waits on the tasks' version (the /api/tasks long poll) and reads the list again when it moves.
function showSearchList(gen) {
  return followLive(gen, "searches",
                    (version, signal) => api(`/api/tasks?since=${encodeURIComponent(version)}&wait=25`, signal),
                    async (tasks, signal) => {
                      const data = await api("/api/searches", signal);
                      if (gen === viewGeneration) renderSearchList(data);
                    },
                    controller => { searchAbort = controller; });
}

const roundWord = (search) => (search.oracle === "asha" ? "rung" : "round");

// Brackets as columns of rounds (ASHA: one bracket of rungs), each trial a chip with its score.
function bracketsView(search) {
  if (!search.brackets.length) return null;
  const trials = new Map(search.trials.map(t => [t.trial_id, t]));
  const best = search.best?.trial_id;
  return el("div", {id: "search-brackets"}, ...search.brackets.map(b => el("div", {class: "bracket", "data-bracket": b.bracket},
      el("h3", {}, search.oracle === "asha" ? "rungs" : `bracket ${b.bracket}`),
      el("div", {class: "rounds"}, ...b.rounds.map(r => el("div", {class: "round", "data-round": r.round},
          el("div", {class: "muted"}, `${roundWord(search)} ${r.round} · ${r.epochs} epochs · ${r.trials.length} trials`),
          ...r.trials.map(id => {
            const t = trials.get(id);
            return el("a", {class: `chip trial-${t.status}${id === best ? " best" : ""}`, "data-trial": id,
                            href: t.task_id ? `#/curves?tasks=${t.task_id}` : null,
                            title: `trial ${id}: ${t.status}${t.parent_trial ? ", from trial " + t.parent_trial : ""}`},
                      id, " ", t.score === null ? "–" : formatValue(t.score));
          })))))));
}

// A running trial's last reported epoch: "epoch 2: val_accuracy 0.81" (1-based, as Keras prints).
function trialProgress(t, metric) {
  if (!t.last_epoch) return "";
  const value = t.last_epoch.logs[metric];
  return `epoch ${t.last_epoch.epoch + 1}${value === undefined ? "" : `: ${metric} ${formatValue(value)}`}`;
}

function trialsTable(search) {
  const params = search.parameters;
  const headers = ["trial", "status", "task", ...(search.brackets.length ? ["bracket", roundWord(search), "epochs"] : []),
                   ...params, search.metric, "progress", "started", "duration"].map(h => el("th", {}, h));
  const rows = search.trials.map(t => {
    const cells = [el("td", {"data-col": "trial"}, t.trial_id),
                   el("td", {"data-col": "status"}, el("span", {class: `status trial-${t.status}`}, t.status)),
                   el("td", {"data-col": "task"}, t.task_id ? el("a", {href: `#/curves?tasks=${t.task_id}`}, `${t.task_id} `) : "",
                      t.task_status)];
    if (search.brackets.length)
      cells.push(el("td", {class: "num", "data-col": "bracket"}, t.bracket), el("td", {class: "num", "data-col": "round"}, t.round),
                 el("td", {class: "num", "data-col": "epochs"}, t.epochs));
    for (const p of params) cells.push(el("td", {"data-col": p}, formatValue(t.hyper_parameters[p])));
    const duration = t.started && t.finished ? (t.finished - t.started) / 1e6 : null;
    cells.push(el("td", {class: "num", "data-col": "score"}, formatValue(t.score)),
               el("td", {"data-col": "progress"}, trialProgress(t, search.metric)),
               el("td", {"data-col": "started"}, formatTime(t.started)),
               el("td", {class: "num", "data-col": "duration"}, formatDuration(duration)));
    return el("tr", {"data-trial": t.trial_id}, ...cells);
  });
  return el("table", {id: "search-trials"}, el("thead", {}, el("tr", {}, ...headers)), el("tbody", {}, ...rows));
}

// The best objective so far at each trial's end, a stepped line over the trials' scores.
function drawBestSoFar(search, box) {
  searchChart?.destroy();
  searchChart = null;
  const points = search.best_so_far;
  if (!points.length || typeof uPlot === "undefined") return;
  const xs = points.map(p => p.time_s);
  const opts = {
    width: Math.max(400, box.clientWidth || 800), height: 260,
    scales: {x: {time: false}},
    axes: [{label: "seconds since the search started"}, {label: search.metric}],
    series: [{label: "time (s)", value: (u, v) => (v === null ? "" : v.toFixed(2))},
             {label: `best ${search.metric}`, stroke: "#116329", width: 2, paths: uPlot.paths.stepped({align: 1})},
             {label: "trial's score", stroke: "#2f6fde", paths: () => null, points: {show: true, size: 6}}],
  };
  searchChart = new uPlot(opts, [xs, points.map(p => p.best), points.map(p => p.score)], box);
}

function bestSoFarTable(search) {
  return el("table", {id: "best-so-far"},
            el("thead", {}, el("tr", {}, ...["time (s)", "trial", search.metric, "best so far"].map(h => el("th", {}, h)))),
            el("tbody", {}, ...search.best_so_far.map(p => el("tr", {"data-trial": p.trial_id},
                el("td", {class: "num", "data-col": "time"}, p.time_s.toFixed(3)), el("td", {"data-col": "trial"}, p.trial_id),
                el("td", {class: "num", "data-col": "score"}, formatValue(p.score)),
                el("td", {class: "num", "data-col": "best"}, formatValue(p.best))))));
}

function renderSearch(search) {
  const state = search.done ? `done: ${search.reason}` : (search.reason ? `stopped: ${search.reason}` : "running (or its tuner is stopped)");
  const best = search.best ? `best ${search.metric} ${formatValue(search.best.score)} (trial ${search.best.trial_id})` : "no score yet";
  const chart = el("div", {id: "best-chart", class: "chart"});
  main().replaceChildren(
      el("h1", {}, "Search ", search.name),
      el("p", {class: "muted", id: "search-summary"}, `${search.oracle}, objective ${search.objective}`,
         search.pruner ? el("span", {id: "search-pruner"}, `, ${search.pruner.name} pruner`) : "",
         `; ${search.trials.length} trials; `,
         el("span", {id: "search-best"}, best), "; ", el("span", {id: "search-state"}, state), " · ",
         el("a", {href: `#/hparams?search=${encodeURIComponent(search.name)}`}, "hyperparameters")),
      el("h2", {}, `Best ${search.metric} so far`), chart,
      el("details", {}, el("summary", {}, "as a table"), bestSoFarTable(search)),
      search.brackets.length ? el("h2", {}, search.oracle === "asha" ? "ASHA rungs" : "Hyperband brackets") : null,
      bracketsView(search),
      el("h2", {}, "Trials"), trialsTable(search));
  drawBestSoFar(search, chart);
}

function followSearch(gen, name) {
  return followLive(gen, `search ${name}`,
                    (version, signal) => {
                      const q = new URLSearchParams({since: version, wait: 25});
                      return api(`/api/searches/${encodeURIComponent(name)}?${q}`, signal);
                    },
                    renderSearch, controller => { searchAbort = controller; });
}

views.searches = {
  show: (gen, name) => (name ? followSearch(gen, name) : showSearchList(gen)),
  leave: () => {
    searchAbort?.abort();
    searchChart?.destroy();
    searchChart = null;
    document.getElementById("live").textContent = "";
  },
};
