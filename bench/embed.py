#!/usr/bin/python3
"""Benchmark of `tensorhub embed` against a PyTorch peer (bench/peers/torch_embed.py).

The same work on the same input, in one run: the outputs of the seed MLP's second hidden layer
("dense_1", mlp_config(800, 800) of model.json with seeded random weights) on the 10,000
Fashion-MNIST test images (Debian's dataset-fashion-mnist, scaled to [0, 1]), written as a
projector tensor TSV (10,000 x 800) with the labels as metadata.
  - ours: `tensorhub embed` from a SQLite hub holding the dataset and the model (process start,
    reading both from the hub, the forward pass, the TSVs, and the sprite it also draws);
  - peer: python3 + torch reading the same weights (safetensors) and arrays (.npy), the same
    forward pass in eval mode, np.savetxt of the same values.
Wall time of each process, --rounds rounds alternating, medians and the ratio peer / ours; the
peer's own phases (import, load, forward, write) are printed too. The two TSVs are checked to
hold the same numbers (max abs difference printed).

Runs under Debian's /usr/bin/python3 with PYTHONPATH=<build>/python (scripts/bench embed).
"""
import argparse
import gzip
import json
import os
import pathlib
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
import tensorhub  # noqa: E402  (PYTHONPATH=<build>/python)

FASHION_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")


def read_idx(path):
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_safetensors(path, tensors):
    """huggingface/safetensors' layout: u64 header length, JSON header, the bytes in name order."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def mlp_model_dir(directory):
    """mlp_config(800, 800) as model.json, Glorot-uniform weights (seed 1), zero biases."""
    rng = np.random.default_rng(1)
    layers = [{"type": "Dropout", "rate": 0.2}, {"type": "Dense", "units": 800, "activation": "relu"},
              {"type": "Dropout", "rate": 0.5}, {"type": "Dense", "units": 800, "activation": "relu"},
              {"type": "Dropout", "rate": 0.5}, {"type": "Dense", "units": 10}]
    config = {"name": "mlp", "input_shape": [784], "layers": layers, "loss": "sparse_categorical_crossentropy",
              "metrics": ["accuracy"], "optimizer": {"type": "Adam", "learning_rate": 1e-4}}
    weights = {}
    for name, (fan_out, fan_in) in {"dense": (800, 784), "dense_1": (800, 800), "dense_2": (10, 800)}.items():
        limit = np.sqrt(6 / (fan_in + fan_out))
        weights[name + ".weight"] = rng.uniform(-limit, limit, (fan_out, fan_in)).astype(np.float32)
        weights[name + ".bias"] = np.zeros(fan_out, np.float32)
    directory.mkdir(parents=True)
    (directory / "model.json").write_text(json.dumps(config))
    write_safetensors(directory / "weights.safetensors", weights)


def timed(cmd, env=None):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "bin" / "tensorhub"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    images = read_idx(FASHION_DIR / "t10k-images-idx3-ubyte.gz")[: a.n].reshape(-1, 784).astype(np.float32) / 255
    labels = read_idx(FASHION_DIR / "t10k-labels-idx1-ubyte.gz")[: a.n].astype(np.int64)
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {len(images)} images, layer dense_1 (800 units)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        uri = f"sqlite://{tmp / 'hub.db'}"
        mlp_model_dir(tmp / "model")
        with tensorhub.TensorHub(uri, "bench") as hub:
            hub.save_dataset({"X_test": images, "y_test": labels}, "fashion", image_shape=[28, 28])
            model_id = hub.save_model(str(tmp / "model"), "mlp")
        np.save(tmp / "images.npy", images)
        np.save(tmp / "labels.npy", labels)
        env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
        ours_cmd = [a.cli, "embed", "--hub", uri, "--project", "bench", "--model", str(model_id), "--dataset",
                    "fashion", "--layer", "dense_1", "-n", str(a.n), "--logdir", str(tmp / "ours")]
        peer_cmd = [sys.executable, str(ROOT / "bench" / "peers" / "torch_embed.py"), "--weights",
                    str(tmp / "model" / "weights.safetensors"), "--images", str(tmp / "images.npy"), "--labels",
                    str(tmp / "labels.npy"), "--layer", "dense_1", "--out", str(tmp / "peer"), "--threads",
                    str(a.threads)]
        ours, peer, phases = [], [], []
        for r in range(a.rounds):
            for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                if side == 0:
                    ours.append(timed(ours_cmd, env)[0])
                else:
                    seconds, out = timed(peer_cmd, env)
                    peer.append(seconds)
                    phases.append(json.loads(out.strip().splitlines()[-1]))
        a_tsv = np.loadtxt(tmp / "ours" / "mlp_dense_1.tsv", dtype=np.float32, delimiter="\t")
        b_tsv = np.loadtxt(tmp / "peer" / "tensor.tsv", dtype=np.float32, delimiter="\t")
        diff = float(np.max(np.abs(a_tsv - b_tsv)))
    o, p = statistics.median(ours), statistics.median(peer)
    print(f"tensorhub embed: {o:.2f} s (rounds {', '.join(f'{x:.2f}' for x in ours)})")
    print(f"peer (python3 + torch): {p:.2f} s (rounds {', '.join(f'{x:.2f}' for x in peer)}); its phases, median: " +
          ", ".join(f"{k} {statistics.median(ph[k] for ph in phases):.2f} s" for k in phases[0]))
    print(f"ratio peer / ours: {p / o:.2f}x; max |ours - peer| over the TSVs: {diff:.2e}")
    print(json.dumps({"ours_s": o, "peer_s": p, "ratio": p / o, "max_abs_diff": diff}))


if __name__ == "__main__":
    main()
