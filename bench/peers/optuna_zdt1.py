#!/usr/bin/python3
"""Optuna's NSGAIISampler on ZDT1, the peer of bench/tune_zdt1.cpp.

ZDT1 (Zitzler, Deb & Thiele 2000) with --variables n in [0, 1]: f1 = x0,
g = 1 + 9 * mean(x1 .. x(n-1)), f2 = g * (1 - sqrt(f1 / g)), both minimised. For each seed
0 .. --seeds - 1, a fresh in-memory study with optuna.samplers.NSGAIISampler(seed=s,
population_size=P) and its other defaults runs --trials trials. Prints one JSON line with each
seed's Pareto front (the values of study.best_trials), so that the C++ side computes every
hypervolume with one function:
  {"sampler": "NSGAIISampler", "optuna": "3.1.0", "fronts": [[[f1, f2], ...], ...], "seconds": ...}
Runs with Debian's /usr/bin/python3 and python3-optuna.
"""
import argparse
import json
import math
import time

import optuna


def zdt1(x):
    g = 1 + 9 * sum(x[1:]) / (len(x) - 1)
    return x[0], g * (1 - math.sqrt(x[0] / g))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--variables", type=int, default=30)
    parser.add_argument("--population", type=int, default=50)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n = args.variables

    def objective(trial):
        return zdt1([trial.suggest_float("x%d" % i, 0.0, 1.0) for i in range(n)])

    start = time.perf_counter()
    fronts = []
    for seed in range(args.seeds):
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=args.population)
        study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
        study.optimize(objective, n_trials=args.trials)
        fronts.append([list(t.values) for t in study.best_trials])
    print(json.dumps({"sampler": "NSGAIISampler", "optuna": optuna.__version__, "trials": args.trials,
                      "fronts": fronts, "seconds": time.perf_counter() - start}))


if __name__ == "__main__":
    main()
