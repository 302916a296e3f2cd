#!/usr/bin/python3
# Origin: the project's shared peers (shared/peers/optuna_pg.py), copied unchanged below this line so that
# a clone of tensorhub alone can benchmark.
"""Peer: Optuna ask -> tell cycles per second on an RDBStorage (PostgreSQL), W worker processes."""
import argparse, json, multiprocessing as mp, time
import optuna

def work(url, name, n):
    study = optuna.load_study(study_name=name, storage=url)
    dist = {"x": optuna.distributions.FloatDistribution(-10, 10)}
    for _ in range(n):
        t = study.ask(dist)
        study.tell(t, t.params["x"] ** 2)

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True, help="postgresql+psycopg2://user:pw@host:port/db")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--trials", type=int, default=200)
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = "peer-%d-%f" % (a.workers, time.time())
    optuna.create_study(study_name=name, storage=a.url, sampler=optuna.samplers.RandomSampler())
    per = max(1, a.trials // a.workers)
    ps = [mp.Process(target=work, args=(a.url, name, per)) for _ in range(a.workers)]
    t0 = time.perf_counter()
    for p in ps: p.start()
    for p in ps: p.join()
    dt = time.perf_counter() - t0
    print(json.dumps({"peer": "optuna", "version": optuna.__version__, "workers": a.workers,
                      "cycles": per * a.workers, "cycles_per_s": per * a.workers / dt}))
