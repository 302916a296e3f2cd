"""Where a model came from (store/lineage.h) for a script task, through the Python package, on
both backends: a real C++ runner runs a Python script that reads a dataset and saves a model
with Hub.save_model; the model's "lineage" tag names the task, its attempt and hyperparameters,
the script's SHA-256 and the dataset read, and find_models selects on it."""

import hashlib
import os
import socket

import numpy as np

from conftest import BUILD_DIR, run_cli

SCRIPT = """
import numpy as np
import tensorhub
hub = tensorhub.TensorHub()  # TENSORHUB_URI and TENSORHUB_PROJECT, set by the runner
x = hub.find_top_dataset("plane")["x"]
hub.save_model({"w": np.asarray(x * units, dtype=np.float32)}, "from_script", test_accuracy=0.5)
done = True
"""


def test_a_script_tasks_model_records_its_script_task_and_dataset(hub, tmp_path):
    dataset_id = hub.save_dataset({"x": np.arange(4, dtype=np.float32)}, "plane")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    task_id = hub.create_task("t", script=str(script), hyper_parameters={"units": 3},
                              saved_result_keys=["done"], max_attempts=1)
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    run_cli("runner", "--hub", hub._core.uri, "--project", "test", "--exit-when-idle", "0.3", "--poll", "0.05",
            "--python", "/usr/bin/python3", env=env)
    task = hub.find_tasks(id=task_id)[0]
    assert task["status"] == "finished", task
    models = hub.find_models(model_name="from_script")
    assert len(models) == 1
    lineage = models[0].tags["lineage"]
    assert lineage["task_id"] == task_id
    assert lineage["attempt"] == 1
    assert lineage["hyper_parameters"] == {"units": 3}
    assert lineage["script_name"] == "train.py"
    assert lineage["script_sha256"] == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert lineage["dataset_ids"] == [dataset_id]
    assert lineage["datasets"][0]["dataset_name"] == "plane"
    assert lineage["host"] == socket.gethostname()
    # Selected by what it read, and not by a dataset it did not read.
    assert [m.id for m in hub.find_models(**{"lineage.dataset_ids": dataset_id})] == [models[0].id]
    assert hub.find_models(**{"lineage.dataset_ids": dataset_id + 100}) == []
