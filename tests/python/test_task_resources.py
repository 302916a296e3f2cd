"""create_task(resources=...): stored and read back on both backends, bad values refused naming
the key, a warning when no runner is live, and a refusal when every live runner (a real
`tensorhub runner` process) is too small."""

import signal
import subprocess
import time
import warnings

import pytest

import tensorhub
from conftest import cli_path


def test_resources_round_trip(hub):
    with pytest.warns(UserWarning, match="no live runner"):
        task_id = hub.create_task("train", "true", resources={"cpus": 2.5, "gpus": 1, "memory": "8GiB"})
    (task,) = hub.find_tasks("train")
    assert task["id"] == task_id
    # 8 GiB = 8 * 1024**3 bytes, as Slurm's --mem reads "8G".
    assert task["resources"] == {"cpus": 2.5, "gpus": 1, "memory": "8 GiB", "memory_bytes": 8 * 1024**3}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no resources: no warning
        hub.create_task("train", "true")
    plain = hub.find_tasks("train", sort=[("id", 1)])[1]
    assert "resources" not in plain
    with pytest.warns(UserWarning):
        hub.create_task("train", "true", resources={"memory": 1000})
    assert hub.find_tasks("train", sort=[("id", 1)])[2]["resources"]["memory_bytes"] == 1000


@pytest.mark.parametrize("resources, key", [({"gpus": 1.5}, "gpus"), ({"cpus": -1}, "cpus"),
                                            ({"memory": "8X"}, "8X"), ({"gpu": 1}, "gpu"), ("2 gpus", "resources")])
def test_bad_resources_are_refused_naming_the_key(hub, resources, key):
    with pytest.raises(tensorhub.InvalidArgument, match=key):
        hub.create_task("train", "true", resources=resources)
    assert hub.find_tasks() == []


def test_a_request_every_live_runner_is_too_small_for_is_refused(hub, hub_uri, tmp_path):
    log = open(tmp_path / "runner.log", "w")
    runner = subprocess.Popen([str(cli_path()), "runner", "--hub", hub_uri, "--project", "test", "--task-name", "train",
                               "--gpus", "0", "--cpus", "2", "--memory", "1G", "--poll", "0.05"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 30
        while True:  # until the runner has registered what it has
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "no live runner" until it registers
                    hub.create_task("train", "true", resources={"gpus": 2})
            except tensorhub.InvalidArgument as e:
                assert "needs 2 GPUs; the live runner has 1" in str(e)
                break
            assert time.time() < deadline, (tmp_path / "runner.log").read_text()
            hub.delete_tasks()
            time.sleep(0.1)
        with pytest.raises(tensorhub.InvalidArgument, match="needs 2 GiB of memory; the live runner has 1 GiB"):
            hub.create_task("train", "true", resources={"memory": "2G"})
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # fits the live runner: no warning
            hub.create_task("train", "true", resources={"cpus": 1, "gpus": 1})
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=30)
        log.close()
