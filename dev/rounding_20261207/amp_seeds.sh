#!/bin/bash
# amp_seeds.sh BIN SEEDS... — test_amp_train's fp16-against-fp32 setup (375 steps of batch 32,
# --threads 1) per seed: final accuracy of each and their difference (points), and the
# relative difference of the mean loss of each 75-step window (%).  Output:
# results/rounding_20261207/amp_seeds.txt.
B=$(realpath "$1"); shift
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT; cd "$w" || exit 1
for s in "$@"; do
  for a in off fp16; do
    rm -rf w-$a
    $B train --quiet --data /usr/share/datasets/fashion-mnist --seed $s --threads 1 --timeout 60 --cpu 1 --mode baseline --batch-size 32 --epochs 1 --limit 12000 --lr 0.01 --momentum 0.9 --amp $a --out w-$a >/dev/null 2>&1
  done
  a32=$(grep ^final_accuracy w-off/meta.csv | cut -d, -f2); a16=$(grep ^final_accuracy w-fp16/meta.csv | cut -d, -f2)
  w=$(paste -d, <(cut -d, -f3 w-off/metrics.csv) <(cut -d, -f3 w-fp16/metrics.csv) | awk -F, 'NR>1{i=int((NR-2)/75); a[i]+=$1; b[i]+=$2} END{for(i=0;i<5;i++) printf " %+.2f", 100*(b[i]-a[i])/a[i]}')
  echo "seed $s: acc $(awk -v a=$a32 -v b=$a16 'BEGIN{printf "%.2f %.2f %+.2f", 100*a, 100*b, 100*(b-a)}') | windows (%):$w"
done
