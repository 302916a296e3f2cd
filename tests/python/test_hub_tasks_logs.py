"""TensorHub's constructor (URIs, environment, TensorHub's keyword form, the script's name as
project), the error hierarchy, logs, tasks, a Python task run by the C++ runner through
tensorhub.task_context(), and one TensorHub shared by threads."""

import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import tensorhub
from tensorhub import _hub
from conftest import BUILD_DIR, ROOT, cli_path, run_cli, sigint_as_at_a_terminal


def test_error_hierarchy():
    for name in ("InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition", "Unavailable", "DataLoss",
                 "Internal", "DeadlineExceeded"):
        cls = getattr(tensorhub, name)
        assert issubclass(cls, tensorhub.Error) and cls.__module__ == "tensorhub", name
    assert issubclass(tensorhub.InvalidArgument, ValueError)
    assert issubclass(tensorhub.NotFound, LookupError)


def test_uri_and_project_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TENSORHUB_URI", raising=False)
    monkeypatch.delenv("TENSORHUB_PROJECT", raising=False)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "dispatch_tasks.py")])
    db = tensorhub.TensorHub()
    assert db.uri == f"sqlite://{tmp_path / 'tensorhub.db'}" and db.project_name == "dispatch_tasks"
    assert (tmp_path / "tensorhub.db").exists()
    monkeypatch.setenv("TENSORHUB_URI", f"sqlite://{tmp_path / 'other.db'}")
    monkeypatch.setenv("TENSORHUB_PROJECT", "from_env")
    db = tensorhub.TensorHub()
    assert db.uri.endswith("other.db") and db.project_name == "from_env"
    assert tensorhub.TensorHub(project_name="given").project_name == "given"
    monkeypatch.setenv("TENSORHUB_PROJECT", "")
    with pytest.raises(tensorhub.InvalidArgument, match="TENSORHUB_PROJECT"):
        tensorhub.TensorHub()


def test_keyword_form_is_a_postgresql_uri():
    assert _hub._keyword_uri("db.example", 5433, "hub", "u s", "p@ss/w") == \
        "postgresql://u%20s:p%40ss%2Fw@db.example:5433/hub"
    assert _hub._keyword_uri(None, None, "hub", None, None) == "postgresql://localhost:5432/hub"
    with pytest.raises(tensorhub.InvalidArgument, match="not both"):
        tensorhub.TensorHub("sqlite:///tmp/x.db", ip="localhost")


def test_keyword_form_reaches_the_server():
    admin = os.environ.get("TENSORHUB_TEST_POSTGRES_URI")
    if not admin:
        pytest.skip("needs TENSORHUB_TEST_POSTGRES_URI")
    import urllib.parse
    parts = urllib.parse.urlsplit(admin)
    db = tensorhub.TensorHub(ip=parts.hostname, port=parts.port, dbname=parts.path.lstrip("/"),
                             username=parts.username, project_name="kw")
    assert db.uri.startswith("postgresql://") and db.find_models() == []


def test_errors_carry_the_core_messages(tmp_path):
    with pytest.raises(tensorhub.InvalidArgument):
        tensorhub.TensorHub("mysql://nowhere/db", project_name="p")
    with pytest.raises(tensorhub.Unavailable, match="password=\\*\\*\\*|\\*\\*\\*"):
        tensorhub.TensorHub("postgresql://u:secret@127.0.0.1:1/db", project_name="p")
    db = tensorhub.TensorHub(f"sqlite://{tmp_path / 'h.db'}", project_name="p")
    db.close()
    with pytest.raises(tensorhub.FailedPrecondition, match="closed"):
        db.find_models()


def test_corrupt_blob_is_data_loss(tmp_path):
    import sqlite3
    uri = f"sqlite://{tmp_path / 'h.db'}"
    db = tensorhub.TensorHub(uri, project_name="p")
    db.save_dataset(np.arange(1000, dtype=np.int64), "d")
    db.close()
    con = sqlite3.connect(tmp_path / "h.db")
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    chunk_table = next(t for t in tables if "chunk" in t)
    column = next(c[1] for c in con.execute(f"PRAGMA table_info({chunk_table})") if c[2].upper() == "BLOB")
    con.execute(f"UPDATE {chunk_table} SET {column} = zeroblob(length({column}))")
    con.commit()
    con.close()
    with pytest.raises(tensorhub.DataLoss):
        tensorhub.TensorHub(uri, project_name="p").find_top_dataset("d")


def test_logs(hub):
    for epoch in range(3):
        hub.save_training_log(epoch=epoch, loss=1.0 / (epoch + 1))
    hub.save_validation_log(epoch=2, val_accuracy=0.8)
    hub.save_testing_log(test_accuracy=0.79, loss=float("nan"))
    logs = hub.find_training_logs(sort=[("epoch", -1)])
    assert [log["epoch"] for log in logs] == [2, 1, 0] and logs[2]["loss"] == 1.0
    assert logs[0]["project_name"] == "test" and logs[0]["time"].tzinfo is not None
    assert [log["epoch"] for log in hub.find_training_logs(loss={"$lt": 0.9})] == [1, 2]
    assert hub.find_validation_logs()[0]["val_accuracy"] == 0.8
    assert np.isnan(hub.find_testing_logs()[0]["loss"])
    assert hub.delete_training_logs(epoch={"$gte": 1}) == 2
    assert hub.delete_training_log() == 1 and hub.find_training_logs() == []


def test_tasks(hub):
    first = hub.create_task("mlp", "python3 task.py --units {n_units}", {"n_units": 800}, ["test_accuracy"],
                            description="800-800")
    hub.create_task("mlp", "python3 task.py --units {n_units}", {"n_units": 400}, ["test_accuracy"], priority=2)
    hub.create_task("cnn", "python3 cnn.py")
    assert hub.check_unfinished_task("mlp") and hub.check_unfinished_task()
    tasks = hub.find_tasks("mlp", sort=[("id", 1)])
    assert [t["hyper_parameters"]["n_units"] for t in tasks] == [800, 400]
    assert tasks[0]["id"] == first and tasks[0]["status"] == "pending"
    assert tasks[0]["tags"] == {"description": "800-800"} and tasks[0]["saved_result_keys"] == ["test_accuracy"]
    assert hub.count_tasks("mlp")["pending"] == 2
    assert hub.cancel_tasks("cnn") == 1 and not hub.check_unfinished_task("cnn")
    assert hub.delete_tasks("mlp", id=first) == 1
    assert hub.delete_tasks() == 2 and not hub.check_unfinished_task()
    with pytest.raises(tensorhub.InvalidArgument, match="n_layers"):
        hub.create_task("mlp", "python3 task.py {n_layers}", {"n_units": 1})
    with pytest.raises(tensorhub.InvalidArgument):
        hub.create_task("mlp")  # neither command nor script
    with pytest.raises(tensorhub.NotFound, match="no_such_script.py does not exist"):
        hub.create_task("mlp", script="no_such_script.py")
    assert hub.find_tasks() == []


def test_script_task_refusals_store_nothing(hub, tmp_path):
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes(b"name = '\xe9t\xe9'\n")  # Latin-1, not UTF-8
    with pytest.raises(tensorhub.InvalidArgument, match=r"latin1.py is not UTF-8 text \(byte 8\)"):
        hub.create_task("mlp", script=latin1)
    good = tmp_path / "task_script.py"
    good.write_text("x = 1\n")
    with pytest.raises(tensorhub.InvalidArgument, match="exactly one of command, spec or script"):
        hub.create_task("mlp", "python3 other.py", script=good)
    with pytest.raises(tensorhub.InvalidArgument, match="python= names the interpreter of a script task"):
        hub.create_task("mlp", "python3 other.py", python="/usr/bin/python3")
    with pytest.raises(tensorhub.InvalidArgument, match="is a directory"):
        hub.create_task("mlp", script=tmp_path)
    assert hub.find_tasks() == []


TASK_SCRIPT = """
import tensorhub
ctx = tensorhub.task_context()
units = ctx.hyper_parameters["n_units"]
for epoch in range(2):
    ctx.report_epoch(epoch, loss=1.0 / (epoch + 1), val_accuracy=0.5 + 0.1 * epoch)
db = tensorhub.TensorHub()  # the runner's TENSORHUB_URI and TENSORHUB_PROJECT
db.save_model({"w": tensorhub._convert.np.full(2, units, "float32")}, "mlp", n_units=units)
ctx.set_result(test_accuracy=units / 1000, project=db.project_name)
"""


def test_python_task_run_by_the_cpp_runner(hub, tmp_path):
    script = tmp_path / "task.py"
    script.write_text(textwrap.dedent(TASK_SCRIPT))
    task_id = hub.create_task("mlp", f"{sys.executable} {script}", {"n_units": 800}, ["test_accuracy"])
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    env.pop("TENSORHUB_PROJECT", None)
    run_cli("runner", "--hub", hub._core.uri, "--project", "test", "--exit-when-idle", "0.5", "--slots", "1",
            env=env)
    task = hub.find_tasks(id=task_id)[0]
    assert task["status"] == "finished", task
    assert task["result"] == {"test_accuracy": 0.8, "project": "test"}
    assert hub.find_top_model("mlp").n_units == 800
    shown = json.loads(run_cli("task", "show", str(task_id), "--hub", hub._core.uri, "--project", "test"))
    assert shown["last_epoch"]["epoch"] == 1 and shown["last_epoch"]["logs"]["loss"] == 0.5


# TensorLayer TensorHub's examples/database/task_script.py shape: the hyperparameters are the
# script's globals, and the globals named in saved_result_keys are its result.
SCRIPT_TASK = """
import numpy as np
hidden = [n_units, n_units]
test_accuracy = np.float32(n_units) / 1000  # a numpy scalar: stored as a number
layers = len(hidden)
"""


def test_script_task_run_by_the_cpp_runner(hub, tmp_path):
    script = tmp_path / "task_script.py"
    script.write_text(textwrap.dedent(SCRIPT_TASK))
    task_id = hub.create_task("mlp", script=script, hyper_parameters={"n_units": 600},
                              saved_result_keys=["test_accuracy", "layers"], python=sys.executable)
    stored = hub.find_tasks(id=task_id)[0]
    assert stored["script_name"] == "task_script.py"
    assert stored["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    run_cli("runner", "--hub", hub._core.uri, "--project", "test", "--exit-when-idle", "0.5", "--slots", "1")
    task = hub.find_tasks(id=task_id)[0]
    assert task["status"] == "finished", task
    assert task["result"] == {"test_accuracy": pytest.approx(0.6), "layers": 2}


def test_a_script_that_raises_fails_its_attempt_naming_the_exception(hub, tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("x = 1\nraise ValueError(f'bad n_units {n_units}')\n")
    task_id = hub.create_task("mlp", script=script, hyper_parameters={"n_units": 5}, saved_result_keys=["x"],
                              python=sys.executable, max_attempts=1)
    run_cli("runner", "--hub", hub._core.uri, "--project", "test", "--exit-when-idle", "0.5", "--slots", "1")
    task = hub.find_tasks(id=task_id)[0]
    assert task["status"] == "failed", task
    assert "ValueError: bad n_units 5" in task["error"], task["error"]
    assert "broken.py line 2" in task["error"], task["error"]


def test_run_top_task_runs_one_task_per_call_through_the_runner(hub, tmp_path):
    # TensorHub's run_tasks.py: loop on run_top_task until it finds nothing.
    script = tmp_path / "task_script.py"
    script.write_text("import os\nvalue = n_units * 2\nprocess = os.getpid()\n")
    first = hub.create_task("mlp", script=script, hyper_parameters={"n_units": 1}, saved_result_keys=["value", "process"])
    second = hub.create_task("mlp", script=script, hyper_parameters={"n_units": 2}, saved_result_keys=["value"])
    hub.create_task("other", "true")  # another task name: never claimed below
    assert hub.run_top_task("mlp", sort=[("time", 1)])  # oldest first
    assert hub.find_tasks(id=first)[0]["status"] == "finished"
    assert hub.find_tasks(id=second)[0]["status"] == "pending"
    assert hub.run_top_task("mlp")
    assert not hub.run_top_task("mlp")
    results = {t["id"]: t["result"] for t in hub.find_tasks("mlp")}
    assert results[first]["value"] == 2 and results[second] == {"value": 4}
    assert results[first]["process"] != os.getpid()  # its own process, not this one
    assert hub.count_tasks("other")["pending"] == 1
    with pytest.raises(tensorhub.InvalidArgument, match="sorts by \"time\" or \"id\" only"):
        hub.run_top_task("mlp", sort=[("test_accuracy", -1)])


def test_run_top_task_counts_a_task_it_claimed_that_could_not_start(hub):
    # A spec task needs tensorhub's trainer, which run_top_task's runner has not: the attempt
    # fails before anything starts, but the task was taken from the queue all the same.
    spec = ROOT / "examples" / "tune" / "spec.json"
    run_cli("task", "create", "--hub", hub._core.uri, "--project", "test", "--task-name", "spec",
            "--spec", str(spec), "--hyper-parameters", '{"units": 8, "learning_rate": 0.001}', "--max-attempts", "1")
    assert hub.run_top_task("spec")
    task = hub.find_tasks("spec")[0]
    assert task["status"] == "failed" and "run them with `tensorhub runner`" in task["error"], task
    assert not hub.run_top_task("spec")


CTRL_C_DISPATCHER = """
import sys, tensorhub
db = tensorhub.TensorHub(sys.argv[1], "test")
try:
    db.run_top_task("slow")
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_during_run_top_task_gives_the_task_back(hub, tmp_path):
    script = tmp_path / "slow.py"
    script.write_text("import pathlib, time\npathlib.Path(marker).write_text('started')\ntime.sleep(60)\n")
    marker = tmp_path / "started"
    task_id = hub.create_task("slow", script=script, hyper_parameters={"marker": str(marker)})
    dispatcher = tmp_path / "dispatch.py"
    dispatcher.write_text(textwrap.dedent(CTRL_C_DISPATCHER))
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    proc = subprocess.Popen([sys.executable, str(dispatcher), hub._core.uri], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_as_at_a_terminal)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate(timeout=5)[0]
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=30)[0]
    assert "interrupted" in out, out
    assert time.monotonic() - started < 20  # not the task's 60 s
    task = hub.find_tasks(id=task_id)[0]
    assert task["status"] == "pending" and task["failures"] == 0, task  # released, not failed


def test_a_source_tree_without_the_module_says_how_to_build_it(tmp_path):
    package = tmp_path / "tensorhub"
    package.mkdir()
    for source in (pathlib.Path(tensorhub.__file__).resolve().parent).glob("*.py"):
        (package / source.name).write_text(source.read_text())
    out = subprocess.run([sys.executable, "-c", "import tensorhub"], env=dict(os.environ, PYTHONPATH=str(tmp_path)),
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert "ImportError: tensorhub's C++ module (tensorhub._core) is not built here" in out.stderr, out.stderr
    assert "scripts/build tensorhub_python_core" in out.stderr, out.stderr


def test_task_context_outside_a_runner(monkeypatch):
    for name in ("TENSORHUB_TASK_ID", "TENSORHUB_HYPER_PARAMETERS", "TENSORHUB_RESULT_FILE"):
        monkeypatch.delenv(name, raising=False)
    ctx = tensorhub.TaskContext()
    assert not ctx.under_runner and ctx.task_id == 0 and ctx.hyper_parameters == {}
    ctx.report_epoch(0, {"loss": 1.0})  # does nothing outside a runner
    ctx.set_result(acc=np.float64(0.5), loss=float("inf"))
    assert ctx.results == {"acc": 0.5, "loss": float("inf")}
    with pytest.raises(tensorhub.InvalidArgument, match="model"):
        ctx.set_result(model=object())
    assert tensorhub.task_context() is tensorhub.task_context()


def test_one_tensorhub_shared_by_threads(hub):
    errors = []

    def work(i):
        try:
            for j in range(5):
                hub.save_dataset(np.full((64, 64), i * 10 + j, np.int32), f"t{i}", j=j)
                assert int(hub.find_top_dataset(f"t{i}", j=j)[0, 0]) == i * 10 + j
                hub.save_training_log(thread=i, step=j)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(hub.list_datasets()) == 20 and len(hub.find_training_logs()) == 20


def test_gil_is_released_while_saving(hub):
    big = np.zeros((64, 1024, 1024), np.uint8)  # 64 MiB: hashing and storing take a while
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.005)

    t = threading.Thread(target=tick)
    t.start()
    hub.save_dataset(big, "big")
    done.set()
    t.join()
    assert len(ticks) >= 5


def test_misspelt_keywords_and_document_fields_are_not_stored_as_tags(hub):
    with pytest.raises(tensorhub.InvalidArgument, match='"max_attempt".*max_attempts='):
        hub.create_task("mlp", "python3 task.py", max_attempt=5)
    with pytest.raises(tensorhub.InvalidArgument, match='"hyper_parameter".*hyper_parameters='):
        hub.create_task("mlp", "python3 task.py", hyper_parameter={"n": 1})
    with pytest.raises(tensorhub.InvalidArgument, match='tag "id"'):
        hub.save_model({"w": np.zeros(1, np.float32)}, "m", id=3)
    with pytest.raises(tensorhub.InvalidArgument, match='tag "time"'):
        hub.save_dataset(np.zeros(1), "d", time="today")
    with pytest.raises(TypeError, match="dbnme"):
        tensorhub.TensorHub(hub._core.uri, dbnme="hub")
    assert hub.find_tasks() == [] and hub.find_models() == [] and hub.list_datasets() == []
    hub.create_task("mlp", "python3 task.py", description="fine", max_attempts=5)
    assert hub.find_tasks()[0]["max_attempts"] == 5 and hub.find_tasks()[0]["tags"] == {"description": "fine"}


def test_messages_are_the_command_lines(hub):
    hub.save_model({"w": np.zeros(1, np.float32)}, "m")
    with pytest.raises(tensorhub.InvalidArgument) as raised:
        hub.find_top_model("m", sort=[("bad field", 1)])
    if not cli_path().exists():
        pytest.skip(f"{cli_path()} is not built")
    cli = subprocess.run([str(cli_path()), "model", "list", "--hub", hub._core.uri, "--project", "test",
                          "--sort", "bad field:1"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 1
    assert cli.stderr.strip() == f"tensorhub: {raised.value}"
    assert str(raised.value) == 'field name "bad field" is not allowed: use letters, digits and _ (dots for nested fields)'
