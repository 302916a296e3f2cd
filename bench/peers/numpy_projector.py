"""The Projector view's peer (bench/ui_projector.mjs): the same work in numpy on the same file.

Reads a projector tensor TSV (rows of tab-separated numbers), then times, each the median of
--rounds runs:
  load   np.loadtxt of the TSV into float32 (what the server's first read does);
  pca    centring, the covariance (float64), np.linalg.eigh and the projection on the top 3
         components, as ui/projector.js computes them;
  knn    the 10 nearest points to one point by cosine distance (1 - cos) and by Euclidean
         distance in the original space, brute force over every point (as the page does).
Prints one JSON line: {"rows", "cols", "load_ms", "pca_ms", "knn_cosine_ms", "knn_euclidean_ms",
"pca_variance": [3 shares]}.

numpy's BLAS/LAPACK run on one thread (OMP_NUM_THREADS and OPENBLAS_NUM_THREADS default to 1
here, set before numpy loads), as the page's JavaScript does: on a loaded 2-core machine Debian's
OpenMP OpenBLAS spends ~600 ms in eigh of a 64 x 64 matrix with its threads fighting, 0.3 ms
on one.

Usage: /usr/bin/python3 bench/peers/numpy_projector.py TSV [--rounds N] [--point I]
"""
import argparse
import json
import os
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402  (after the thread settings, which numpy reads when it loads)


def median_ms(fn, rounds):
    """Runs fn() `rounds` times; returns (median milliseconds, the last result)."""
    times, out = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2], out


def pca3(x):
    """Top-3 PCA of x (n x d float32): (n x 3 coordinates, their shares of the variance)."""
    centred = x.astype(np.float64) - x.mean(axis=0, dtype=np.float64)
    cov = centred.T @ centred / len(x)
    w, v = np.linalg.eigh(cov)
    order = np.argsort(w)[::-1][:3]
    return centred @ v[:, order], w[order] / w.sum()


def knn(x, i, k, metric):
    """The k nearest points to x[i] (itself left out): indices, distances ascending."""
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1)
        d = 1.0 - (x @ x[i]) / (norms * norms[i])
    else:
        d = np.linalg.norm(x - x[i], axis=1)
    d[i] = np.inf
    idx = np.argpartition(d, k)[:k]
    idx = idx[np.argsort(d[idx])]
    return idx, d[idx]


def main():
    """Parses the arguments, times each step, prints the JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--point", type=int, default=1234)
    a = ap.parse_args()
    load_ms, x = median_ms(lambda: np.loadtxt(a.tsv, delimiter="\t", dtype=np.float32), max(1, a.rounds // 2))
    pca_ms, (_, shares) = median_ms(lambda: pca3(x), a.rounds)
    cos_ms, _ = median_ms(lambda: knn(x, a.point, 10, "cosine"), a.rounds * 4)
    euc_ms, _ = median_ms(lambda: knn(x, a.point, 10, "euclidean"), a.rounds * 4)
    print(json.dumps({"rows": int(x.shape[0]), "cols": int(x.shape[1]), "load_ms": load_ms, "pca_ms": pca_ms,
                      "knn_cosine_ms": cos_ms, "knn_euclidean_ms": euc_ms,
                      "pca_variance": [float(s) for s in shares]}))


if __name__ == "__main__":
    main()
