#!/usr/bin/python3
# Origin: the project's shared peers (shared/peers/pytorch_mlp.py), copied unchanged below this line so that
# a clone of tensorhub alone can benchmark.
"""Peer: the original MLP trained with a plain PyTorch loop on MNIST-format IDX files."""
import argparse, gzip, json, os, time
import numpy as np
import torch

def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * ndim).reshape(dims)

def find(d, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise FileNotFoundError(os.path.join(d, stem))

ap = argparse.ArgumentParser()
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--threads", type=int, default=os.cpu_count())
ap.add_argument("--units", type=int, default=800)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(1)
X = torch.tensor(idx(find(a.data, "train-images-idx3-ubyte")).reshape(-1, 784), dtype=torch.float32) / 255
Y = torch.tensor(idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
XT = torch.tensor(idx(find(a.data, "t10k-images-idx3-ubyte")).reshape(-1, 784), dtype=torch.float32) / 255
YT = torch.tensor(idx(find(a.data, "t10k-labels-idx1-ubyte")).astype(np.int64))
nn = torch.nn
net = nn.Sequential(nn.Dropout(0.2), nn.Linear(784, a.units), nn.ReLU(), nn.Dropout(0.5),
                    nn.Linear(a.units, a.units), nn.ReLU(), nn.Dropout(0.5), nn.Linear(a.units, 10))
opt = torch.optim.Adam(net.parameters(), lr=1e-4)
n, bs, times = X.shape[0], 256, []
for e in range(a.epochs):
    t0 = time.perf_counter(); net.train(); perm = torch.randperm(n)
    for i in range(0, n, bs):
        idx_ = perm[i:i + bs]
        loss = nn.functional.cross_entropy(net(X[idx_]), Y[idx_])
        opt.zero_grad(); loss.backward(); opt.step()
    times.append(time.perf_counter() - t0)
net.eval()
with torch.no_grad():
    acc = (net(XT).argmax(1) == YT).float().mean().item()
print(json.dumps({"peer": "pytorch", "threads": a.threads, "samples_per_s": n * a.epochs / sum(times),
                  "epoch_s": times, "test_accuracy": acc}))
