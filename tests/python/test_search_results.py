"""Hub.search_results: a search of two objectives run by the real `tensorhub tune` and a C++
runner, read back from Python with its Pareto front, on both backends. The grid's x in 0..4
gives (a, b) = (x, (x - 3)^2): (0, 9), (1, 4), (2, 1), (3, 0), (4, 1); minimising both, x = 4
is dominated by x = 2 and the others are the front."""
import json
import subprocess

import pytest

from conftest import cli_path, run_cli


def test_a_two_objective_search_reads_back_with_its_front(hub, tmp_path):
    space = tmp_path / "space.json"
    space.write_text(json.dumps([{"name": "x", "type": "Int", "min_value": 0, "max_value": 4}]))
    uri = hub._core.uri
    runner = subprocess.Popen([str(cli_path()), "runner", "--hub", uri, "--project", "test", "--task-name", "trial",
                               "--slots", "2", "--poll", "0.05", "--exit-when-idle", "3"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        run_cli("tune", "--hub", uri, "--project", "test", "--name", "two", "--space", str(space), "--oracle", "grid",
                "--objective", "a:min,b:min", "--poll", "0.05", "--json", "--", "/bin/sh", "-c",
                "awk -v x=\"$TENSORHUB_HP_x\" 'BEGIN { printf \"{\\\"a\\\": %g, \\\"b\\\": %g}\", x, (x - 3) ^ 2 }' "
                "> \"$TENSORHUB_RESULT_FILE\"")
    finally:
        runner.wait(timeout=60)
    summary = hub.search_results("two")
    assert summary["objectives"] == "a:min,b:min"
    assert len(summary["trials"]) == 5
    front = hub.search_results("two", pareto=True)["trials"]
    assert [t["hyper_parameters"]["x"] for t in front] == [0, 1, 2, 3]
    assert [t["values"] for t in front] == [[0, 9], [1, 4], [2, 1], [3, 0]]
    with pytest.raises(LookupError, match="no search named 'nope'"):
        hub.search_results("nope")
