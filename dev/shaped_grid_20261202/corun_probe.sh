#!/usr/bin/env bash
# corun_probe.sh BIN [PAIRS] -- does a 1-rank run on CPU 0 slow down while another computes
# on CPU 1 (as the other node's rank does beside it in scripts/shaped-grid's 2-node runs)?
# PAIRS (default 10) pairs of ConvNet baselines on CPU 0, 80 steps each: one alone, one
# beside a longer baseline on CPU 1 (started 0.7 s before, stopped after), the order
# alternating from pair to pair; prints each run's median forward+backward (ms) and the
# pairs' ratios (beside / alone).
set -eu
bin=${1:?usage: corun_probe.sh BIN [PAIRS]}
pairs=${2:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(train --cpu 1 --mode baseline --overwrite --model convnet --epochs 1 --test-limit 64
      --threads 1 --amp off --seed 1 --quiet --no-sync-bn --timeout 60)
alone() { taskset -c 0 "$bin" "${args[@]}" --limit 5120 --out "$tmp/alone.$1" >/dev/null; }
beside() {
  taskset -c 1 "$bin" "${args[@]}" --limit 40960 --out "$tmp/nb.$1" >/dev/null &
  local nb=$!
  sleep 0.7
  taskset -c 0 "$bin" "${args[@]}" --limit 5120 --out "$tmp/beside.$1" >/dev/null
  kill "$nb" 2>/dev/null || true
  wait "$nb" 2>/dev/null || true
}
for i in $(seq "$pairs"); do
  if [ $((i % 2)) -eq 0 ]; then alone "$i"; beside "$i"; else beside "$i"; alone "$i"; fi
done
python3 - "$tmp" "$pairs" <<'PY'
import collections, csv, os, statistics, sys
tmp, n = sys.argv[1], int(sys.argv[2])
def compute(d):
    t = collections.defaultdict(float)
    for r in csv.DictReader(open(os.path.join(d, "rank0.trace.csv"))):
        if r["phase"] in ("forward", "backward") and int(r["step"]) >= 1:
            t[int(r["step"])] += (int(r["end_ns"]) - int(r["start_ns"])) / 1e6
    return statistics.median(t.values())
a = [compute(os.path.join(tmp, "alone.%d" % i)) for i in range(1, n + 1)]
b = [compute(os.path.join(tmp, "beside.%d" % i)) for i in range(1, n + 1)]
r = [y / x for x, y in zip(a, b)]
print("alone  (ms): " + " ".join("%.2f" % v for v in a))
print("beside (ms): " + " ".join("%.2f" % v for v in b))
print("beside / alone, per pair: " + " ".join("%.3f" % v for v in r))
print("median %.3f, mean %.3f over %d pairs" % (statistics.median(r), statistics.mean(r), n))
PY
