#!/usr/bin/python3
"""Optuna's TPESampler on Hartmann-6, the peer of bench/tune_bayesian.cpp.

Minimises Hartmann-6 on [0, 1]^6 (Surjanovic & Bingham, Virtual Library of Simulation
Experiments; global minimum -3.32237) with optuna.samplers.TPESampler(seed=s) (its defaults:
10 random startup trials, then TPE) for `--trials` trials per seed, seeds 0 .. --seeds - 1,
each in a fresh in-memory study. Prints one JSON line:
  {"sampler": "TPESampler", "optuna": "3.1.0", "trials": 50, "best": [...], "seconds": ...}
Runs with Debian's /usr/bin/python3 and python3-optuna.
"""
import argparse
import json
import math
import time

import optuna

ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8],
     [0.05, 10, 17, 0.1, 8, 14],
     [3, 3.5, 1.7, 10, 17, 8],
     [17, 8, 0.05, 10, 0.1, 14]]
P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
     [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
     [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
     [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def hartmann6(x):
    return -sum(ALPHA[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j]) ** 2 for j in range(6)))
                for i in range(4))


def objective(trial):
    return hartmann6([trial.suggest_float("x%d" % j, 0.0, 1.0) for j in range(6)])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    assert abs(hartmann6([0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]) + 3.32237) < 1e-5
    start = time.perf_counter()
    best = []
    for seed in range(args.seeds):
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
        study.optimize(objective, n_trials=args.trials)
        best.append(study.best_value)
    print(json.dumps({"sampler": "TPESampler", "optuna": optuna.__version__, "trials": args.trials,
                      "best": best, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
