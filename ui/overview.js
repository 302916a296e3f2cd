// The Overview view (#/overview): the hub's projects with their counts.
"use strict";

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

views.overview = {show: showOverview};
