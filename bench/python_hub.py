#!/usr/bin/python3
"""Benchmark of tensorhub's Python package (python/tensorhub) against TensorHub's way of storing
datasets (bench/peers/pickle_hub.py: pickle in one BLOB row), on SQLite and PostgreSQL.

Measures, in one run on the same data:
  1. save_dataset then find_top_dataset of the Fashion-MNIST six-tuple (Debian's
     dataset-fashion-mnist idx files: float32 images [N, 784] scaled to [0, 1], int64 labels;
     X_train/y_train the first 50,000 training images, X_val/y_val the last 10,000, X_test/y_test
     the 10,000 test images; 219.5 MB of arrays), ours against the peer, --rounds rounds, each on
     a fresh hub (a new SQLite file or a new PostgreSQL database) for each side, the order of the
     two sides alternating; medians, and the ratio peer / ours for save, load and both.
  2. ours' load against its floor: the same tensors as one safetensors file in the same
     directory (page cache warm), read into memory and hashed with hashlib.sha256.
  3. start-up of a script task to its first line of user code (``t0 = time.time()``, a saved
     result), measured from the moment create_task returned and from the runner's claim (the
     task's started_at): through ``tensorhub runner --max-tasks 1`` started after the task was
     created, and through TensorHub.run_top_task in this process; against the wall time of
     ``python3 -c pass`` (the same interpreter). Both claim at once, so the runner's poll
     interval (--poll, 0.25 s; PostgreSQL runners wake on NOTIFY instead) is not waited; a
     runner already idle would add up to that interval on SQLite.

Prints one line per figure, then one JSON line with all of them. Runs under Debian's
/usr/bin/python3 with PYTHONPATH=<build>/python (scripts/bench python does so). PostgreSQL is
measured when --postgres-uri (default: env TENSORHUB_TEST_POSTGRES_URI) names a server where
this user may CREATE DATABASE; scripts/bench starts a private one.
"""
import argparse
import gc
import gzip
import hashlib
import json
import os
import pathlib
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "peers"))
import pickle_hub  # noqa: E402  (bench/peers, put on the path above)
import tensorhub  # noqa: E402  (PYTHONPATH=<build>/python)

FASHION_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
DATASET_NAME = "fashion_mnist"


def read_idx(path):
    """An idx file (gzip) as a numpy array: magic 0x0000 08 NDIM, NDIM big-endian uint32 sizes,
    then uint8 data (yann.lecun.com/exdb/mnist, the format Fashion-MNIST keeps)."""
    raw = gzip.decompress(path.read_bytes())
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise SystemExit(f"{path}: not an idx file of uint8")
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def fashion_mnist_six_tuple():
    """(X_train, y_train, X_val, y_val, X_test, y_test): float32 [n, 784] in [0, 1], int64 [n]."""
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        raise SystemExit(f"{FASHION_DIR} is missing: apt-get install dataset-fashion-mnist (scripts/setup --bench)")
    def images(name):
        return (read_idx(FASHION_DIR / name).reshape(-1, 784).astype(np.float32) / np.float32(255))
    def labels(name):
        return read_idx(FASHION_DIR / name).astype(np.int64)
    x, y = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    x_test, y_test = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    # Row slices of C-contiguous arrays are C-contiguous: stored without a copy on either side.
    return x[:50000], y[:50000], x[50000:], y[50000:], x_test, y_test


def safetensors_bytes(six):
    """The six-tuple as a safetensors file's bytes (huggingface/safetensors README, "Format"),
    names in sorted order as tensorhub writes them: the size of the blob ours stores."""
    names = ("X_train", "y_train", "X_val", "y_val", "X_test", "y_test")
    arrays = dict(zip(names, six))
    header, offset = {}, 0
    for name in sorted(arrays):
        a = arrays[name]
        header[name] = {"dtype": "F32" if a.dtype == np.float32 else "I64", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    return [struct.pack("<Q", len(text)), text] + [arrays[n].tobytes() for n in sorted(arrays)]


def median_ms(seconds):
    return 1000 * statistics.median(seconds)


def cpu_seconds():
    """CPU time of this process so far (user + system, all threads): on a loaded machine, what
    a side cost apart from waiting for a core. A PostgreSQL server's share is not in it."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Backend:
    """Fresh hubs of one kind: new SQLite files in `tmp`, or new databases on a server."""

    def __init__(self, kind, tmp, admin_uri=None):
        self.kind, self.tmp, self.admin_uri, self.n = kind, tmp, admin_uri, 0
        self.made = []

    def fresh(self):
        """The URI of a new, empty database."""
        self.n += 1
        if self.kind == "sqlite":
            return f"sqlite://{self.tmp / f'hub{self.n}.db'}"
        name = f"bench_python_hub_{os.getpid()}_{self.n}"
        self._admin(f"CREATE DATABASE {name}")
        self.made.append(name)
        parts = urllib.parse.urlsplit(self.admin_uri)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))

    def drop(self, uri):
        """Removes the database `uri` names (its files, on SQLite)."""
        if self.kind == "sqlite":
            path = uri[len("sqlite://"):]
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            return
        name = urllib.parse.urlsplit(uri).path.lstrip("/")
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.made.remove(name)

    def close(self):
        for name in list(self.made):
            self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def _admin(self, sql):
        import psycopg2
        conn = psycopg2.connect(self.admin_uri)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql)
        conn.close()


def check_same(six, got, who):
    if not (isinstance(got, tuple) and len(got) == 6 and all(
            a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) for a, b in zip(six, got))):
        raise SystemExit(f"{who}: find_top_dataset gave back other data than was saved")


def time_save_load(hub, six):
    """(save s, load s, save CPU s, load CPU s) of save_dataset then find_top_dataset on `hub`,
    and what find_top_dataset gave back."""
    c0, t0 = cpu_seconds(), time.perf_counter()
    hub.save_dataset(six, DATASET_NAME, description="Fashion-MNIST")
    c1, t1 = cpu_seconds(), time.perf_counter()
    got = hub.find_top_dataset(DATASET_NAME)
    c2, t2 = cpu_seconds(), time.perf_counter()
    return (t1 - t0, t2 - t1, c1 - c0, c2 - c1), got


def time_ours(backend, six, verify):
    """time_save_load of tensorhub on a fresh hub (opened and closed untimed)."""
    uri = backend.fresh()
    with tensorhub.TensorHub(uri, project_name="bench") as hub:
        times, got = time_save_load(hub, six)
    if verify:
        check_same(six, got, "tensorhub")
    del got
    backend.drop(uri)
    return times


def time_peer(backend, six, verify):
    """time_save_load of the pickle peer on a fresh hub (opened and closed untimed)."""
    uri = backend.fresh()
    peer = pickle_hub.PickleHub(uri, "bench")
    times, got = time_save_load(peer, six)
    peer.close()
    if verify:
        check_same(six, got, "pickle peer")
    del got
    backend.drop(uri)
    return times


def time_floor(path):
    """Seconds to read the file at `path` into memory and hash it with hashlib.sha256."""
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    hashlib.sha256(data).hexdigest()
    return time.perf_counter() - t0


def bench_datasets(backend, six, floor_path, rounds):
    """Figures of parts 1 and 2 on one backend; prints them and returns them as a dict."""
    ours, peer, floor = [], [], []
    time_floor(floor_path)  # page cache warm
    for r in range(rounds):
        gc.collect()
        sides = [("ours", ours, time_ours), ("peer", peer, time_peer)]
        for _, out, fn in (sides if r % 2 == 0 else sides[::-1]):
            out.append(fn(backend, six, verify=(r == 0)))
            gc.collect()
        floor.append(time_floor(floor_path))
    res = {}
    for part, i in (("save", 0), ("load", 1), ("both", None)):
        def med(runs, cpu=0):
            return median_ms([x[i + cpu] if i is not None else x[cpu] + x[1 + cpu] for x in runs])
        o, p, oc, pc = med(ours), med(peer), med(ours, 2), med(peer, 2)
        res[part] = {"ours_ms": round(o, 1), "peer_ms": round(p, 1), "ratio_peer_over_ours": round(p / o, 2),
                     "ours_cpu_ms": round(oc, 1), "peer_cpu_ms": round(pc, 1)}
        print(f"{backend.kind:10s} {part:4s}  ours {o:8.1f} ms   pickle peer {p:8.1f} ms   ratio peer/ours {p / o:5.2f}x"
              f"   (CPU of this process: ours {oc:6.0f} ms, peer {pc:6.0f} ms)")
    f = median_ms(floor)
    res["load_floor_ms"] = round(f, 1)
    res["ours_load_over_floor"] = round(res["load"]["ours_ms"] / f, 2)
    # Each round's load over the same round's floor: on a loaded machine, less of the drift.
    per_round = statistics.median(o[1] / fl for o, fl in zip(ours, floor))
    res["ours_load_over_floor_per_round"] = round(per_round, 2)
    print(f"{backend.kind:10s} load floor (read the safetensors file + hashlib.sha256) {f:6.1f} ms   "
          f"ours/floor {res['ours_load_over_floor']:4.2f}x (median of per-round ratios {per_round:4.2f}x)")
    res["rounds"] = {"ours_save_load_cpu_s": ours, "peer_save_load_cpu_s": peer, "floor_s": floor}
    return res


def iso_seconds(text):
    """Seconds since the epoch of tensorhub's UTC time text 2024-01-02T03:04:05.123456Z."""
    import datetime as dt
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()


def one_task(hub, script, start):
    """(create -> first line s, claim -> first line s) of one script task run by `start()`."""
    task_id = hub.create_task("startup", script=script, saved_result_keys=["t0"])
    created = time.time()
    start()
    task = hub.find_tasks(id=task_id)[0]
    if task["status"] != "finished":
        raise SystemExit(f"startup task {task_id} ended {task['status']}: {task.get('error', '')}")
    t0 = task["result"]["t0"]
    return t0 - created, t0 - iso_seconds(task["started_at"])


def quiet_stderr(fn):
    """fn(), its process-level stderr (the in-process runner's log lines) kept from the
    benchmark's output; shown if fn raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            return fn()
        except BaseException:
            log.seek(0)
            os.write(saved, log.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def bench_startup(backend, cli, tmp, runs):
    """Figures of part 3 on one backend; prints them and returns them as a dict."""
    script = tmp / "first_line.py"
    script.write_text("import time\nt0 = time.time()\n")
    uri = backend.fresh()
    runner = [str(cli), "runner", "--hub", uri, "--project", "bench", "--task-name", "startup", "--max-tasks", "1",
              "--python", sys.executable, "--work-dir", str(tmp / "runner"), "--log-level", "warn"]
    def run_runner():
        done = subprocess.run(runner, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise SystemExit(f"tensorhub runner exited {done.returncode}:\n{done.stderr}")
    ways = {"runner": run_runner}
    res = {}
    with tensorhub.TensorHub(uri, project_name="bench") as hub:
        ways["run_top_task"] = lambda: quiet_stderr(lambda: hub.run_top_task("startup")) or sys.exit(
            "run_top_task found no task")
        for name, start in ways.items():
            one_task(hub, script, start)  # warm
            got = [one_task(hub, script, start) for _ in range(runs)]
            c, k = median_ms([g[0] for g in got]), median_ms([g[1] for g in got])
            res[name] = {"create_to_first_line_ms": round(c, 1), "claim_to_first_line_ms": round(k, 1)}
            print(f"{backend.kind:10s} script task via {name:12s}: create -> first line {c:6.1f} ms, "
                  f"claim -> first line {k:6.1f} ms (median of {runs})")
    backend.drop(uri)
    return res


def python_floor(runs):
    """Median ms of `python3 -c pass` (this interpreter), wall time from spawn to exit."""
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return median_ms(times)


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="save + load rounds per side and backend")
    ap.add_argument("--task-runs", type=int, default=10, help="script tasks per way and backend")
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--postgres-uri", default=os.environ.get("TENSORHUB_TEST_POSTGRES_URI", ""))
    ap.add_argument("--cli", default=os.environ.get("TENSORHUB_CLI", str(ROOT / "build" / "bin" / "tensorhub")),
                    help="the tensorhub command line whose runner runs the script tasks")
    a = ap.parse_args()
    six = fashion_mnist_six_tuple()
    summary = {"bench": "python_hub", "rounds": a.rounds, "task_runs": a.task_runs,
               "dataset_bytes": sum(x.nbytes for x in six), "load_average_start": load_average()}
    print(f"load average at start: {summary['load_average_start']}; {summary['dataset_bytes'] / 1e6:.1f} MB of "
          f"arrays, {a.rounds} rounds; python {sys.version.split()[0]}, numpy {np.__version__}")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench-python-hub-"))
    try:
        floor_path = tmp / "tensors.safetensors"
        with open(floor_path, "wb") as f:
            f.writelines(safetensors_bytes(six))
        summary["python_c_pass_ms"] = round(python_floor(a.task_runs), 1)
        print(f"python3 -c pass (floor of a script task's start-up): {summary['python_c_pass_ms']:.1f} ms")
        for kind in a.backends.split(","):
            if kind == "postgresql" and not a.postgres_uri:
                print("postgresql: SKIPPED, no --postgres-uri / TENSORHUB_TEST_POSTGRES_URI (scripts/bench starts one)")
                continue
            backend = Backend(kind, tmp, a.postgres_uri)
            print(f"{kind}: load average {load_average()}")
            try:
                summary[kind] = bench_datasets(backend, six, floor_path, a.rounds)
                summary[kind]["startup"] = bench_startup(backend, a.cli, tmp, a.task_runs)
            finally:
                backend.close()
            for way, r in summary[kind]["startup"].items():
                r["over_python_c_pass"] = round(r["create_to_first_line_ms"] / summary["python_c_pass_ms"], 2)
        summary["load_average_end"] = load_average()
        print(f"load average at end: {summary['load_average_end']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
