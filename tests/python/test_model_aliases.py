"""Model aliases from Python (MLflow's aliases with a history): set, move, find the model an
alias names, the history's chain, the refusal to delete an aliased model unless forced, and
the same aliases seen by the C++ command line."""

import json

import numpy as np
import pytest

import tensorhub
from conftest import run_cli


def _models(hub, n):
    return [hub.save_model({"w": np.full(2, i, np.float32)}, "mlp", name=f"m{i}") for i in range(n)]


def test_set_move_find_and_history(hub):
    a, b = _models(hub, 2)
    assert hub.set_model_alias("mlp", "champion", a, reason="first", user="ana") is None
    assert hub.set_model_alias("mlp", "champion", b, reason="better") == a
    assert hub.set_model_alias("mlp", "champion", b) == b  # already there: no change recorded
    champion = hub.find_model_by_alias("mlp", "champion")
    assert champion.id == b and champion.name == "m1"
    np.testing.assert_array_equal(champion.weights["w"], np.full(2, 1, np.float32))
    assert hub.find_model_alias("mlp", "champion")["model_id"] == b
    assert hub.find_model_by_alias("mlp", "staging") is None
    assert [x["alias"] for x in hub.find_model_aliases()] == ["champion"]

    history = hub.model_alias_history("mlp", "champion")
    assert [(h["from_id"], h["to_id"]) for h in history] == [(None, a), (a, b)]
    assert history[0]["user"] == "ana" and history[0]["reason"] == "first"
    assert history[1]["reason"] == "better" and history[1]["user"]  # this process's user

    assert hub.delete_model_alias("mlp", "champion", reason="retired") == b
    assert hub.delete_model_alias("mlp", "champion") is None
    assert hub.model_alias_history("mlp")[-1]["to_id"] is None


def test_errors_name_what_to_do(hub):
    (a,) = _models(hub, 1)
    with pytest.raises(tensorhub.InvalidArgument, match="starting with a letter"):
        hub.set_model_alias("mlp", "2nd", a)
    with pytest.raises(LookupError, match="no model 12345"):
        hub.set_model_alias("mlp", "champion", 12345)


def test_an_aliased_model_is_deleted_only_when_forced(hub):
    a, b = _models(hub, 2)
    hub.set_model_alias("mlp", "champion", a)
    with pytest.raises(tensorhub.FailedPrecondition, match="mlp@champion"):
        hub.delete_models("mlp")
    assert len(hub.find_models("mlp")) == 2
    assert hub.delete_models("mlp", name="m1") == 1  # not aliased
    assert hub.delete_model("mlp", force=True) == 1
    assert hub.find_model_aliases() == []
    assert hub.model_alias_history("mlp")[-1]["reason"] == f"model {a} deleted"


def test_the_command_line_sees_the_same_aliases(hub, hub_uri):
    a, b = _models(hub, 2)
    hub.set_model_alias("mlp", "challenger", b, reason="canary")
    listed = json.loads(run_cli("model", "alias", "list", "mlp", "--json", "--hub", hub_uri, "--project", "test"))
    assert [(x["alias"], x["model_id"]) for x in listed] == [("challenger", b)]
    run_cli("model", "alias", "set", "mlp", "challenger", "--id", str(a), "--reason", "roll back", "--hub", hub_uri,
            "--project", "test")
    assert hub.find_model_alias("mlp", "challenger")["model_id"] == a
    assert [h["reason"] for h in hub.model_alias_history("mlp")] == ["canary", "roll back"]
