// The Models view: the leaderboard (#/models) and one model's page (#/models/<id>).
"use strict";

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
                         // The server's order (dashboard_api.h): MLflow's rule, not the CLI's MongoDB order.
                         el("p", {class: "muted small", id: "sort-note"},
                            "NaN and missing values sort last in either direction (tensorhub model list keeps ",
                            "MongoDB's order: missing, then NaN, lowest)."),
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
      el("h2", {}, "Layers ", el("a", {href: `#/graph?model=${m.id}`, id: "graph-link", class: "small"},
                                 "graph and weight histograms")),
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

views.models = {show: (gen, id) => (id ? showModel(gen, id) : showModels(gen))};
