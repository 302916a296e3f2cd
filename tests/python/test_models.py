"""Models from Python: dicts of arrays and torch modules saved, the best found by TensorHub's
sort and filters, tags as attributes, state_dict() and load_into(); a model saved from Python
listed by the C++ command line; bad weights refused with nothing saved."""

import json
import math

import numpy as np
import pytest

import tensorhub
from conftest import run_cli


def test_dict_model_round_trip_and_best_by_sort(hub):
    for name, acc in (("800-800", 0.87), ("600-600", 0.89), ("400-400", 0.85)):
        hub.save_model({"dense/w": np.full((3, 2), acc, np.float32), "step": np.array(7, np.int64)}, "mlp",
                       name=name, test_accuracy=acc)
    best = hub.find_top_model("mlp", sort=[("test_accuracy", -1)])
    assert best.name == "600-600" and best.test_accuracy == 0.89 and best._test_accuracy == 0.89
    assert best.model_name == "mlp" and best.tags["name"] == "600-600"
    assert best.architecture == {"format": "named_tensors"}
    assert best.weights["dense/w"].dtype == np.float32 and best.weights["dense/w"].shape == (3, 2)
    np.testing.assert_array_equal(best.weights["dense/w"], np.full((3, 2), 0.89, np.float32))
    assert hub.find_top_model("mlp", sort=[("test_accuracy", 1)]).name == "400-400"
    assert hub.find_top_model("mlp", test_accuracy={"$lt": 0.86}).name == "400-400"
    assert hub.find_top_model(sort=[("test_accuracy", -1)]).name == "600-600"
    assert hub.find_top_model("cnn") is None
    with pytest.raises(AttributeError, match="no tag"):
        best.val_accuracy
    models = hub.find_models("mlp", sort=[("name", 1)])
    assert [m.name for m in models] == ["400-400", "600-600", "800-800"]
    assert float(models[2].weights["dense/w"][0, 0]) == pytest.approx(0.87)  # read lazily
    assert hub.delete_model("mlp", name="800-800") == 1
    assert len(hub.find_models()) == 2


def test_non_finite_tags_survive(hub):
    hub.save_model({"w": np.zeros(1, np.float32)}, "m", loss=float("nan"), best=float("inf"), acc=np.float32(0.5))
    m = hub.find_top_model("m")
    assert math.isnan(m.loss) and m.best == math.inf and m.acc == 0.5


def test_torch_module_saved_and_loaded_into_a_new_one(hub):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    net(torch.randn(8, 4))  # moves the batch norm's running statistics
    hub.save_model(net, "seq", test_accuracy=0.5)
    stored = hub.find_top_model("seq")
    assert stored.architecture["format"] == "pytorch_state_dict"
    assert stored.architecture["module"] == "torch.nn.modules.container.Sequential"
    state = stored.state_dict()
    assert isinstance(state["0.weight"], torch.Tensor) and state["1.num_batches_tracked"].dtype == torch.int64
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    stored.load_into(fresh)
    for key, value in net.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key
    x = torch.randn(5, 4)
    net.eval(), fresh.eval()
    assert torch.equal(net(x), fresh(x))


def test_model_saved_from_python_listed_by_the_cli(hub):
    hub.save_model({"w": np.ones((2, 2), np.float32)}, "mlp", name="800-800", test_accuracy=0.875)
    listed = json.loads(run_cli("model", "list", "--hub", hub._core.uri, "--project", "test", "--json",
                                "--sort", "test_accuracy:-1"))
    assert len(listed) == 1
    assert listed[0]["model_name"] == "mlp" and listed[0]["name"] == "800-800"
    assert listed[0]["test_accuracy"] == 0.875
    assert set(listed[0]["parts"]) == {"model.json", "weights.safetensors"}


@pytest.mark.parametrize("network, culprit", [
    ({"w": np.zeros(2, np.float32), "extra": "text"}, "extra"),
    ({"w": np.zeros(2, np.float16)}, "float16"),
    ({3: np.zeros(2)}, "3"),
    ([np.zeros(2)], "list"),
])
def test_bad_weights_are_refused_and_nothing_is_saved(hub, network, culprit):
    with pytest.raises(tensorhub.InvalidArgument, match=culprit):
        hub.save_model(network, "bad")
    assert hub.find_models() == []


def test_torch_state_dict_with_a_non_tensor_is_refused(hub):
    torch = pytest.importorskip("torch")

    class WithExtra(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def get_extra_state(self):
            return {"vocab": ["a", "b"]}

        def set_extra_state(self, state):
            pass

    with pytest.raises(tensorhub.InvalidArgument, match="_extra_state"):
        hub.save_model(WithExtra(), "extra")
    with pytest.raises(tensorhub.InvalidArgument, match="bfloat16"):
        hub.save_model({"w": torch.zeros(2, dtype=torch.bfloat16)}, "bf16")
    assert hub.find_models() == []


def write_safetensors(path, tensors):
    """safetensors written here by hand (the format's README: u64 header size, JSON header with
    dtype, shape and data_offsets, then the bytes), independently of the C++ writer."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
    header, offset, blobs = {}, 0, []
    for name, array in sorted(tensors.items()):
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def test_saved_model_directory(hub, tmp_path):
    import pathlib
    served = pathlib.Path(__file__).resolve().parents[2] / "examples/serving/half_plus_two/00000123"
    hub.save_model(served, "half_plus_two", version=123)
    stored = hub.find_top_model("half_plus_two")
    assert stored.architecture == json.loads((served / "model.json").read_text()) and stored.weights == {}
    model_dir = tmp_path / "mlp"
    model_dir.mkdir()
    (model_dir / "model.json").write_text(json.dumps({"input_shape": [2], "layers": [{"type": "Dense", "units": 1}]}))
    write_safetensors(model_dir / "weights.safetensors",
                      {"dense.weight": np.array([[0.5, -1.0]], np.float32), "dense.bias": np.array([2.0], np.float32)})
    (model_dir / "state.json").write_text('{"epoch": 3}')
    hub.save_model(str(model_dir), "mlp", test_accuracy=0.9)
    mlp = hub.find_top_model("mlp")
    assert mlp.architecture["layers"] == [{"type": "Dense", "units": 1}] and mlp.test_accuracy == 0.9
    np.testing.assert_array_equal(mlp.weights["dense.weight"], [[0.5, -1.0]])
    shown = json.loads(run_cli("model", "show", str(mlp.id), "--hub", hub._core.uri, "--project", "test"))
    assert set(shown["parts"]) == {"model.json", "weights.safetensors", "state.json"}
    with pytest.raises(tensorhub.NotFound, match="no model.json"):
        hub.save_model(tmp_path, "empty")
    # A str that names no directory (a typo, or a name given where a module was meant).
    with pytest.raises(tensorhub.NotFound, match="'not a module', which is not a directory"):
        hub.save_model("not a module", "typo")
    with pytest.raises(tensorhub.InvalidArgument, match="network is of type int;"):
        hub.save_model(3, "int")
    (model_dir / "model.json").write_text("{not json")
    with pytest.raises(tensorhub.InvalidArgument, match="not valid JSON"):
        hub.save_model(model_dir, "broken")
    assert len(hub.find_models()) == 2
