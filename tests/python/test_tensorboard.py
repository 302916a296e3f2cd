"""TensorBoard itself reads what tensorhub's TensorBoard callback writes.

Two spec trainings (`tensorhub train-spec`) of a small Embedding model write into one log
directory: scalars, weight histograms, hparams sessions (the second run has a key the first has
not), the model's graph and the projector files. Then the pinned TensorBoard of
tests/python/tensorboard-requirements.txt (a virtual environment scripts/setup --test builds in
$TENSORHUB_TENSORBOARD_VENV, default ~/.cache/tensorhub/tensorboard-venv) serves that directory on
a loopback port, offline, and the tests read TensorBoard's own HTTP data endpoints, checking each
against an independent record: the CSVLogger's file for the scalars, the saved model's weights
(read back through the Python package) for the histograms and the projector's tensor, the
layers of the spec for the graph. What TensorBoard cannot read is a bug of ours.

TensorBoard runs twice, with its Python loader (--load_fast=false) and with its Rust data
server (--load_fast=true, the default where the server is installed), which read event files
separately.

Only SQLite: the hub only holds the training data here; both backends are tested elsewhere.
Without the virtual environment the tests skip with the command that builds it, except under CI
(CI=true), where they fail.
"""

import csv
import json
import os
import pathlib
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import pytest

from conftest import BUILD_DIR

VENV = pathlib.Path(os.environ.get("TENSORHUB_TENSORBOARD_VENV",
                                   pathlib.Path.home() / ".cache" / "tensorhub" / "tensorboard-venv"))
TENSORBOARD = VENV / "bin" / "tensorboard"
VOCAB = ["<pad>", "the", "king", "queen", "man", "woman", "crown", "river", "stone", "tree", "bird", "sky"]


def _require_tensorboard():
    if TENSORBOARD.exists():
        return
    message = f"{TENSORBOARD} is missing: run scripts/setup --test (it builds TensorBoard's virtual environment)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _bag_of_ids(n, seed):
    """n examples of 4 ids in [0, 12); class 1 iff id 2 ("king") occurs."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, len(VOCAB), size=(n, 4)).astype(np.float32)
    y = (x == 2).any(axis=1).astype(np.int64)
    return x, y


def _spec(log_dir, csv_file, metadata):
    return {
        "model": {"name": "bag", "input_shape": [4],
                  "layers": [{"type": "Embedding", "input_dim": len(VOCAB), "output_dim": 4, "name": "words"},
                             {"type": "GlobalAveragePooling1D"},
                             {"type": "Dense", "units": "${units}", "activation": "relu"},
                             {"type": "Dense", "units": 2}],
                  "optimizer": {"type": "Adam", "learning_rate": 0.05}, "seed": 1},
        "data": {"dataset": "bag", "x": "X_train", "y": "y_train", "validation": {"x": "X_val", "y": "y_val"}},
        "fit": {"batch_size": 8, "epochs": 3, "seed": 1, "verbose": 0},
        "callbacks": [{"type": "TensorBoard", "log_dir": str(log_dir), "histogram_freq": 1, "embeddings_freq": 1,
                       "embeddings_metadata": str(metadata)},
                      {"type": "CSVLogger", "filename": str(csv_file)}],
        "save_model": {"model_name": "bag", "tags": {"run": log_dir.name}},
    }


RUNS = {"run-a": {"units": 8}, "run-b": {"units": 6, "optimizer": "adam"}}  # run-b's key is new


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Trains the two runs; yields (log directory, hub URI)."""
    import tensorhub

    torch_cli = BUILD_DIR / "bin" / "tensorhub-torch"
    if not torch_cli.exists():
        pytest.skip(f"{torch_cli} is not built")
    tmp = tmp_path_factory.mktemp("tensorboard")
    uri = f"sqlite://{tmp / 'hub.db'}"
    x, y = _bag_of_ids(64, 1)
    xv, yv = _bag_of_ids(16, 2)
    with tensorhub.TensorHub(uri, project_name="tb") as hub:
        hub.save_dataset({"X_train": x, "y_train": y, "X_val": xv, "y_val": yv}, "bag")
    metadata = tmp / "vocab.tsv"
    metadata.write_text("".join(w + "\n" for w in VOCAB))
    logs = tmp / "logs"
    for run, hp in RUNS.items():
        spec = tmp / f"{run}.json"
        spec.write_text(json.dumps(_spec(logs / run, tmp / f"{run}.csv", metadata)))
        done = subprocess.run([str(torch_cli), "train-spec", "--hub", uri, "--project", "tb", "--spec", str(spec),
                               "--hyper-parameters", json.dumps(hp)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return logs, uri, tmp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.read()


@pytest.fixture(scope="module", params=["false", "true"], ids=["python-loader", "rust-loader"])
def tensorboard(request, trained):
    """TensorBoard serving the log directory on 127.0.0.1; yields a function path -> bytes."""
    _require_tensorboard()
    logs, _, tmp = trained
    port = _free_port()
    log = open(tmp / f"tensorboard-{request.param}.log", "w")
    proc = subprocess.Popen([str(TENSORBOARD), "--logdir", str(logs), "--host", "127.0.0.1", "--port", str(port),
                             f"--load_fast={request.param}", "--reload_interval", "1"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        want = {"run-a", "run-a/train", "run-a/validation", "run-b", "run-b/train", "run-b/validation"}
        while True:
            try:
                if want <= set(json.loads(_get(base + "/data/runs"))):
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert proc.poll() is None, (tmp / f"tensorboard-{request.param}.log").read_text()
            assert time.monotonic() < deadline, "TensorBoard did not list the runs in 90 s:\n" + \
                (tmp / f"tensorboard-{request.param}.log").read_text()
            time.sleep(0.5)
        yield lambda path, body=None: _get(base + path, body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _eventually(fetch, check, what):
    """fetch() until check(result) holds (TensorBoard loads runs in the background)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            result = fetch()
            if check(result):
                return result
        except urllib.error.HTTPError:
            pass
        assert time.monotonic() < deadline, f"TensorBoard never gave {what}"
        time.sleep(0.5)


def _q(**args):
    return urllib.parse.urlencode(args)


def _saved_weights(uri, run):
    import tensorhub

    with tensorhub.TensorHub(uri, project_name="tb") as hub:
        return hub.find_top_model("bag", run=run).weights


def _graph_nodes(pbtxt):
    """{node name: (keras_class, [inputs])} of a GraphDef in text format."""
    nodes = {}
    for block in pbtxt.split("\nnode {")[0:]:
        name = re.search(r'^\s*name: "([^"]*)"', block, re.M)
        if not name:
            continue
        cls = re.search(r'key: "keras_class"\s*value \{\s*s: "([^"]*)"', block)
        nodes[name.group(1)] = (cls.group(1) if cls else None, re.findall(r'^\s*input: "([^"]*)"', block, re.M))
    return nodes


# The spec's layers in order, Keras's names, each fed by the one before (a Sequential).
LAYER_NODES = {
    "bag/words_input": ("InputLayer", []),
    "bag/words": ("Embedding", ["bag/words_input"]),
    "bag/global_average_pooling1d": ("GlobalAveragePooling1D", ["bag/words"]),
    "bag/dense": ("Dense", ["bag/global_average_pooling1d"]),
    "bag/dense_1": ("Dense", ["bag/dense"]),
}


def test_graph_plugin_draws_our_layers_and_their_connections(tensorboard):
    info = _eventually(lambda: json.loads(tensorboard("/data/plugin/graphs/info")),
                       lambda i: "run-a/train" in i, "the graph of run-a/train")
    assert info["run-a/train"]["tags"]["keras"]["conceptual_graph"] is True
    text = tensorboard("/data/plugin/graphs/graph?" + _q(run="run-a/train", tag="keras", conceptual="true")).decode()
    nodes = _graph_nodes(text)
    assert nodes == LAYER_NODES, text
    assert list(nodes) == list(LAYER_NODES), text
    assert text.count("type: DT_FLOAT") == 5, text  # every layer's dtype float32 was understood


def test_graph_plugin_opens_on_an_op_graph_of_our_layers(tensorboard):
    """GRAPHS opens on a run's op graph (Event.graph_def), which must parse and hold the layers."""
    info = _eventually(lambda: json.loads(tensorboard("/data/plugin/graphs/info")),
                       lambda i: all(i.get(r, {}).get("run_graph") for r in ("run-a/train", "run-b/train")),
                       "the op graphs of run-a/train and run-b/train")
    assert info["run-a/train"]["run_graph"] is True
    assert not info.get("run-a/validation", {}).get("run_graph"), info  # the graph is the train run's
    # As the dashboard asks for a run's op graph (tf-graph-dashboard's _graphUrl: run, no tag).
    text = tensorboard("/data/plugin/graphs/graph?" + _q(run="run-a/train", limit_attr_size=1024,
                                                          large_attrs_key="_too_large_attrs")).decode()
    nodes = _graph_nodes(text)
    assert nodes == LAYER_NODES, text
    assert list(nodes) == list(LAYER_NODES), text
    # Each node's op is its Keras class (TensorBoard's conceptual graph leaves op empty).
    assert re.findall(r'^\s*op: "([^"]*)"', text, re.M) == [c for c, _ in LAYER_NODES.values()], text
    assert text.count("type: DT_FLOAT") == 5, text
    # The same nodes as TensorBoard's own conversion of the keras summary (keras_util).
    conceptual = tensorboard("/data/plugin/graphs/graph?" + _q(run="run-a/train", tag="keras",
                                                                conceptual="true")).decode()
    assert nodes == _graph_nodes(conceptual)


def test_hparams_plugin_lists_every_key_of_every_run(tensorboard):
    experiment = _eventually(lambda: json.loads(tensorboard("/data/plugin/hparams/experiment", {"experimentName": ""})),
                             lambda e: len(e.get("hparamInfos", [])) >= 2, "the hparams of both runs")
    names = {h["name"] for h in experiment["hparamInfos"]}
    assert names == {"units", "optimizer"}  # "optimizer" only run-b has
    units = next(h for h in experiment["hparamInfos"] if h["name"] == "units")
    assert units["domainInterval"] == {"minValue": 6, "maxValue": 8}
    metrics = {(m["name"].get("group", ""), m["name"]["tag"]) for m in experiment["metricInfos"]}
    assert {("train", "epoch_loss"), ("validation", "epoch_loss"), ("validation", "epoch_accuracy")} <= metrics
    groups = json.loads(tensorboard("/data/plugin/hparams/session_groups", {
        "experimentName": "", "startIndex": 0, "sliceSize": 10,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        "colParams": [{"hparam": "units"}, {"hparam": "optimizer"}]}))
    sessions = {g["sessions"][0]["name"]: g["hparams"] for g in groups["sessionGroups"]}
    assert sessions["run-a"] == {"units": 8}
    assert sessions["run-b"] == {"units": 6, "optimizer": "adam"}


def test_projector_plugin_gives_shape_values_and_metadata(tensorboard, trained):
    _, uri, _ = trained
    runs = _eventually(lambda: json.loads(tensorboard("/data/plugin/projector/runs")),
                       lambda r: {"run-a/train", "run-b/train"} <= set(r), "the projector runs")
    assert "run-a/train" in runs
    config = json.loads(tensorboard("/data/plugin/projector/info?" + _q(run="run-a/train")))
    (embedding,) = config["embeddings"]
    assert embedding["tensorName"] == "words/embeddings"
    assert embedding["tensorShape"] == [len(VOCAB), 4]
    raw = tensorboard("/data/plugin/projector/tensor?" + _q(run="run-a/train", name="words/embeddings"))
    tensor = np.frombuffer(raw, dtype=np.float32).reshape(len(VOCAB), 4)
    # embeddings_freq 1: the last epoch's weights, which are the saved model's.
    np.testing.assert_array_equal(tensor, _saved_weights(uri, "run-a")["words.weight"])
    metadata = tensorboard("/data/plugin/projector/metadata?" + _q(run="run-a/train", name="words/embeddings"))
    assert metadata.decode().splitlines() == VOCAB


def test_scalars_and_histograms_plugins_give_what_we_wrote(tensorboard, trained):
    logs, uri, tmp = trained
    with open(tmp / "run-a.csv") as f:
        rows = list(csv.DictReader(f))
    for run, column in (("run-a/train", "loss"), ("run-a/validation", "val_loss")):
        points = _eventually(
            lambda: json.loads(tensorboard("/data/plugin/scalars/scalars?" + _q(run=run, tag="epoch_loss"))),
            lambda p: len(p) == 3, f"3 epoch_loss points of {run}")
        assert [p[1] for p in points] == [0, 1, 2]
        # Event files hold float32: the CSVLogger's doubles rounded the same way.
        assert [p[2] for p in points] == [float(np.float32(float(r[column]))) for r in rows]
    weights = _saved_weights(uri, "run-a")["dense.weight"]
    histograms = _eventually(
        lambda: json.loads(tensorboard("/data/plugin/histograms/histograms?" + _q(run="run-a/train", tag="dense.weight"))),
        lambda h: len(h) == 3, "3 histograms of dense.weight")
    assert [h[1] for h in histograms] == [0, 1, 2]
    last = histograms[-1][2]  # [[left, right, count], ...] of the final weights
    assert sum(b[2] for b in last) == pytest.approx(weights.size)
    assert min(b[0] for b in last) <= weights.min() and max(b[1] for b in last) >= weights.max()
