#!/usr/bin/python3
"""Optuna's TPESampler + MedianPruner on examples/tune's Fashion-MNIST MLP: the peer of
bench/tune_search_time.cpp's random-median search.

The same model, space, data and epoch budget as the bench's searches:
  - model (examples/tune/spec.json): x / 255 -> Dense(units, relu) -> Dense(10), Keras's
    initialisation (glorot_uniform kernels, zero biases), torch.manual_seed(1) (the spec's
    model seed), Adam(learning_rate, epsilon 1e-7 as Keras), cross-entropy on the logits,
    batch --batch-size, the training set reshuffled each epoch, EarlyStopping(val_loss,
    patience 5), --max-epochs epochs; the objective is the best epoch's val_accuracy;
  - space (examples/tune/space.json): units Int 32..512 step 32, learning_rate
    Choice 1e-2 / 1e-3 / 1e-4 (suggest_int(step=32), suggest_categorical);
  - data: Fashion-MNIST's 60,000 training images (--idx, MNIST-format files, plain or .gz),
    the first 50,000 for training and the last 10,000 for validation, the split
    `tensorhub dataset import` (--validation 10000) and the bench's shards make; in memory as
    float32 tensors in each worker;
  - 2 worker processes (2 trials in parallel, as the bench's 2 runners), each with
    torch.set_num_threads(1), on one study in a JournalFileStorage (Optuna's storage for
    several processes on one machine); each worker's TPESampler(seed=S * 1000 + worker) with
    its defaults (10 random startup trials), MedianPruner(n_startup_trials, n_warmup_steps)
    as the bench's pruner; trial.report(val_accuracy, epoch) and trial.should_prune() after
    each epoch, as Optuna's examples do;
  - the epoch budget (--budget): the study stops when the epochs trained by all its trials
    (pruned ones included) reach it: a worker that sees it reached after one of its epochs,
    or before starting a trial, stops (the trial it cut ends as failed, "cut at budget").

Timing starts once both workers have imported torch and loaded the data (the bench's clock
starts with its runners already started); each epoch's time is taken when its validation
ends. Prints one JSON line: {"peer": "optuna", "optuna": ..., "torch": ..., "trials": ...,
"pruned": ..., "epochs_trained": ..., "wall_s": ..., "time_to_target_s": ... | null,
"best_val_accuracy": ..., "best_params": {...}}.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np


def read_idx(path):
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


class BudgetReached(Exception):
    pass


def worker(a):
    import optuna
    import torch

    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # not a warning per trial cut at the budget
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # JournalStorage, new in 3.1
    images = read_idx(find(a.idx, "train-images-idx3-ubyte")).reshape(-1, 784)
    labels = read_idx(find(a.idx, "train-labels-idx1-ubyte")).astype(np.int64)
    n_train = images.shape[0] - 10000
    x = torch.from_numpy(images.astype(np.float32) / 255)
    y = torch.from_numpy(labels)
    x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
    storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(a.journal))
    study = optuna.load_study(
        study_name="fashion_mlp", storage=storage,
        sampler=optuna.samplers.TPESampler(seed=a.seed * 1000 + a.worker),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=a.n_startup_trials, n_warmup_steps=a.n_warmup_steps))
    epochs = []  # (trial number, epoch, seconds since t0, val_accuracy)

    def epochs_trained():
        return sum(len(t.intermediate_values) for t in study.get_trials(deepcopy=False))

    def objective(trial):
        if epochs_trained() >= a.budget:
            study.stop()
            raise BudgetReached()
        units = trial.suggest_int("units", 32, 512, step=32)
        learning_rate = trial.suggest_categorical("learning_rate", [0.01, 0.001, 0.0001])
        torch.manual_seed(1)
        nn = torch.nn
        net = nn.Sequential(nn.Linear(784, units), nn.ReLU(), nn.Linear(units, 10))
        for m in net:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        opt = torch.optim.Adam(net.parameters(), lr=learning_rate, eps=1e-7)
        best_acc, best_loss, wait = float("-inf"), float("inf"), 0
        for epoch in range(a.max_epochs):
            net.train()
            perm = torch.randperm(n_train)
            for i in range(0, n_train, a.batch_size):
                batch = perm[i:i + a.batch_size]
                loss = nn.functional.cross_entropy(net(x_train[batch]), y_train[batch])
                opt.zero_grad()
                loss.backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                logits = net(x_val)
                val_loss = nn.functional.cross_entropy(logits, y_val).item()
                val_acc = (logits.argmax(1) == y_val).float().mean().item()
            epochs.append((trial.number, epoch, time.time() - a.t0, val_acc))
            best_acc = max(best_acc, val_acc)
            trial.report(val_acc, epoch)
            if epochs_trained() >= a.budget:
                study.stop()
                trial.set_user_attr("cut_at_budget", True)
                raise BudgetReached()
            if trial.should_prune():
                raise optuna.TrialPruned()
            if val_loss < best_loss:  # Keras's EarlyStopping(monitor="val_loss", patience=5)
                best_loss, wait = val_loss, 0
            else:
                wait += 1
                if wait >= 5:
                    break
        return best_acc

    print("ready", flush=True)
    a.t0 = float(sys.stdin.readline())
    study.optimize(objective, n_trials=a.max_trials, catch=(BudgetReached,))
    print(json.dumps({"epochs": epochs, "end_s": time.time() - a.t0}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--max-epochs", type=int, default=9)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--budget", type=int, default=72, help="epochs trained by the whole study")
    parser.add_argument("--max-trials", type=int, default=1000, help="per worker; the budget stops it first")
    parser.add_argument("--target", type=float, default=0.87)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n-startup-trials", type=int, default=2)
    parser.add_argument("--n-warmup-steps", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--journal", default="", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.worker >= 0:
        worker(a)
        return

    import optuna
    import torch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
    with tempfile.TemporaryDirectory(prefix="optuna-fashion-") as tmp:
        journal = os.path.join(tmp, "journal.log")
        storage = optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(journal))
        optuna.create_study(study_name="fashion_mlp", storage=storage, direction="maximize")
        argv = [sys.executable, os.path.abspath(__file__), "--journal", journal]
        for k in ("idx", "max_epochs", "batch_size", "budget", "max_trials", "target", "seed", "n_startup_trials",
                  "n_warmup_steps"):
            argv += ["--" + k.replace("_", "-"), str(getattr(a, k))]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        procs = [subprocess.Popen(argv + ["--worker", str(w)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                  text=True) for w in range(a.workers)]
        for p in procs:
            if p.stdout.readline().strip() != "ready":
                raise SystemExit("optuna_fashion_mlp: a worker failed to start")
        t0 = time.time()
        for p in procs:
            p.stdin.write("%r\n" % t0)
            p.stdin.flush()
        outs = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise SystemExit("optuna_fashion_mlp: a worker failed (status %d)" % p.returncode)
            outs.append(json.loads(out.strip().splitlines()[-1]))
        wall = max(o["end_s"] for o in outs)
        epochs = sorted((e for o in outs for e in o["epochs"]), key=lambda e: e[2])
        to_target = next((e[2] for e in epochs if e[3] >= a.target), None)
        study = optuna.load_study(study_name="fashion_mlp", storage=storage)
        trials = [t for t in study.get_trials(deepcopy=False) if t.intermediate_values]
        states = optuna.trial.TrialState
        complete = [t for t in trials if t.state == states.COMPLETE]
        best = max(complete, key=lambda t: t.value) if complete else None
        print(json.dumps({
            "peer": "optuna", "optuna": optuna.__version__, "torch": torch.__version__,
            "sampler": "TPESampler", "pruner": {"name": "MedianPruner", "n_startup_trials": a.n_startup_trials,
                                                "n_warmup_steps": a.n_warmup_steps},
            "workers": a.workers, "budget": a.budget, "trials": len(trials),
            "complete": len(complete), "pruned": sum(t.state == states.PRUNED for t in trials),
            "cut_at_budget": sum(t.state == states.FAIL for t in trials),
            "epochs_trained": len(epochs), "wall_s": wall, "time_to_target_s": to_target,
            "best_val_accuracy": best.value if best else None, "best_params": best.params if best else {}}))


if __name__ == "__main__":
    main()
