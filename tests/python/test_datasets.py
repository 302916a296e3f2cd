"""Datasets from Python: every dtype and structure round trips with its dtype, shape and
values; TensorHub's Fashion-MNIST six-tuple; datasets shared with the command line; bad
input refused with nothing saved."""

import gzip
import json
import pathlib

import numpy as np
import pytest

import tensorhub
from conftest import run_cli

FASHION = pathlib.Path("/usr/share/datasets/fashion-mnist")
DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.bool_]


def idx(name: str) -> np.ndarray:
    """An IDX file of Debian's Fashion-MNIST, decoded with numpy alone (LeCun's format:
    magic 0x0000080D with D dimensions, big-endian uint32 sizes, then uint8 data)."""
    raw = gzip.open(FASHION / f"{name}.gz").read()
    dims = raw[3]
    shape = np.frombuffer(raw, ">u4", dims, 4).astype(int)
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def six_tuple():
    """TensorHub's MNIST six-tuple: 50000/10000/10000 rows of 784 float32 pixels, int64 labels."""
    if not FASHION.is_dir():
        pytest.skip("dataset-fashion-mnist is not installed")
    X = idx("train-images-idx3-ubyte").reshape(-1, 784).astype(np.float32) / np.float32(255)
    y = idx("train-labels-idx1-ubyte").astype(np.int64)
    X_test = idx("t10k-images-idx3-ubyte").reshape(-1, 784).astype(np.float32) / np.float32(255)
    y_test = idx("t10k-labels-idx1-ubyte").astype(np.int64)
    return X[:50000], y[:50000], X[50000:], y[50000:], X_test, y_test


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips(hub, dtype):
    values = (np.arange(-12, 12).reshape(2, 3, 4) % 7).astype(dtype)
    hub.save_dataset(values, f"d_{np.dtype(dtype).name}")
    back = hub.find_top_dataset(f"d_{np.dtype(dtype).name}")
    assert isinstance(back, np.ndarray)
    assert back.dtype == np.dtype(dtype) and back.shape == (2, 3, 4)
    np.testing.assert_array_equal(back, values)


def test_scalar_empty_and_extreme_values(hub):
    data = {"scalar": np.float64(2.5), "empty": np.zeros((0, 3), np.float32),
            "extremes": np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], np.float32),
            "i64": np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max])}
    hub.save_dataset(data, "corners")
    back = hub.find_top_dataset("corners")
    assert list(back) == ["scalar", "empty", "extremes", "i64"]
    assert back["scalar"].shape == () and back["scalar"] == 2.5
    assert back["empty"].shape == (0, 3) and back["empty"].dtype == np.float32
    np.testing.assert_array_equal(back["extremes"].view(np.uint32), data["extremes"].view(np.uint32))
    np.testing.assert_array_equal(back["i64"], data["i64"])


def test_structures_come_back_the_same(hub):
    a, b, c = np.arange(3, dtype=np.int32), np.ones((2, 2), np.float32), np.array([True, False])
    hub.save_dataset((a, b), "pair")
    hub.save_dataset([a, b, c], "triple")
    hub.save_dataset({"zeta": a, "alpha": b}, "named")
    pair, triple, named = hub.find_top_dataset("pair"), hub.find_top_dataset("triple"), hub.find_top_dataset("named")
    assert isinstance(pair, tuple) and len(pair) == 2
    np.testing.assert_array_equal(pair[0], a)
    assert isinstance(triple, list) and [t.dtype for t in triple] == [np.int32, np.float32, np.bool_]
    assert list(named) == ["zeta", "alpha"]  # the caller's order, not the stored (sorted) one
    np.testing.assert_array_equal(named["alpha"], b)


def test_fashion_mnist_six_tuple(hub):
    data = six_tuple()
    hub.save_dataset(data, "fashion", description="Fashion-MNIST from Debian")
    X_train, y_train, X_val, y_val, X_test, y_test = hub.find_top_dataset("fashion")
    assert X_train.shape == (50000, 784) and X_train.dtype == np.float32
    assert y_train.shape == (50000,) and y_train.dtype == np.int64
    assert X_val.shape == (10000, 784) and y_val.shape == (10000,)
    assert X_test.shape == (10000, 784) and y_test.shape == (10000,)
    assert int(y_train[0]) == 9 and int(y_test[0]) == 9  # Fashion-MNIST's first labels: ankle boots
    for got, want in zip((X_train, y_train, X_val, y_val, X_test, y_test), data):
        np.testing.assert_array_equal(got, want)
    # the command line sees the six tensors under TensorHub's names
    assert hub.list_datasets("fashion")[0]["description"] == "Fashion-MNIST from Debian"


def test_dataset_imported_by_the_cli_reads_from_python(hub_uri):
    if not FASHION.is_dir():
        pytest.skip("dataset-fashion-mnist is not installed")
    run_cli("dataset", "import", "--hub", hub_uri, "--project", "test", "--name", "fashion", "--no-scale",
            "--tags", '{"version": 2}')
    db = tensorhub.TensorHub(hub_uri, project_name="test")
    data = db.find_top_dataset("fashion", version=2)
    assert isinstance(data, dict)  # saved without Python's structure tag
    assert sorted(data) == ["X_test", "X_train", "X_val", "y_test", "y_train", "y_val"]
    images = idx("train-images-idx3-ubyte").reshape(-1, 784)
    np.testing.assert_array_equal(data["X_train"], images[:50000])
    np.testing.assert_array_equal(data["y_test"], idx("t10k-labels-idx1-ubyte"))
    assert db.find_top_dataset("fashion", version=3) is None


def test_dataset_saved_from_python_listed_by_the_cli(hub):
    hub.save_dataset({"x": np.zeros((4, 2), np.float32)}, "tiny", split="train")
    listed = json.loads(run_cli("dataset", "list", "--hub", hub._core.uri, "--project", "test", "--json"))
    assert [d["dataset_name"] for d in listed] == ["tiny"] and listed[0]["split"] == "train"


def test_find_sort_filter_and_delete(hub):
    for version in (1, 3, 2):
        hub.save_dataset(np.full(2, version, np.int64), "v", version=version)
    assert hub.find_top_dataset("v", sort=[("version", -1)])[0] == 3
    assert hub.find_top_dataset("v", sort=[("version", 1)])[0] == 1
    assert hub.find_top_dataset("v")[0] == 2  # newest first
    assert [int(d[0]) for d in hub.find_datasets("v", version={"$gte": 2}, sort=[("version", 1)])] == [2, 3]
    assert hub.find_top_dataset(version=1)[0] == 1
    assert hub.delete_datasets("v", version={"$lt": 3}) == 2
    assert [d["version"] for d in hub.list_datasets()] == [3]
    assert hub.delete_datasets() == 1 and hub.find_datasets() == []


def test_non_contiguous_and_big_endian_arrays_are_copied(hub):
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    hub.save_dataset({"t": base.T, "s": base[:, ::2], "be": base.astype(">f8")}, "views")
    back = hub.find_top_dataset("views")
    np.testing.assert_array_equal(back["t"], base.T)
    np.testing.assert_array_equal(back["s"], base[:, ::2])
    assert back["be"].dtype == np.float64
    np.testing.assert_array_equal(back["be"], base)


@pytest.mark.parametrize("dataset, culprit", [
    ({"ok": np.zeros(2), "bad": np.array([object(), 1], dtype=object)}, "bad"),
    ([np.zeros(2), [[1, 2], [3]]], "dataset[1]"),
    ({1: np.zeros(2)}, "1"),
    ({"half": np.zeros(2, np.float16)}, "float16"),
    ({"s": np.array(["a", "b"])}, "<U1"),
    ({"n": None}, "NoneType"),
])
def test_bad_datasets_are_refused_and_nothing_is_saved(hub, dataset, culprit):
    with pytest.raises(tensorhub.InvalidArgument, match=culprit.replace("[", r"\[").replace("]", r"\]")):
        hub.save_dataset(dataset, "bad")
    assert hub.list_datasets() == []


def test_bad_tags_and_sorts(hub):
    with pytest.raises(tensorhub.InvalidArgument, match="when"):
        hub.save_dataset(np.zeros(1), "x", when=object())
    with pytest.raises(tensorhub.InvalidArgument, match="python_structure"):
        hub.save_dataset(np.zeros(1), "x", python_structure="mine")
    with pytest.raises(tensorhub.InvalidArgument, match="sort entry"):
        hub.find_top_dataset("x", sort=[("version", 2)])
    with pytest.raises(tensorhub.InvalidArgument, match="operator"):
        hub.find_top_dataset("x", version={"$near": 1})
    assert hub.list_datasets() == []


def test_arrays_come_back_without_a_copy(hub):
    hub.save_dataset({"x": np.arange(10, dtype=np.float32)}, "owned")
    x = hub.find_top_dataset("owned")["x"]
    # the array wraps the C++ buffer it was read into (a capsule owns it), and may be written
    assert type(x.base).__name__ == "PyCapsule" and x.flags.writeable and x.flags.c_contiguous
    x[0] = 5
    assert float(x.sum()) == 50.0
