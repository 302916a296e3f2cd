#!/usr/bin/python3
"""Peer of `tensorhub embed` (bench/embed.py): the same layer outputs of the seed MLP on the same
images, computed with PyTorch in eval mode and written as a projector tensor TSV and metadata TSV
with numpy, as a Python user would without tensorhub.

Inputs: the model's weights.safetensors (parsed here: an 8-byte little-endian header length, a
JSON header of name -> {dtype, shape, data_offsets}, then the bytes; huggingface/safetensors'
format), the images and labels as .npy files. The network is model.json's mlp_config(800, 800):
Dropout, Dense(800, relu) "dense", Dropout, Dense(800, relu) "dense_1", Dropout, Dense(10);
--layer dense (first hidden layer) or dense_1 (second). Prints its phases' seconds as JSON.
"""
import argparse
import json
import os
import struct
import time

t_start = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402

t_imported = time.perf_counter()


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw, np.float32, (end - begin) // 4, 8 + n + begin)
                                     .reshape(info["shape"]).copy())
    return out


ap = argparse.ArgumentParser()
ap.add_argument("--weights", required=True)
ap.add_argument("--images", required=True)
ap.add_argument("--labels", required=True)
ap.add_argument("--layer", default="dense_1", choices=["dense", "dense_1"])
ap.add_argument("--out", required=True)
ap.add_argument("--threads", type=int, default=os.cpu_count())
a = ap.parse_args()
torch.set_num_threads(a.threads)

w = read_safetensors(a.weights)
x = torch.from_numpy(np.load(a.images))
y = np.load(a.labels)
t_loaded = time.perf_counter()

with torch.no_grad():
    h = torch.relu(x @ w["dense.weight"].T + w["dense.bias"])
    if a.layer == "dense_1":
        h = torch.relu(h @ w["dense_1.weight"].T + w["dense_1.bias"])
t_forward = time.perf_counter()

os.makedirs(a.out, exist_ok=True)
np.savetxt(os.path.join(a.out, "tensor.tsv"), h.numpy(), fmt="%.9g", delimiter="\t")
np.savetxt(os.path.join(a.out, "metadata.tsv"), y, fmt="%d")
t_written = time.perf_counter()
print(json.dumps({"import_s": t_imported - t_start, "load_s": t_loaded - t_imported,
                  "forward_s": t_forward - t_loaded, "write_s": t_written - t_forward}))
