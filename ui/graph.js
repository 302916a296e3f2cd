// The Graph view (#/graph?model=ID): a stored model's layers as a graph (/api/models/<id>/graph),
// each node its name, type, output shape and parameter count, the totals as Keras's summary()
// prints them, and beside it the histograms of the clicked layer's weights
// (/api/models/<id>/layers/<name>/histograms): the stored weights, and for a model linked to its
// TensorBoard run (the "log_dir" tag, graph_api.h) how each weight's histogram moved over the
// epochs, drawn as TensorBoard's histogram view draws them (one curve per step, offset
// downwards, later steps darker). A model.json the view cannot place is explained, with its
// text, instead of a graph. #/graph without a model lists the project's models to pick from.
"use strict";

const GRAPH = {width: 440, node: 50, gap: 26, top: 12};

// Keras's way of printing a shape with its batch axis: (None, 6, 6, 4).
const kerasShape = shape => `(None${shape.map(n => `, ${n}`).join("")})`;
const count = n => n.toLocaleString("en-US");

async function showGraphChooser(gen) {
  const data = await api("/api/models?limit=100");
  if (gen !== viewGeneration) return;
  main().replaceChildren(el("h1", {}, "Graph"),
      el("p", {class: "muted"}, "Pick a model (or open one from the Models view):"),
      el("ul", {id: "graph-models"}, ...data.models.map(m => el("li", {},
          el("a", {href: `#/graph?model=${m.id}`}, `${m.id}: ${m.model_name}`)))));
}

// One node of the chain: a box with the layer's name and type, its output shape and params.
function graphNode(layer, y, onClick) {
  const g = svg("g", {class: `graph-node${layer.weights?.length ? " has-weights" : ""}`, "data-layer": layer.name,
                      "data-type": layer.type, "data-shape": kerasShape(layer.output_shape), "data-params": layer.params,
                      transform: `translate(20,${y})`, tabindex: "0"},
                svg("rect", {width: GRAPH.width - 40, height: GRAPH.node, rx: 6}),
                svg("text", {x: 12, y: 20, class: "graph-title"}, `${layer.name} (${layer.type})`),
                svg("text", {x: 12, y: 39, class: "graph-sub"},
                    `${kerasShape(layer.output_shape)}  ·  ${count(layer.params)} params`));
  g.append(svg("title", {}, `input ${kerasShape(layer.input_shape)} → output ${kerasShape(layer.output_shape)}`));
  if (onClick) {
    g.addEventListener("click", () => onClick(layer, g));
    g.addEventListener("keydown", e => { if (e.key === "Enter") onClick(layer, g); });
  }
  return g;
}

// The layers top to bottom, the input first, an arrow between each two.
function graphSvg(d, onClick) {
  const nodes = [{name: "input", type: "InputLayer", input_shape: d.input_shape, output_shape: d.input_shape, params: 0},
                 ...d.layers.filter(l => l.type !== "Input")];
  const step = GRAPH.node + GRAPH.gap;
  const height = GRAPH.top * 2 + nodes.length * step - GRAPH.gap;
  const root = svg("svg", {id: "graph-svg", width: GRAPH.width, height, viewBox: `0 0 ${GRAPH.width} ${height}`},
                   svg("defs", {}, svg("marker", {id: "graph-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                                  markerHeight: 7, orient: "auto-start-reverse"},
                                       svg("path", {d: "M 0 0 L 10 5 L 0 10 z", class: "graph-arrowhead"}))));
  nodes.forEach((layer, i) => {
    const y = GRAPH.top + i * step;
    if (i > 0)
      root.append(svg("line", {class: "graph-edge", x1: GRAPH.width / 2, x2: GRAPH.width / 2, y1: y - GRAPH.gap, y2: y - 1,
                               "marker-end": "url(#graph-arrow)", "data-from": nodes[i - 1].name, "data-to": layer.name}));
    root.append(graphNode(layer, y, i > 0 ? onClick : null));
  });
  return root;
}

// Keras's summary() table and its three totals.
function graphSummary(d) {
  const rows = d.layers.filter(l => l.type !== "Input").map(l => el("tr", {"data-layer": l.name},
      el("td", {}, `${l.name} (${l.type})`), el("td", {}, kerasShape(l.output_shape)), el("td", {class: "num"}, count(l.params))));
  return el("div", {id: "graph-summary"},
      table(["Layer (type)", "Output Shape", "Param #"].map(h => el("th", {}, h)), rows),
      el("p", {id: "graph-total"}, `Total params: ${count(d.total_params)}`),
      el("p", {id: "graph-trainable"}, `Trainable params: ${count(d.trainable_params)}`),
      el("p", {id: "graph-non-trainable"}, `Non-trainable params: ${count(d.non_trainable_params)}`));
}

// Bars of one histogram: `edges` (n + 1) and `counts` (n).
function histogramBars(edges, counts, width = 420, height = 130) {
  const pad = {l: 8, r: 8, t: 6, b: 22};
  const max = Math.max(...counts, 1e-12);
  const w = (width - pad.l - pad.r) / counts.length;
  const root = svg("svg", {class: "weight-hist", width, height, "data-counts": counts.join(","),
                           "data-edges": edges.join(",")});
  counts.forEach((c, i) => {
    const h = (height - pad.t - pad.b) * c / max;
    const bar = svg("rect", {x: pad.l + i * w + 0.5, y: height - pad.b - h, width: Math.max(1, w - 1), height: h, class: "weight-bar"});
    bar.append(svg("title", {}, `[${formatValue(edges[i])}, ${formatValue(edges[i + 1])}): ${formatValue(c)}`));
    root.append(bar);
  });
  root.append(svg("text", {x: pad.l, y: height - 6, class: "axis-label"}, formatValue(edges[0])),
              svg("text", {x: width - pad.r, y: height - 6, class: "axis-label", "text-anchor": "end"}, formatValue(edges.at(-1))));
  return root;
}

// TensorBoard's offset histograms: one curve per step, the first at the top, each later step
// lower and darker, over the run's common bins.
function historyRidges(h, width = 420) {
  const n = h.steps.length, dy = 16, ridge = 48, pad = {l: 8, r: 64, t: ridge + 4, b: 22};
  const height = pad.t + (n - 1) * dy + pad.b;
  const max = Math.max(...h.counts.flat(), 1e-12);
  const bins = h.edges.length - 1, w = (width - pad.l - pad.r) / bins;
  const root = svg("svg", {class: "weight-history", width, height, "data-steps": h.steps.join(",")});
  h.steps.forEach((step, i) => {
    const base = pad.t + i * dy;
    const pts = [`${pad.l},${base}`];
    h.counts[i].forEach((c, k) => pts.push(`${pad.l + (k + 0.5) * w},${base - ridge * c / max}`));
    pts.push(`${pad.l + bins * w},${base}`);
    const shade = Math.round(200 - 160 * (n > 1 ? i / (n - 1) : 1));
    const line = svg("polygon", {points: pts.join(" "), class: "ridge", "data-step": step,
                                 style: `fill: rgba(217, 72, 15, 0.12); stroke: rgb(${shade + 17}, ${shade / 2 + 40}, 15)`});
    line.append(svg("title", {}, `step ${step}: min ${formatValue(h.min[i])}, max ${formatValue(h.max[i])}, ${h.num[i]} values`));
    root.append(line, svg("text", {x: width - pad.r + 6, y: base, class: "axis-label"}, `step ${step}`));
  });
  root.append(svg("text", {x: pad.l, y: height - 6, class: "axis-label"}, formatValue(h.edges[0])),
              svg("text", {x: width - pad.r, y: height - 6, class: "axis-label", "text-anchor": "end"}, formatValue(h.edges.at(-1))));
  return root;
}

function tensorPanel(t, runNote) {
  const stats = t.edges.length
      ? `${count(t.count)} values, min ${formatValue(t.min)}, max ${formatValue(t.max)}, mean ${formatValue(t.mean)}, std ${formatValue(t.std)}`
      : `${count(t.count)} values of ${t.dtype} (not a float: no histogram)`;
  return el("section", {class: "weight-tensor", "data-tensor": t.name},
      el("h3", {}, `${t.name} `, el("span", {class: "muted"}, `${JSON.stringify(t.shape)} ${t.dtype}`)),
      el("p", {class: "muted small"}, stats),
      t.edges.length ? histogramBars(t.edges, t.counts) : null,
      t.history ? el("div", {class: "weight-history-box"},
                     el("h4", {}, `Over the epochs (TensorBoard run ${t.history.run}, tag ${t.history.tag})`), historyRidges(t.history))
                : el("p", {class: "muted small history-note"}, runNote || "no histograms of this weight in the linked run"));
}

async function showLayerWeights(gen, id, layer, panel) {
  panel.replaceChildren(el("h2", {}, `Weights of ${layer.name}`), el("p", {class: "muted"}, "loading…"));
  if (!layer.weights.length) {
    panel.replaceChildren(el("h2", {}, `Weights of ${layer.name}`),
        el("p", {class: "muted", id: "layer-no-weights"}, `${layer.type} has no weights${layer.params ? " stored (the model was saved without weights)" : ""}.`));
    return;
  }
  let d;
  try {
    d = await api(`/api/models/${id}/layers/${encodeURIComponent(layer.name)}/histograms`);
  } catch (e) {
    if (gen === viewGeneration) panel.replaceChildren(el("h2", {}, `Weights of ${layer.name}`), el("p", {class: "error-box"}, e.message));
    return;
  }
  if (gen !== viewGeneration) return;
  panel.replaceChildren(el("h2", {}, `Weights of ${layer.name}`), ...d.tensors.map(t => tensorPanel(t, d.run_note)));
  panel.dataset.layer = layer.name;
}

// A model.json the graph cannot be drawn from: what is wrong, and the file itself.
function graphUnplaceable(d) {
  return el("div", {id: "graph-error", class: "error-box"},
      el("p", {}, el("strong", {}, "This model's model.json cannot be drawn as a graph: "), d.error),
      el("p", {}, "The Graph view reads model.json's Keras-style layer list (see docs/model-json.md). ",
         el("a", {href: `/api/models/${d.id}/model.json`, download: ""}, "Download model.json"), " or go back to ",
         el("a", {href: `#/models/${d.id}`}, `model ${d.id}`), "."),
      el("pre", {id: "graph-model-json"}, d.architecture_text || ""));
}

async function showGraph(gen, arg, params) {
  const id = params.get("model") || arg;
  if (!id) return showGraphChooser(gen);
  if (!/^\d{1,18}$/.test(id)) throw new Error(`model must be a model id, got '${id}'`);
  const d = await api(`/api/models/${id}/graph`);
  if (gen !== viewGeneration) return;
  const title = el("h1", {}, `Graph of model ${d.id}: `, d.model_name, " ", el("a", {href: `#/models/${d.id}`, class: "small"}, "model page"));
  if (d.error) {
    main().replaceChildren(title, graphUnplaceable(d));
    return;
  }
  const panel = el("div", {id: "graph-layer", class: "graph-panel"},
      el("p", {class: "muted"}, "Click a layer to see its weights' histograms",
         d.run ? ` and how they moved over the epochs (run ${d.run}).` : "."),
      d.run ? null : el("p", {class: "muted small", id: "graph-run-note"}, d.run_note));
  const onClick = (layer, node) => {
    for (const n of document.querySelectorAll(".graph-node.selected")) n.classList.remove("selected");
    node.classList.add("selected");
    showLayerWeights(gen, d.id, layer, panel);
  };
  main().replaceChildren(title,
      el("div", {class: "graph-layout"},
         el("div", {class: "graph-left"}, graphSvg(d, onClick), graphSummary(d)),
         panel));
}

views.graph = {show: showGraph};
