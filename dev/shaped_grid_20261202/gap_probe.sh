#!/usr/bin/env bash
# gap_probe.sh BIN [ROUNDS] -- does a wait after backward slow the next forward?
# BIN: ddpprof built with gap_probe.patch applied (a wait of GAP_US after each step's
# backward, GAP_MODE y: spinning with sched_yield as comm_queue_wait does, p: spinning,
# s: sleeping).  1-rank ConvNet baselines on CPU 0, 40 steps each, every configuration once
# per round, ROUNDS rounds (default 3); prints each run's median forward and backward (ms)
# and their ratio, which a slower or faster machine moves less than either.
set -eu
bin=${1:?usage: gap_probe.sh BIN [ROUNDS]}
rounds=${2:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(train --cpu 1 --mode baseline --overwrite --model convnet --epochs 1 --limit 2560
      --test-limit 64 --threads 1 --amp off --seed 1 --quiet --no-sync-bn)
configs="none y:1000 y:3000 y:10000 y:30000 p:30000 s:30000"
for k in $(seq "$rounds"); do
  for c in $configs; do
    if [ "$c" = none ]; then env=(); else env=(GAP_MODE="${c%%:*}" GAP_US="${c#*:}"); fi
    env "${env[@]}" taskset -c 0 "$bin" "${args[@]}" --out "$tmp/$c.$k" >/dev/null
  done
done
python3 - "$tmp" $configs <<'PY'
import collections, csv, glob, os, statistics, sys
tmp, configs = sys.argv[1], sys.argv[2:]
print("gap (mode:us) | forward, backward (ms), forward/backward, per round | median ratio")
for c in configs:
    cells, ratios = [], []
    for d in sorted(glob.glob(os.path.join(tmp, c + ".*"))):
        t = collections.defaultdict(lambda: collections.defaultdict(float))
        for r in csv.DictReader(open(os.path.join(d, "rank0.trace.csv"))):
            if r["phase"] in ("forward", "backward") and int(r["step"]) >= 1:
                t[r["phase"]][int(r["step"])] += (int(r["end_ns"]) - int(r["start_ns"])) / 1e6
        f = statistics.median(t["forward"].values())
        b = statistics.median(t["backward"].values())
        cells.append("%.2f %.2f %.3f" % (f, b, f / b))
        ratios.append(f / b)
    print("%-8s | %s | %.3f" % (c, " | ".join(cells), statistics.median(ratios)))
PY
