"""What each attempt of a task used (issue 25), through the Python API: Hub.find_task_attempts and
the "attempts" of find_tasks, after a real C++ runner ran the tasks, on both backends."""

import sys

import pytest

from conftest import run_cli

# Burns about 0.5 s of CPU and reports its own count (os.times, user + system) as its result.
BURN = ("import os, json\nt = os.times()\nwhile os.times().user - t.user < 0.5: pass\nt = os.times()\n"
        "json.dump({'cpu': t.user + t.system}, open(os.environ['TENSORHUB_RESULT_FILE'], 'w'))")


def _run(hub):
    run_cli("runner", "--hub", hub._core.uri, "--project", "test", "--exit-when-idle", "0.3", "--poll", "0.05")


def test_find_task_attempts_gives_each_attempts_usage(hub, tmp_path):
    script = tmp_path / "burn.py"
    script.write_text(BURN)
    burn = hub.create_task("t", f"{sys.executable} {script}", max_attempts=1)
    failing = hub.create_task("t", "exit 4", max_attempts=2)
    _run(hub)
    task = hub.find_tasks(id=burn)[0]
    assert task["status"] == "finished", task
    (attempt,) = hub.find_task_attempts(burn)
    assert attempt["attempt"] == 1 and attempt["outcome"] == "finished"
    own = task["result"]["cpu"]
    assert own - 0.02 <= attempt["cpu_s"] <= own + 0.5, (own, attempt)
    assert attempt["wall_s"] >= attempt["cpu_s"] - 0.05
    assert attempt["peak_memory_bytes"] > 1 << 20 and attempt["memory_source"] in ("cgroup", "rusage")
    assert attempt["gpu_samples"] == [] and attempt["gpu_utilization_mean"] is None  # no GPU here
    assert attempt["started_at"] and attempt["finished_at"] and attempt["owner"] and attempt["host"]
    # Two failed attempts, one row each, in order.
    rows = hub.find_task_attempts(failing)
    assert [(r["attempt"], r["outcome"]) for r in rows] == [(1, "failed"), (2, "failed")]
    assert "exited with status 4" in rows[1]["error"]
    # find_tasks carries the same attempts, without the samples.
    listed = {t["id"]: t for t in hub.find_tasks()}
    assert [a["outcome"] for a in listed[failing]["attempts"]] == ["failed", "failed"]
    assert listed[burn]["attempts"][0]["cpu_s"] == pytest.approx(attempt["cpu_s"])
    assert "gpu_samples" not in listed[burn]["attempts"][0]


def test_a_task_never_started_has_no_attempts(hub):
    task_id = hub.create_task("t", "true")
    assert hub.find_task_attempts(task_id) == []
    assert hub.find_tasks(id=task_id)[0]["attempts"] == []
    assert hub.find_task_attempts(987654) == []
