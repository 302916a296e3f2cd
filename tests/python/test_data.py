"""tensorhub.data: sharded (TFRecord) hub datasets read batch by batch as dicts of numpy arrays.

The TFRecord files are written here, independently of tensorhub: tf.train.Examples encoded
by hand from TensorFlow's example.proto and feature.proto (Example.features = 1,
Features.feature = 1 (map<string, Feature>: key = 1, value = 2), Feature.bytes_list = 1 /
float_list = 2 / int64_list = 3, each list's value = 1, numbers packed) and framed as
TensorFlow's record_writer.cc does (uint64 length, masked CRC-32C of the length, data, masked
CRC-32C of the data; mask ((crc >> 15) | (crc << 17)) + 0xa282ead8), the CRC by python3-crc32c.
They are stored by the real command line (`tensorhub dataset import --tfrecord`), on both
backends."""

import json
import os
import signal
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorhub
import tensorhub.data
from conftest import BUILD_DIR, run_cli, sigint_as_at_a_terminal

crc32c = pytest.importorskip("crc32c", reason="python3-crc32c (scripts/setup --test) writes the TFRecord framing")

# ---- writing TFRecord files of tf.train.Examples ---------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 as protobuf writes it: two's complement, 10 bytes when negative
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(kind: str, value) -> bytes:
    if kind == "bytes":
        return _len_field(1, _len_field(1, value))
    if kind == "float":
        return _len_field(2, _len_field(1, struct.pack(f"<{len(value)}f", *value)))
    return _len_field(3, _len_field(1, b"".join(_varint(v) for v in value)))


def example(features: dict) -> bytes:
    """A serialized tf.train.Example of {name: (kind, value)}, kind "bytes", "float" or "int64"."""
    entries = b"".join(_len_field(1, _len_field(1, name.encode()) + _len_field(2, _feature(kind, value)))
                       for name, (kind, value) in features.items())
    return _len_field(1, entries)


def _masked_crc(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_tfrecord(path, records) -> None:
    with open(path, "wb") as f:
        for r in records:
            length = struct.pack("<Q", len(r))
            f.write(length + struct.pack("<I", _masked_crc(length)) + r + struct.pack("<I", _masked_crc(r)))


# ---- the toy dataset: 22 records in three files ------------------------------------------------

N = 22
FILES = [range(0, 8), range(8, 16), range(16, 22)]
FEATURES = {
    "id": {"type": "FixedLenFeature", "shape": [], "dtype": "int64"},
    "x": {"type": "FixedLenFeature", "shape": [3], "dtype": "float32"},
    "name": {"type": "FixedLenFeature", "shape": [], "dtype": "string"},
    "tokens": {"type": "VarLenFeature", "dtype": "int64"},
    "frames": {"type": "FixedLenSequenceFeature", "shape": [2], "dtype": "float32", "allow_missing": True,
               "default_value": -1.0},
}


def values(i: int) -> dict:
    """Record i's feature values (exact in float32)."""
    return {"id": i, "x": [i * 0.5, -float(i), i + 0.25], "name": b"r%d" % i + b"\0" * (i % 3),
            "tokens": [(-1) ** k * (1000 * i + k) for k in range(i % 4)],
            "frames": [[float(i), float(r)] for r in range(i % 3)]}


def record(i: int) -> bytes:
    v = values(i)
    return example({"id": ("int64", [v["id"]]), "x": ("float", v["x"]), "name": ("bytes", v["name"]),
                    "tokens": ("int64", v["tokens"]), "frames": ("float", [x for row in v["frames"] for x in row])})


def import_toy(tmp_path, hub_uri, name="toy", features=True) -> None:
    """Writes the three files and imports them as sharded dataset `name` of project "test"."""
    files = []
    for k, ids in enumerate(FILES):
        files.append(str(tmp_path / f"{name}-{k}.tfrecord"))
        write_tfrecord(files[-1], [record(i) for i in ids])
    args = ["dataset", "import", "--hub", hub_uri, "--project", "test", "--name", name, "--tfrecord", *files]
    if features:
        (tmp_path / "features.json").write_text(json.dumps(FEATURES))
        args += ["--features", str(tmp_path / "features.json")]
    run_cli(*args)


@pytest.fixture(autouse=True)
def blob_cache(tmp_path, monkeypatch):
    """This test's own blob cache directory (from_hub reads shards through the machine's)."""
    monkeypatch.setenv("TENSORHUB_BLOB_CACHE_DIR", str(tmp_path / "blob-cache"))
    monkeypatch.delenv("TENSORHUB_BLOB_CACHE", raising=False)
    return tmp_path / "blob-cache"


@pytest.fixture
def toy(hub, hub_uri, tmp_path):
    """The toy dataset stored in `hub` as "toy" (with its feature specs)."""
    import_toy(tmp_path, hub_uri)
    return hub


def expected_batch(ids) -> dict:
    """What a batch of records `ids` must hold, from values() alone: frames padded to the most
    rows with the spec's default -1."""
    rows = max(len(values(i)["frames"]) for i in ids)
    frames = np.full((len(ids), rows, 2), -1.0, np.float32)
    for b, i in enumerate(ids):
        for r, row in enumerate(values(i)["frames"]):
            frames[b, r] = row
    return {"id": np.array(ids, np.int64), "x": np.array([values(i)["x"] for i in ids], np.float32),
            "name": [values(i)["name"] for i in ids], "tokens": [values(i)["tokens"] for i in ids], "frames": frames}


def check_batch(batch: dict, ids) -> None:
    want = expected_batch(ids)
    assert sorted(batch) == ["frames", "id", "name", "tokens", "x"]
    for key in ("id", "x", "frames"):
        assert batch[key].dtype == want[key].dtype and batch[key].shape == want[key].shape, key
        np.testing.assert_array_equal(batch[key], want[key])
    assert batch["name"] == want["name"] and all(type(b) is bytes for b in batch["name"])
    assert len(batch["tokens"]) == len(ids)
    for got, expected in zip(batch["tokens"], want["tokens"]):
        assert got.dtype == np.int64 and got.shape == (len(expected),)
        assert got.tolist() == expected


# ---- tests -------------------------------------------------------------------------------------


def test_batches_of_four_hold_every_record_in_order(toy, tmp_path, blob_cache):
    ds = tensorhub.data.from_hub(toy, "toy", batch_size=4)
    assert not blob_cache.exists() or not os.listdir(blob_cache)  # nothing read before the first pass
    assert ds.cardinality() == 6 and len(ds) == 6  # 22 records: five batches of 4, one of 2
    batches = list(ds)
    assert len(batches) == 6
    for k, batch in enumerate(batches):
        check_batch(batch, list(range(4 * k, min(4 * k + 4, N))))
    # the shards went through the machine's blob cache: each file as written, named by its SHA-256
    cached = sorted((blob_cache / f).read_bytes() for f in os.listdir(blob_cache) if len(f) == 64)
    assert cached == sorted((tmp_path / f"toy-{k}.tfrecord").read_bytes() for k in range(3))
    # a second pass reads the shards again and yields the same
    check_batch(next(iter(ds)), [0, 1, 2, 3])
    dropped = list(tensorhub.data.from_hub(toy, "toy", batch_size=4, drop_remainder=True))
    assert [b["id"].tolist() for b in dropped] == [list(range(4 * k, 4 * k + 4)) for k in range(5)]


def test_unbatched_examples_and_raw_records(toy, hub_uri, tmp_path):
    examples = list(tensorhub.data.from_hub(toy, "toy", prefetch=0))
    assert len(examples) == N
    for i, e in enumerate(examples):
        v = values(i)
        assert e["id"].shape == () and e["id"].dtype == np.int64 and int(e["id"]) == i
        assert e["x"].dtype == np.float32 and e["x"].tolist() == v["x"]
        assert e["name"] == v["name"]
        assert e["tokens"].dtype == np.int64 and e["tokens"].tolist() == v["tokens"]
        assert e["frames"].shape == (len(v["frames"]), 2) and e["frames"].tolist() == v["frames"]
    # imported without specs: the serialized records as they were written
    import_toy(tmp_path, hub_uri, name="raw", features=False)
    raw = list(tensorhub.data.from_hub(toy, "raw", batch_size=8))
    assert [len(b["record"]) for b in raw] == [8, 8, 6]
    assert [r for b in raw for r in b["record"]] == [record(i) for i in range(N)]
    # the caller's specs: a subset of the features
    only = list(tensorhub.data.from_hub(toy, "raw", batch_size=22, features={"id": FEATURES["id"]}))
    assert list(only[0]) == ["id"] and only[0]["id"].tolist() == list(range(N))


def test_num_shards_split_the_files_and_shard_splits_the_records(toy):
    seen = []
    for index in range(2):  # files 0 and 2 go to worker 0, file 1 to worker 1
        ids = [i for b in tensorhub.data.from_hub(toy, "toy", batch_size=4, num_shards=2, index=index)
               for i in b["id"].tolist()]
        assert ids == ([*FILES[0], *FILES[2]] if index == 0 else list(FILES[1]))
        seen += ids
    assert sorted(seen) == list(range(N))
    with pytest.raises(tensorhub.InvalidArgument, match=r"3 shard files, fewer than num_shards = 4.*\.shard\("):
        tensorhub.data.from_hub(toy, "toy", num_shards=4, index=0)
    with pytest.raises(tensorhub.InvalidArgument, match="0 <= index < num_shards"):
        tensorhub.data.from_hub(toy, "toy", num_shards=2, index=2)
    records = [[int(e["id"]) for e in tensorhub.data.from_hub(toy, "toy").shard(3, k)] for k in range(3)]
    assert records == [list(range(k, N, 3)) for k in range(3)]


def test_shuffle_with_a_seed_is_a_reproducible_permutation(toy):
    def order(ds):
        return [i for b in ds for i in b["id"].tolist()]

    first = order(tensorhub.data.from_hub(toy, "toy", batch_size=4, shuffle=8, seed=7))
    assert sorted(first) == list(range(N)) and first != list(range(N))
    assert order(tensorhub.data.from_hub(toy, "toy", batch_size=4, shuffle=8, seed=7)) == first
    assert order(tensorhub.data.from_hub(toy, "toy", batch_size=4, shuffle=8, seed=8)) != first
    # every batch still holds its records' own values
    for batch in tensorhub.data.from_hub(toy, "toy", batch_size=4, shuffle=8, seed=7):
        check_batch(batch, batch["id"].tolist())
    with pytest.raises(tensorhub.InvalidArgument, match="shuffle="):
        tensorhub.data.from_hub(toy, "toy", seed=7)


def test_chained_methods_take_skip_repeat(toy):
    ds = tensorhub.data.from_hub(toy, "toy", prefetch=0).skip(20).repeat(2).batch(3)
    assert [b["id"].tolist() for b in ds] == [[20, 21, 20], [21]]
    assert [b["id"].tolist() for b in tensorhub.data.from_hub(toy, "toy", batch_size=4).take(2)] == [[0, 1, 2, 3],
                                                                                                    [4, 5, 6, 7]]
    with pytest.raises(TypeError, match="infinite"):
        len(tensorhub.data.from_hub(toy, "toy").repeat())
    with pytest.raises(tensorhub.InvalidArgument, match="batched already"):
        tensorhub.data.from_hub(toy, "toy", batch_size=4).batch(2)


def test_missing_misspelt_and_wrong_kind_datasets(toy):
    with pytest.raises(tensorhub.NotFound, match=r'no dataset named "tyo".*did you mean "toy"\?.*dataset import'):
        tensorhub.data.from_hub(toy, "tyo")
    with pytest.raises(tensorhub.NotFound, match=r'"toy".*matches \{"version": 2\}'):
        tensorhub.data.from_hub(toy, "toy", version=2)
    with pytest.raises(tensorhub.InvalidArgument, match="did you mean batch_size="):
        tensorhub.data.from_hub(toy, "toy", batchsize=4)
    toy.save_dataset({"a": np.arange(3)}, "tensors")
    with pytest.raises(tensorhub.FailedPrecondition, match="holds tensors.*find_top_dataset"):
        tensorhub.data.from_hub(toy, "tensors")
    # the tensor API points to tensorhub.data instead of loading every shard
    with pytest.raises(tensorhub.FailedPrecondition, match=r'sharded.*tensorhub\.data\.from_hub\(db, "toy"'):
        toy.find_top_dataset("toy")


def test_records_that_break_the_given_specs_fail_in_the_loop(toy):
    ds = tensorhub.data.from_hub(toy, "toy", batch_size=4, features={"id": {"type": "FixedLenFeature",
                                                                          "dtype": "float32"}})
    with pytest.raises(tensorhub.InvalidArgument, match="id"):
        next(iter(ds))
    with pytest.raises(tensorhub.InvalidArgument, match="'tags' is a VarLenFeature of strings"):
        tensorhub.data.from_hub(toy, "toy", features={"tags": {"type": "VarLenFeature", "dtype": "string"}})


def test_batches_own_only_their_own_bytes_and_the_pass_stops_its_threads(toy):
    it = iter(tensorhub.data.from_hub(toy, "toy", batch_size=4, prefetch=2))
    batch = next(it)
    assert tensorhub._core.dataset_background_threads() == 1  # the prefetch thread of this pass
    # dense arrays own the batch's buffer (no view of a larger one): 4 rows, nothing more
    assert batch["x"].base is not None and not isinstance(batch["x"].base, np.ndarray)
    assert batch["x"].nbytes == 4 * 3 * 4 and batch["id"].nbytes == 4 * 8
    # ragged values are views of one [4, longest] array
    bases = {id(t.base) for t in batch["tokens"]}
    assert len(bases) == 1 and batch["tokens"][3].base.shape == (4, 3)
    it.close()
    assert tensorhub._core.dataset_background_threads() == 0
    with pytest.raises(StopIteration):
        next(it)
    for batch in tensorhub.data.from_hub(toy, "toy", batch_size=4):
        break
    del batch
    assert tensorhub._core.dataset_background_threads() == 0  # the loop's iterator is gone


# Peak memory of one pass from /proc/self/status: VmHWM (the peak resident set of this process
# image; ru_maxrss would include the parent's at fork) at the end, less VmRSS before the pass,
# which can only overstate the pass's growth.
PEAK_SCRIPT = textwrap.dedent("""
    import sys, tensorhub, tensorhub.data

    def status(key):
        line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
        return int(line.split()[1]) * 1024

    db = tensorhub.TensorHub(sys.argv[1], project_name="test")
    ds = tensorhub.data.from_hub(db, "big", batch_size=4)
    start = status("VmRSS")
    kept, total = [], 0
    for batch in ds:
        total += batch["x"].nbytes
        if sys.argv[2] == "keep":
            kept.append(batch)
    print(total, status("VmHWM") - start)
""")


def test_iterating_does_not_hold_the_dataset_in_memory(hub, hub_uri, tmp_path):
    # 64 MiB of float32 in 4 shards of 16 records of 1 MiB each.
    row = 1 << 18
    files = []
    for k in range(4):
        files.append(str(tmp_path / f"big-{k}.tfrecord"))
        write_tfrecord(files[-1], [example({"x": ("float", np.full(row, 16 * k + i, np.float32))})
                                   for i in range(16)])
    (tmp_path / "big.json").write_text(json.dumps({"x": {"type": "FixedLenFeature", "shape": [row],
                                                         "dtype": "float32"}}))
    run_cli("dataset", "import", "--hub", hub_uri, "--project", "test", "--name", "big", "--tfrecord", *files,
            "--features", str(tmp_path / "big.json"))
    script = tmp_path / "peak.py"
    script.write_text(PEAK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))

    def peak(mode):
        done = subprocess.run([sys.executable, str(script), hub_uri, mode], env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        total, growth = map(int, done.stdout.split())
        assert total == 64 << 20
        return growth

    # keeping every batch (the control) grows by the dataset; streaming by a few batches
    assert peak("keep") > 60 << 20
    assert peak("stream") < 24 << 20


CTRL_C_SCRIPT = textwrap.dedent("""
    import sys, time, tensorhub, tensorhub.data
    db = tensorhub.TensorHub(sys.argv[1], project_name="test")
    try:
        for batch in tensorhub.data.from_hub(db, "toy", batch_size=4).repeat():
            print("batch", flush=True)
            time.sleep(0.01)
    except KeyboardInterrupt:
        print("interrupted", tensorhub._core.dataset_background_threads(), flush=True)
""")


def test_ctrl_c_stops_the_pass_and_its_threads(toy, hub_uri, tmp_path):
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    proc = subprocess.Popen([sys.executable, str(script), hub_uri], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_at_a_terminal)
    try:
        assert proc.stdout.readline() == "batch\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == "interrupted 0"
