"""examples/python, TensorHub's three example scripts, run end to end as real processes on both
backends: dispatch_tasks.py stores Fashion-MNIST (Debian's dataset-fashion-mnist) and queues
three script tasks, which run_tasks.py or the C++ `tensorhub runner` run (task_script.py
training the MLP in torch), then dispatch_tasks.py prints the best model, which the real
`tensorhub serve --hub_model mlp` serves. The stored models, their epoch reports and the
server's predictions are checked against the test's own evaluation of the stored weights, and
the dataset against the one the C++ command line imports.

One epoch on 20,000 training images keeps a run near 20 s on 2 cores: each of the three MLPs
then reaches about 0.61-0.67 test accuracy (seen: 400-400 0.6155, 600-600 0.6525, 800-800
0.6655), where a network that does not learn stays near 0.1 (ten classes).
"""

import json
import math
import os
import pathlib
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import tensorhub
from conftest import BUILD_DIR, ROOT, cli_path, http_json, run_cli

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

EXAMPLES = ROOT / "examples" / "python"
FASHION_MNIST = pathlib.Path("/usr/share/datasets/fashion-mnist")
pytestmark = pytest.mark.skipif(not FASHION_MNIST.is_dir(),
                                reason="needs Debian's dataset-fashion-mnist (scripts/setup installs it)")

SMALL_JOB = ["--epochs", "1", "--train-size", "20000", "--val-size", "2000", "--test-size", "2000"]
UNITS = (800, 600, 400)  # dispatch_tasks.py's default tasks


def example_env():
    """The environment of the example processes: the built package, no hub of the caller's."""
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    env.pop("TENSORHUB_URI", None)
    env.pop("TENSORHUB_PROJECT", None)
    return env


def mlp(n_units1, n_units2):
    """task_script.py's network, written out again for loading the stored weights."""
    return nn.Sequential(nn.Dropout(0.2), nn.Linear(784, n_units1), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(n_units1, n_units2), nn.ReLU(), nn.Dropout(0.5), nn.Linear(n_units2, 10))


def evaluate(net, X, y):
    """(mean cross-entropy, accuracy) of `net` in eval mode on numpy X [n, 784], y [n]."""
    net.eval()
    with torch.no_grad():
        logits = net(torch.from_numpy(X))
    labels = torch.from_numpy(y)
    return nn.functional.cross_entropy(logits, labels).item(), (logits.argmax(1) == labels).double().mean().item()


def start_dispatcher(hub_uri, log_path):
    """dispatch_tasks.py on the small job, its output in `log_path`; returns the process once
    its three tasks are on the queue (so a runner that exits when idle finds them)."""
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "dispatch_tasks.py"), "--hub", hub_uri, *SMALL_JOB,
                             "--poll", "0.2"], stdout=log, stderr=subprocess.STDOUT, env=example_env())
    log.close()
    db = tensorhub.TensorHub(hub_uri, "tutorial")
    deadline = time.monotonic() + 120
    while sum(db.count_tasks("mnist").values()) < len(UNITS):
        assert proc.poll() is None, f"dispatch_tasks.py exited {proc.returncode}:\n{log_path.read_text()}"
        assert time.monotonic() < deadline, f"no tasks after 120 s:\n{log_path.read_text()}"
        time.sleep(0.1)
    db.close()
    return proc


def check_job(hub_uri, dispatcher_output):
    """The state the job must leave: three finished tasks, their models (whose weights give the
    accuracies the tasks reported, evaluated here), their epoch reports, and the dispatcher's
    best model line naming find_top_model's choice. Returns the best model and the test split."""
    db = tensorhub.TensorHub(hub_uri, "tutorial")
    X_train, y_train, X_val, y_val, X_test, y_test = db.find_top_dataset("mnist")
    assert X_train.shape == (20000, 784) and X_val.shape == (2000, 784) and y_test.shape == (2000,)

    tasks = db.find_tasks("mnist")
    assert sorted(t["status"] for t in tasks) == ["finished"] * 3, tasks
    models = {m.task_id: m for m in db.find_models("mlp")}
    assert len(models) == 3 and set(models) == {t["id"] for t in tasks}
    for task in tasks:
        n = task["hyper_parameters"]["n_units1"]
        model = models[task["id"]]
        assert model.name == f"{n}-{n}" and model.epochs == 1
        assert 0.5 < model.test_accuracy <= 1.0, model
        assert task["result"] == {"test_accuracy": model.test_accuracy}
        net = mlp(n, n)
        model.load_into(net)
        # One epoch: the saved weights are those of epoch 0's report, so both can be recomputed.
        test_loss, test_accuracy = evaluate(net, X_test, y_test)
        assert test_accuracy == pytest.approx(model.test_accuracy, abs=1.5 / len(y_test))
        assert test_loss == pytest.approx(model.test_loss, rel=1e-4)
        shown = json.loads(run_cli("task", "show", str(task["id"]), "--hub", hub_uri, "--project", "tutorial"))
        report = shown["last_epoch"]
        assert report["epoch"] == 0 and set(report["logs"]) == {"loss", "accuracy", "val_loss", "val_accuracy"}
        val_loss, val_accuracy = evaluate(net, X_val, y_val)
        assert report["logs"]["val_accuracy"] == pytest.approx(val_accuracy, abs=1.5 / len(y_val))
        assert report["logs"]["val_loss"] == pytest.approx(val_loss, rel=1e-4)
        assert 0 < report["logs"]["accuracy"] <= 1 and math.isfinite(report["logs"]["loss"])

    best = db.find_top_model("mlp", sort=[("test_accuracy", -1)])
    assert best.test_accuracy == max(m.test_accuracy for m in models.values())
    line = re.search(r"the best accuracy (\S+) is from model (\S+) \(id (\d+)\)", dispatcher_output)
    assert line, dispatcher_output
    assert (float(line[1]), line[2], int(line[3])) == (best.test_accuracy, best.name, best.id)
    return best, X_test, y_test


def check_serving(hub_uri, best, X_test, y_test, tmp_path):
    """README's `tensorhub serve --hub_model mlp` (best by test accuracy) answers TF Serving's
    predict with what the best model, loaded here into task_script.py's network, computes."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        server = subprocess.Popen([str(cli_path()), "serve", "--hub", hub_uri, "--project", "tutorial", "--hub_model",
                                   "mlp", "--hub_sort", "test_accuracy:-1", "--port", "0", "--rest_api_port",
                                   str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/v1/models/mlp"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, f"tensorhub serve exited {server.returncode}:\n{log_path.read_text()}"
            status, reply = http_json(url)
            if status == 200 and reply["model_version_status"][0]["state"] == "AVAILABLE":
                break
            assert time.monotonic() < deadline, f"mlp not available after 60 s:\n{log_path.read_text()}"
            time.sleep(0.2)
        assert reply["model_version_status"][0]["version"] == str(best.id)  # the best model's id is the version
        status, reply = http_json(url + ":predict", {"instances": X_test[:100].tolist()})
        assert status == 200, reply
    finally:
        server.terminate()
        server.wait(timeout=30)
    served = np.array(reply["predictions"], dtype=np.float32)
    net = mlp(best.n_units1, best.n_units2)
    best.load_into(net)
    net.eval()
    with torch.no_grad():
        expected = net(torch.from_numpy(X_test[:100])).numpy()
    assert served.shape == (100, 10)
    np.testing.assert_allclose(served, expected, rtol=1e-4, atol=1e-4)
    assert (served.argmax(1) == expected.argmax(1)).all()
    assert (served.argmax(1) == y_test[:100]).mean() > 0.5  # better than chance (0.1): it learnt


def test_dispatch_tasks_then_run_tasks_py(hub_uri, tmp_path):
    dispatcher = start_dispatcher(hub_uri, tmp_path / "dispatch.log")
    try:
        runner = subprocess.run([sys.executable, str(EXAMPLES / "run_tasks.py"), "--hub", hub_uri],
                                capture_output=True, text=True, env=example_env(), timeout=600)
        assert runner.returncode == 0, runner.stdout + runner.stderr
        assert "no pending task 'mnist' left: ran 3" in runner.stdout, runner.stdout
        assert dispatcher.wait(timeout=60) == 0, (tmp_path / "dispatch.log").read_text()
    finally:
        dispatcher.kill()
        dispatcher.wait()
    best, X_test, y_test = check_job(hub_uri, (tmp_path / "dispatch.log").read_text())
    check_serving(hub_uri, best, X_test, y_test, tmp_path)


def test_dispatch_tasks_then_tensorhub_runner(hub_uri, tmp_path):
    dispatcher = start_dispatcher(hub_uri, tmp_path / "dispatch.log")
    try:
        runner = subprocess.run([str(cli_path()), "runner", "--hub", hub_uri, "--project", "tutorial", "--task-name",
                                 "mnist", "--max-tasks", "3", "--python", sys.executable],
                                capture_output=True, text=True, env=example_env(), timeout=600)
        assert runner.returncode == 0, runner.stderr
        assert dispatcher.wait(timeout=60) == 0, (tmp_path / "dispatch.log").read_text()
    finally:
        dispatcher.kill()
        dispatcher.wait()
    check_job(hub_uri, (tmp_path / "dispatch.log").read_text())


def test_dataset_is_the_one_the_command_line_imports(tmp_path):
    # The C++ loader (tensorhub dataset import, as dispatch_tasks.cpp) and the example's numpy
    # one must store the same arrays: 50,000 / 10,000 / 10,000, x / 255 in float32, int64 labels.
    sys.path.insert(0, str(EXAMPLES))
    try:
        import dispatch_tasks
    finally:
        sys.path.remove(str(EXAMPLES))
    uri = f"sqlite://{tmp_path / 'hub.db'}"
    run_cli("dataset", "import", "--hub", uri, "--project", "cpp", "--name", "mnist")
    imported = tensorhub.TensorHub(uri, "cpp").find_top_dataset("mnist")
    ours = dispatch_tasks.load_fashion_mnist(str(FASHION_MNIST))
    for name, array in zip(("X_train", "y_train", "X_val", "y_val", "X_test", "y_test"), ours):
        assert array.dtype == imported[name].dtype and array.shape == imported[name].shape, name
        assert np.array_equal(array, imported[name]), name
    assert ours[0].shape == (50000, 784) and ours[2].shape == (10000, 784) and ours[4].shape == (10000, 784)
