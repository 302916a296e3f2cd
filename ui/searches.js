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

// PBT's lineage cell: whose weights the trial took ("trial 0003 (member 1)"), or the checkpoint
// it went on from.
function lineageText(t) {
  if (t.exploited_trial !== null) return `took trial ${t.exploited_trial} (member ${t.exploited_member})`;
  return t.parent_trial === null ? "" : `went on from trial ${t.parent_trial}`;
}

function trialsTable(search) {
  const params = search.parameters;
  const pbt = search.trials.some(t => t.member !== null);
  const headers = ["trial", "status", "task", ...(search.brackets.length ? ["bracket", roundWord(search), "epochs"] : []),
                   ...(pbt ? ["member", "segment", "epochs", "weights"] : []),
                   ...params, search.metric, "progress", "started", "duration"].map(h => el("th", {}, h));
  const rows = search.trials.map(t => {
    const cells = [el("td", {"data-col": "trial"}, t.trial_id),
                   el("td", {"data-col": "status"}, el("span", {class: `status trial-${t.status}`}, t.status)),
                   el("td", {"data-col": "task"}, t.task_id ? el("a", {href: `#/curves?tasks=${t.task_id}`}, `${t.task_id} `) : "",
                      t.task_status)];
    if (search.brackets.length)
      cells.push(el("td", {class: "num", "data-col": "bracket"}, t.bracket), el("td", {class: "num", "data-col": "round"}, t.round),
                 el("td", {class: "num", "data-col": "epochs"}, t.epochs));
    if (pbt)
      cells.push(el("td", {class: "num", "data-col": "member"}, t.member), el("td", {class: "num", "data-col": "segment"}, t.segment),
                 el("td", {class: "num", "data-col": "epochs"}, t.epochs), el("td", {"data-col": "lineage"}, lineageText(t)));
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

// A search of several objectives: the completed trials on the first two (x, y) as an SVG
// scatter, the Pareto front's points marked and joined (hover a point for its trial), and the
// front as a table with one column per objective.
function paretoView(search) {
  if (!search.objectives) return null;
  const [ox, oy] = search.objectives;
  const front = new Set(search.pareto_front);
  const points = search.trials.filter(t => t.values).map(t => ({t, x: t.values[0], y: t.values[1]}));
  const W = 520, H = 320, M = 44;
  const span = vs => { const lo = Math.min(...vs), hi = Math.max(...vs); return [lo, hi > lo ? hi : lo + 1]; };
  const [x0, x1] = span(points.map(p => p.x)), [y0, y1] = span(points.map(p => p.y));
  const px = x => M + (x - x0) / (x1 - x0) * (W - 2 * M), py = y => H - M - (y - y0) / (y1 - y0) * (H - 2 * M);
  const frontPts = points.filter(p => front.has(p.t.trial_id)).sort((a, b) => a.x - b.x);
  const chart = svg("svg", {id: "pareto-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`},
      svg("line", {x1: M, y1: H - M, x2: W - M, y2: H - M, stroke: "#888"}),
      svg("line", {x1: M, y1: M, x2: M, y2: H - M, stroke: "#888"}),
      svg("text", {x: W / 2, y: H - 8, "text-anchor": "middle"}, `${ox.name} (${ox.maximize ? "max" : "min"})`),
      svg("text", {x: 12, y: H / 2, transform: `rotate(-90 12 ${H / 2})`, "text-anchor": "middle"},
          `${oy ? oy.name : ""} (${oy && oy.maximize ? "max" : "min"})`),
      svg("polyline", {class: "pareto-line", fill: "none", stroke: "#116329", "stroke-width": 2,
                       points: frontPts.map(p => `${px(p.x)},${py(p.y)}`).join(" ")}),
      ...points.map(p => svg("circle", {class: front.has(p.t.trial_id) ? "point front" : "point", "data-trial": p.t.trial_id,
                                         cx: px(p.x), cy: py(p.y), r: front.has(p.t.trial_id) ? 6 : 4,
                                         fill: front.has(p.t.trial_id) ? "#116329" : "#2f6fde"},
          svg("title", {}, `trial ${p.t.trial_id}: ` + search.objectives.map((o, i) => `${o.name} ${formatValue(p.t.values[i])}`).join(", ")))));
  const rows = search.pareto_front.map(id => {
    const t = search.trials.find(x => x.trial_id === id);
    return el("tr", {"data-trial": id}, el("td", {"data-col": "trial"}, id),
              ...search.objectives.map((o, i) => el("td", {class: "num", "data-col": o.name}, formatValue(t.values[i]))));
  });
  const table = el("table", {id: "pareto-front"},
                   el("thead", {}, el("tr", {}, el("th", {}, "trial"), ...search.objectives.map(o => el("th", {}, o.name)))),
                   el("tbody", {}, ...rows));
  return el("div", {id: "pareto"}, el("h2", {}, `Pareto front: ${front.size} of ${points.length} trials`), chart, table);
}

function renderSearch(search) {
  const state = search.done ? `done: ${search.reason}` : (search.reason ? `stopped: ${search.reason}` : "running (or its tuner is stopped)");
  const best = search.best ? `best ${search.metric} ${formatValue(search.best.score)} (trial ${search.best.trial_id})` : "no score yet";
  const chart = el("div", {id: "best-chart", class: "chart"});
  // Views a search does not have (brackets, a front) are null: left out, not shown as "null".
  main().replaceChildren(...[
      el("h1", {}, "Search ", search.name),
      el("p", {class: "muted", id: "search-summary"}, `${search.oracle}, objective ${search.objective}`,
         search.pruner ? el("span", {id: "search-pruner"}, `, ${search.pruner.name} pruner`) : "",
         `; ${search.trials.length} trials; `,
         el("span", {id: "search-best"}, best), "; ", el("span", {id: "search-state"}, state), " · ",
         el("a", {href: `#/hparams?search=${encodeURIComponent(search.name)}`}, "hyperparameters")),
      paretoView(search),
      el("h2", {}, `Best ${search.metric} so far`), chart,
      el("details", {}, el("summary", {}, "as a table"), bestSoFarTable(search)),
      search.brackets.length ? el("h2", {}, search.oracle === "asha" ? "ASHA rungs" : "Hyperband brackets") : null,
      bracketsView(search),
      el("h2", {}, "Trials"), trialsTable(search)].filter(Boolean));
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
