// The Overview view (#/overview): every project of the hub with its counts, the served one
// (tensorhub ui --project, which the other views show) first and marked.
"use strict";

async function showOverview(gen) {
  const data = await api("/api/projects");
  if (gen !== viewGeneration) return;
  const cards = data.projects.map(p => {
    const t = p.tasks;
    const rows = [["datasets", p.datasets], ["models", p.models], ["searches", p.searches],
                  ["tasks pending", t.pending], ["tasks running", t.running], ["tasks finished", t.finished],
                  ["tasks failed", t.failed], ["tasks cancelled", t.cancelled]];
    return el("div", {class: `card${p.served ? " served" : ""}`, "data-project": p.name},
              el("h2", {}, p.name, p.served ? el("span", {class: "served-mark"}, "served") : null),
              el("dl", {}, ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {"data-count": k}, v)])));
  });
  main().replaceChildren(
      el("h1", {}, "Projects"),
      el("p", {class: "muted"}, "The other views show the served project; start tensorhub ui with --project NAME ",
         "to look at another."),
      el("div", {class: "cards"}, ...cards));
}

views.overview = {show: showOverview};
