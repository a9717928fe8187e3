#!/bin/bash
# divergence.sh BIN LIMIT SEEDS... — test_ddp_equivalence's runs (1 rank x 24 against 2 ranks
# x 12, --amp off, --threads 1, the committed convnet_init) for other seeds and lengths:
# per seed, the first step whose losses differ by more than 1e-6 relative and the largest
# difference.  LIMIT / 24 steps.  Output: results/rounding_20261207/README.md, "40 steps".
set -u
B=$1; L=$2; shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
for s in "$@"; do
  c="train --quiet --data /usr/share/datasets/fashion-mnist --limit $L --test-limit 48 --epochs 1
     --lr 0.01 --momentum 0.9 --weight-decay 1e-4 --seed $s --threads 1 --timeout 60 --amp off
     --init $root/tests/golden/convnet_init.safetensors"
  $B $c --cpu 1 --mode baseline --batch-size 24 --out "$w/ref$s" >/dev/null 2>&1 || echo "seed $s: ref failed"
  $B $c --cpu 2 --mode ddp --batch-size 12 --out "$w/ddp$s" >/dev/null 2>&1 || echo "seed $s: ddp failed"
  paste -d, <(cut -d, -f3 "$w/ref$s/metrics.csv") <(cut -d, -f3 "$w/ddp$s/metrics.csv") |
    awk -F, -v s="$s" 'NR == 1 { next } { d = ($1 - $2) / $1; if (d < 0) d = -d
      if (d > 1e-6 && !f) f = NR - 1; if (d > m) m = d }
      END { printf "seed %d: first step >1e-6: %s  max %.2e over %d steps\n", s, f ? f : "-", m, NR - 1 }'
done
