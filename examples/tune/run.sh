#!/bin/bash
# Keras Tuner's introduction ("Introduction to the Keras Tuner": units 32..512 step 32,
# learning_rate 1e-2 / 1e-3 / 1e-4, Hyperband with factor 3, objective val_accuracy) on
# Fashion-MNIST, with the trials trained by two tensorhub runners.
#
#   examples/tune/run.sh                  # --max-epochs 10 as the tutorial: 120 epochs, ~8 min on 2 cores
#   examples/tune/run.sh --quick          # --max-epochs 4: 26 epochs, ~1.5 min
#   examples/tune/run.sh --max-epochs 6 --fresh
#
# Environment: TENSORHUB (the binary; default build/bin/tensorhub, else the one on PATH),
# TENSORHUB_URI (default sqlite://$PWD/tune-example.db), TENSORHUB_PROJECT (default
# tune_example), IDX (MNIST-format directory; default Debian's dataset-fashion-mnist),
# SEED (the oracle's seed, default 1), LOG_DIR (runner logs, default $PWD), MAX_EPOCHS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
max_epochs=${MAX_EPOCHS:-10}
overwrite=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) max_epochs=4 ;;
    --max-epochs) max_epochs=${2:?--max-epochs needs a number}; shift ;;
    --fresh) overwrite=(--overwrite) ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (allowed: --quick, --max-epochs N, --fresh)" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "${TENSORHUB:-}" ]; then
  if [ -x "$here/../../build/bin/tensorhub" ]; then TENSORHUB="$here/../../build/bin/tensorhub"
  else TENSORHUB=$(command -v tensorhub || true); fi
fi
[ -x "${TENSORHUB:-}" ] || { echo "run.sh: no tensorhub binary; build it or set TENSORHUB=/path/to/tensorhub" >&2; exit 2; }
export TENSORHUB_URI=${TENSORHUB_URI:-sqlite://$PWD/tune-example.db}
export TENSORHUB_PROJECT=${TENSORHUB_PROJECT:-tune_example}
log_dir=${LOG_DIR:-$PWD}
search="fashion_hb_e${max_epochs}"
start=$(date +%s)

# 1. The data: Fashion-MNIST as a hub dataset (50,000 train / 10,000 validation / 10,000 test).
#    `hub init` first: read commands never create a hub, and a failed listing inside $(...)
#    would otherwise read as "no dataset" and skip the import.
"$TENSORHUB" hub init
listing=$("$TENSORHUB" dataset list --filter '{"dataset_name": "fashion_mnist"}' --limit 1 --json)
if [ "$listing" = "[]" ]; then
  "$TENSORHUB" dataset import --name fashion_mnist ${IDX:+--idx "$IDX"} --validation 10000 \
    --tags '{"description": "Fashion-MNIST for examples/tune"}'
fi

# 2. Two runners, one intra-op thread each (on 2 cores, two 1-thread trainings beat two
#    2-thread ones). They stop with this script; --exit-when-idle is the safety net if the
#    script is killed outright.
runners=()
stop_runners() {
  for pid in "${runners[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${runners[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_runners EXIT
trap 'exit 130' INT TERM
for i in 1 2; do
  "$TENSORHUB" runner --task-name trial --threads 1 --exit-when-idle 900 > "$log_dir/runner-$i.log" 2>&1 &
  runners+=($!)
done
echo "runners ${runners[*]} started (logs: $log_dir/runner-1.log, $log_dir/runner-2.log)"

# 3. The search. The same name resumes a stopped search; --fresh starts it again.
"$TENSORHUB" tune --name "$search" "${overwrite[@]}" \
  --spec "$here/spec.json" --space "$here/space.json" --oracle hyperband \
  --objective val_accuracy --max-epochs "$max_epochs" --factor 3 --seed "${SEED:-1}" --parallel 2

# 4. What it found.
echo
echo "== tensorhub tune results --top 5"
"$TENSORHUB" tune results --name "$search" --top 5
"$TENSORHUB" tune results --name "$search" --json | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
best = s["best"]
if best is None:
    sys.exit("no completed trial")
hp = {k: v for k, v in best["hyper_parameters"].items() if not k.startswith("tuner/")}
r = best.get("result", {})
print()
print("best hyperparameters:", json.dumps(hp))
print("best val_accuracy: %.4f (trial %s, %d epochs in all)" % (best["score"], best["trial_id"], r.get("epochs", 0)))
if "test_accuracy" in r:
    print("its test_accuracy: %.4f (model id %s)" % (r["test_accuracy"], r.get("model_id")))
trained = sum(len(t.get("result", {}).get("history", [])) for t in s["trials"])
promoted = [t for t in s["trials"] if "tuner/trial_id" in t["hyper_parameters"]]
print("epochs trained over %d trials: %d; %d promoted trials resumed from their parent model" %
      (len(s["trials"]), trained, len(promoted)))
'
echo "wall time: $(( $(date +%s) - start )) s"
