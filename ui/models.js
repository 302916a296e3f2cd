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
  // The lineage tag has a section of its own (below); the table keeps the rest.
  const tags = Object.entries(m.tags).filter(([k]) => k !== "lineage").map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, formatValue(v))));
  main().replaceChildren(
      el("h1", {}, `Model ${m.id}: `, m.model_name),
      el("h2", {}, "Layers ", el("a", {href: `#/graph?model=${m.id}`, id: "graph-link", class: "small"},
                                 "graph and weight histograms")),
      table(["layer", "type", "output shape", "params"].map(h => el("th", {}, h)), layers),
      el("p", {class: "muted", id: "total-params"}, `input ${JSON.stringify(m.input_shape)}, `,
         `${m.total_params.toLocaleString("en-US")} parameters`),
      el("h2", {}, "Aliases"), aliasSection(m),
      el("h2", {}, "Lineage"), lineageSection(m.lineage),
      el("h2", {}, "Tags"),
      table(["tag", "value"].map(h => el("th", {}, h)), tags),
      el("h2", {}, "Files"),
      el("p", {}, el("a", {href: `/api/models/${m.id}/model.json`, download: "", id: "download-json"}, "model.json"), " ",
         el("a", {href: `/api/models/${m.id}/weights.safetensors`, download: "", id: "download-weights"}, "weights.safetensors")),
      el("h2", {}, "Serve it"),
      el("pre", {id: "serve-command"}, m.serve_command));
}

// The aliases of this model's name (model_aliases.h): where each points, this model's marked;
// an editor may point one here (POST /api/models/<id>/alias, recorded with their name).
function aliasSection(m) {
  const rows = m.aliases.map(a => el("tr", {"data-alias": a.alias},
      el("td", {}, a.alias),
      el("td", {class: "num"}, a.model_id === m.id ? "this model" : el("a", {href: `#/models/${a.model_id}`}, a.model_id)),
      el("td", {}, a.user), el("td", {}, a.time)));
  const parts = [rows.length ? table(["alias", "model", "moved by", "when"].map(h => el("th", {}, h)), rows)
                             : el("p", {class: "muted", id: "no-aliases"}, `no aliases of ${m.model_name}`)];
  if (isEditor()) {
    const name = el("input", {id: "alias-name", placeholder: "champion", spellcheck: "false"});
    const reason = el("input", {id: "alias-reason", placeholder: "why (kept in the history)"});
    const button = el("button", {id: "alias-set"}, "point here");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await post(`/api/models/${m.id}/alias`, {alias: name.value.trim(), reason: reason.value});
        route();  // redraw with the alias moved
      } catch (e) {
        showError(`alias ${name.value}: ${e.message}`);
        button.disabled = false;
      }
    });
    parts.push(el("div", {class: "toolbar"}, el("label", {for: "alias-name"}, "alias"), name, reason, button));
  }
  return el("div", {id: "aliases"}, ...parts);
}

// Where the model came from (store/lineage.h): its task, what ran, the datasets it read.
function lineageSection(l) {
  if (!l || !l.recorded) return el("p", {class: "muted", id: "lineage"}, "no lineage recorded (saved before tensorhub recorded it)");
  const items = [];
  if (l.task_id !== undefined)
    items.push(el("li", {}, "task ", el("a", {href: `#/tasks/${l.task_id}`}, l.task_id), ` (attempt ${l.attempt}) `,
                  l.task_name || "", ", hyperparameters ", formatValue(l.hyper_parameters)));
  else items.push(el("li", {}, "no task: saved outside a runner"));
  if (l.command) items.push(el("li", {}, "command ", el("code", {}, l.command)));
  if (l.spec_sha256) items.push(el("li", {}, "spec sha256 ", el("code", {}, l.spec_sha256)));
  if (l.script_sha256) items.push(el("li", {}, `script ${l.script_name} sha256 `, el("code", {}, l.script_sha256)));
  for (const d of l.datasets)
    items.push(el("li", {"data-dataset": d.id}, `dataset ${d.id} "${d.dataset_name}" sha256 `, el("code", {}, d.sha256.slice(0, 12)),
                  d.in_hub ? (d.unchanged ? " (in the hub, unchanged)" : " (in the hub, changed since)") : " (deleted)"));
  if (!l.datasets.length) items.push(el("li", {}, "no dataset read from the hub before the save"));
  items.push(el("li", {}, `saved by tensorhub ${l.tensorhub_version} (${l.git_commit}) on ${l.host}`));
  return el("ul", {class: "lineage", id: "lineage"}, ...items);
}

views.models = {show: (gen, id) => (id ? showModel(gen, id) : showModels(gen))};
