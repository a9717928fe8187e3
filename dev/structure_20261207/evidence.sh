#!/usr/bin/env bash
# evidence.sh BEFORE_BIN AFTER_BIN [ROOT] — issue 36's evidence for the structure changes of
# 2026-12-07 (the report's rooms + meta.csv's typed contract, branch report-rooms; the fused
# optimizer and flat parameter buffers, branch fused-step): two built `ddpprof` binaries,
# BEFORE (821f7fd, 8faff7e's parent) and AFTER (fde111d, both merged), compared on
#   1. report / diff / predict of every committed fixture (tests/fixtures: the ddpprof run
#      dir, pytorch/*, nsys/* and make_current_schema.py's export, the three shaped grids'
#      72 runs), of meta.csv mutants (one line of a run's meta.csv changed), of bad input,
#      and of the runs parts 2 and 3 made: output folders `diff -r`, stdout, stderr and exit
#      status `cmp` (both sides write through one symlink ROOT/cur -> ROOT/{before,after},
#      so the paths they print are the same);
#   2. the trainer's determinism (train_cases: 1 rank and 2-rank DDP; fp32, fp16, bf16; SGD,
#      momentum + weight decay, Adam; overflowing fp16 steps; a resume; ResNet18): metrics.csv
#      and its loss columns, checkpoint.safetensors `cmp`, meta.csv's keys in order and its
#      values but the run's own (times, load, peaks, clock offsets);
#   3. the seed workload's speed: the main job (`ddpprof --model convnet --epochs 1
#      --limit LIMIT`: fp32 baseline, DDP+AMP on 2 CPU ranks) in strictly alternated rounds,
#      before then after, /proc/loadavg before each run; speed.csv gets speedup.csv's
#      train_s and images_per_s, phases.csv's median step and optimizer (rank 0) and the
#      cores other programs kept busy (meta.csv) of each run, then the tables: every run,
#      and the quiet runs only;
#   4. (not in the default PARTS) the same for `train --cpu 1 --threads 1` (speed1t.csv).
# Environment: FIXTURES (default: this tree's tests/fixtures), ROUNDS (5), LIMIT (4000),
# TRACE (full: parts 2-4 pass --trace TRACE to both -- BEFORE's default is full, AFTER's
# kernels since the probe-cost merge 42a67bf, which lies between them),
# PARTS (default "1 2 3"; part 1 runs last and reports parts 2's and 3's runs when there).
# Writes ROOT (default /tmp/evid): before/ after/ (outputs), term/ (terminal), fx/ (the
# unpacked, generated and mutated fixtures), runs/, speed/, part1.txt, part2.txt,
# speed.csv.  Needs python3 (the current-schema export, the tables), xz, bc, cmp, diff.
set -u
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [ROOT]" >&2; exit 2; }
declare -A BIN=([before]=$(readlink -f "$1") [after]=$(readlink -f "$2"))
ROOT=${3:-/tmp/evid}
here=$(cd "$(dirname "$0")" && pwd)
FX=${FIXTURES:-$here/../../tests/fixtures}
ROUNDS=${ROUNDS:-5}
LIMIT=${LIMIT:-4000}
PARTS=${PARTS:-1 2 3}
TRACE=${TRACE:-full}
mkdir -p "$ROOT"/{before,after,fx} "$ROOT"/term/{before,after}
for s in before after; do [ -x "${BIN[$s]}" ] || { echo "$s: ${BIN[$s]} is not executable" >&2; exit 2; }; done

# col FILE COLUMN [KEY=VALUE...]: a column by header name (plain CSV, no quoted commas in
# the columns read here)
col() {
  local f=$1 c=$2; shift 2
  awk -F, -v c="$c" -v conds="$*" 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i; n = split(conds, kv, " "); next }
    { for (j = 1; j <= n; j++) { split(kv[j], p, "="); if ($(h[p[1]]) != p[2]) next } print $(h[c]) }' "$f"
}

# run SIDE NAME ARGS...: ddpprof ARGS with ROOT/cur pointing at ROOT/SIDE; '@OUT' in ARGS is
# ROOT/cur/NAME.  Terminal output to ROOT/term/SIDE/NAME.{out,err,rc}.
run() {
  local side=$1 name=$2; shift 2
  local args=() a
  for a in "$@"; do args+=("${a//@OUT/$ROOT/cur/$name}"); done
  ln -sfn "$side" "$ROOT/cur"
  rm -rf "${ROOT:?}/$side/$name"
  (cd "$ROOT" && "${BIN[$side]}" "${args[@]}" >"term/$side/$name.out" 2>"term/$side/$name.err" </dev/null)
  echo $? >"$ROOT/term/$side/$name.rc"
}

# ---- fixtures unpacked or generated once, read by both sides -------------------------------
prepare_fixtures() {
  local g
  for g in 20261128 20261128_pinned_floor 20261202_ci1_1; do
    [ -d "$ROOT/fx/$g/runs" ] || { mkdir -p "$ROOT/fx/$g" && tar xJf "$FX/shaped_grid/$g/runs.tar.xz" -C "$ROOT/fx/$g"; }
  done
  [ -s "$ROOT/fx/current.sqlite" ] || python3 "$FX/nsys/make_current_schema.py" "$ROOT/fx/current.sqlite"
  cp "$FX/nsys/cloverleaf-2024.5/cloverleaf.sqlite" "$ROOT/fx/cloverleaf.rank5.sqlite"
  # meta.csv's typed contract at its edges: CI's calibration run (2 CPU ranks, --trace
  # full) with one thing in its meta.csv changed each
  local src=$ROOT/fx/20261202_ci1_1/runs/calib m name expr
  while IFS='|' read -r name expr; do
    m=$ROOT/fx/meta-$name
    rm -rf "$m"; cp -r "$src" "$m"
    sed -i -E "$expr" "$m/meta.csv"
  done <<'EOF'
world-text|s/^world_size,.*/world_size,abc/
world-missing|/^world_size,/d
world-zero|s/^world_size,.*/world_size,0/
world-huge|s/^world_size,.*/world_size,100000/
clock-text|s/^clock_offset_ns\.rank1,.*/clock_offset_ns.rank1,x/
bucket-index-padded|s/^bucket\.1\.bytes,/bucket.01.bytes,/
world-dup|s/^world_size,.*/world_size,2\nworld_size,4/
cap-empty|s/^bucket_cap_mb,.*/bucket_cap_mb,/
cap-missing|/^bucket_cap_mb,/d
bucket-bytes-text|s/^bucket\.0\.bytes,.*/bucket.0.bytes,x/
buckets-more|s/^buckets,.*/buckets,7/
amp-unknown|s/^amp,.*/amp,int8/
comm-missing|/^comm,/d
device-cuda|s/^device,.*/device,cuda/
layers-more|s/^layers,.*/layers,99/
layer-flops-neg|s/^layer\.0\.flops_forward,.*/layer.0.flops_forward,-5/
threads-neg|s/^threads_per_rank,.*/threads_per_rank,-1/
host-quoted|s/^hostname,.*/hostname,"a,""b"""/
load-high|s/^host_load_start,.*/host_load_start,100/
unknown-key|$ a foo,bar
crlf|s/$/\r/
no-header|1d
EOF
  rm -rf "$ROOT/fx/meta-none"; cp -r "$src" "$ROOT/fx/meta-none"; rm "$ROOT/fx/meta-none/meta.csv"
}

# the cases of part 1: NAME ARGS... (one a line)
cases() {
  local py=$FX/pytorch ns=$FX/nsys gpu=$FX/ddpprof/gpu-shared-h200 g r
  echo "gpu-shared-h200 report $gpu --out @OUT"
  echo "gpu-shared-h200-kineto report $gpu --kineto --timeline full --out @OUT"
  echo "gpu-shared-h200-predict predict $gpu --bandwidth-gbps 1,10 --bucket-cap-mb 1,25 --out @OUT"
  echo "gpu-shared-h200-predict-world predict $gpu --world 2,4,8 --amp off,fp16 --out @OUT"
  for r in keyavg-gloo-2ranks kineto-2hosts legacy-gloo-2ranks legacy-gloo-bn-2ranks; do
    echo "pt-$r report $py/$r --out @OUT"
  done
  echo "pt-kineto-2hosts-hta report $py/kineto-2hosts --hta-defaults --out @OUT"
  echo "pt-diff-legacy diff $py/legacy-gloo-2ranks $py/legacy-gloo-bn-2ranks --out @OUT"
  echo "pt-legacy-report-diff report $py/legacy-gloo-2ranks $py/legacy-gloo-bn-2ranks --diff --out @OUT"
  echo "pt-mixed report $gpu $py/kineto-2hosts --out @OUT"
  echo "nsys-ddp-2022.4 report $ns/ddp-2022.4 --out @OUT"
  echo "nsys-ddp-2022.4-files report $ns/ddp-2022.4/ddp.rank0.sqlite $ns/ddp-2022.4/ddp.rank1.sqlite --out @OUT"
  echo "nsys-ddp-2022.4-diff diff $ns/ddp-2022.4 --out @OUT"
  echo "nsys-ddp-2022.4-nvtx1 report $ns/ddp-2022.4-nvtx1 --out @OUT"
  echo "nsys-cloverleaf report $ROOT/fx/cloverleaf.rank5.sqlite --out @OUT"
  echo "nsys-current report $ROOT/fx/current.sqlite --out @OUT"
  for g in 20261128 20261128_pinned_floor 20261202_ci1_1; do
    for r in "$ROOT/fx/$g/runs"/*/; do
      r=${r%/}
      echo "sg-$g-$(basename "$r") report $r --out @OUT"
    done
    r=$ROOT/fx/$g/runs
    echo "sg-$g-diff-base-calib diff $r/baseline $r/calib --out @OUT"
    echo "sg-$g-diff-calib-again diff $r/calib $r/calib-again --out @OUT"
    echo "sg-$g-predict-calib predict $r/calib --bandwidth-gbps 1,10 --bucket-cap-mb 1,25 --out @OUT"
    echo "sg-$g-predict-calib-world predict $r/calib --world 2,4,8 --latency-us 10,100 --out @OUT"
    echo "sg-$g-predict-base-from predict $r/baseline --world 2 --comm-from $r/calib --out @OUT"
    for r in "$ROOT/fx/$g/runs"/r*/; do
      r=${r%/}
      echo "sg-$g-predict-$(basename "$r") predict $r --bucket-cap-mb 1,25 --comm-from $ROOT/fx/$g/runs/calib --out @OUT"
    done
  done
  for r in "$ROOT"/fx/meta-*/; do
    r=${r%/}
    echo "$(basename "$r") report $r --out @OUT"
    echo "$(basename "$r")-predict predict $r --bucket-cap-mb 1,25 --world 2,4 --out @OUT"
  done
  # bad input: the error lines
  echo "err-missing report $ROOT/fx/no-such-run --out @OUT"
  echo "err-diff-same diff $gpu $gpu/ --out @OUT"
  echo "err-diff-one diff $gpu --out @OUT"
  echo "err-predict-world predict $gpu --world 0 --out @OUT"
  echo "err-predict-amp predict $gpu --amp int8 --out @OUT"
  echo "err-predict-nsys predict $ns/ddp-2022.4 --out @OUT"
  echo "err-option report $gpu --no-such-option --out @OUT"
  # the runs parts 2 and 3 made, each read by both binaries (a run of either side)
  for s in before after; do
    for r in $(train_cases | cut -d'|' -f1) train1-sgdm-resume; do
      [ -s "$ROOT/runs/$s/$r/meta.csv" ] || continue
      echo "own-$s-$r report $ROOT/runs/$s/$r --out @OUT"
    done
    for r in "$ROOT"/speed/"$s"-1; do
      [ -s "$r/ddp/meta.csv" ] || continue
      echo "own-$s-mainjob report $r --out @OUT"
      echo "own-$s-mainjob-diff diff $r --out @OUT"
      echo "own-$s-mainjob-predict predict $r --bandwidth-gbps 1,10 --bucket-cap-mb 1,25 --out @OUT"
    done
  done
}

part1() {
  prepare_fixtures
  local n=0 same=0 line name side
  : >"$ROOT/part1.txt"
  while read -r line; do
    name=${line%% *}
    # shellcheck disable=SC2086
    for side in before after; do run "$side" "$name" ${line#* }; done
    n=$((n + 1))
    local d=""
    if [ -e "$ROOT/before/$name" ] || [ -e "$ROOT/after/$name" ]; then # (an error leaves none)
      diff -r "$ROOT/before/$name" "$ROOT/after/$name" >"$ROOT/term/$name.diff" 2>&1 || d="$d out-dir"
    fi
    for t in out err rc; do cmp -s "$ROOT/term/before/$name.$t" "$ROOT/term/after/$name.$t" || d="$d $t"; done
    if [ -z "$d" ]; then same=$((same + 1)); fi
    printf '%s rc=%s files=%s%s\n' "$name" "$(cat "$ROOT/term/after/$name.rc")" \
      "$(find "$ROOT/after/$name" -type f 2>/dev/null | wc -l)" "${d:+ DIFFERS:$d}" >>"$ROOT/part1.txt"
  done < <(cases)
  echo "part 1: $same of $n cases byte-identical (outputs and terminal)" | tee -a "$ROOT/part1.txt"
}

# ---- part 2: the trainer's determinism ------------------------------------------------------
# NAME|ARGS of part 2's runs (each also --epochs 1 unless given, --seed 0 --trace TRACE --quiet):
# the defaults (SGD, no momentum) and what the fused step changed besides -- momentum and
# weight decay, Adam, the GradScaler's unscale with overflowing steps skipped, resuming
# into the flat buffers, ResNet18's many parameter tensors
train_cases() {
  cat <<'EOF2'
train1|train --cpu 1 --threads 1 --limit 640
ddp2-fp32|train --cpu 2 --mode ddp --threads 1 --limit 640 --amp off
ddp2-fp16|train --cpu 2 --mode ddp --threads 1 --limit 640 --amp fp16
train1-sgdm|train --cpu 1 --threads 1 --limit 640 --momentum 0.9 --weight-decay 5e-4
train1-adam|train --cpu 1 --threads 1 --limit 640 --optimizer adam --lr 1e-3 --weight-decay 1e-4
ddp2-adam-fp16|train --cpu 2 --mode ddp --threads 1 --limit 640 --optimizer adam --lr 1e-3 --amp fp16
ddp2-sgdm-fp16-overflow|train --cpu 2 --mode ddp --threads 1 --limit 1280 --momentum 0.9 --amp fp16 --loss-scale-init 1e9 --loss-scale-backoff 0.1 --loss-scale-growth 8 --loss-scale-interval 2
ddp2-bf16|train --cpu 2 --mode ddp --threads 1 --limit 640 --amp bf16 --momentum 0.9
resnet-ddp2-fp16|train --cpu 2 --mode ddp --threads 1 --model resnet18 --resnet-width 8 --dataset synthetic --limit 256 --test-limit 64 --momentum 0.9 --amp fp16
EOF2
}
train_runs() { # SIDE
  local s=$1 b=${BIN[$1]} d=$ROOT/runs/$1 name args
  mkdir -p "$d"
  while IFS='|' read -r name args; do
    rm -rf "${d:?}/$name"
    # shellcheck disable=SC2086
    "$b" $args --epochs 1 --seed 0 --trace "$TRACE" --quiet --out "$d/$name" >"$d/$name.log" 2>&1
  done < <(train_cases)
  # the momentum run resumed for a second epoch: its checkpoint read back into the buffers
  # (from one path for both sides: meta.csv names it)
  rm -rf "$d/train1-sgdm-resume"
  cp "$d/train1-sgdm/checkpoint.safetensors" "$ROOT/runs/resume-from.safetensors"
  "$b" train --cpu 1 --threads 1 --limit 640 --momentum 0.9 --weight-decay 5e-4 --epochs 2 --seed 0 \
    --trace "$TRACE" --quiet --resume "$ROOT/runs/resume-from.safetensors" --out "$d/train1-sgdm-resume" \
    >"$d/train1-sgdm-resume.log" 2>&1
}
# losscols METRICS.CSV: the columns of the loss (by name)
losscols() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) h[$i] = i }
    { print $(h["step"]) "," $(h["epoch"]) "," $(h["loss"]) "," $(h["loss_scale"]) "," $(h["found_inf"]) }' "$1"
}
# the meta.csv keys that are the run's own, not the code's (times, load, the peaks measured at start)
volatile='^(run_id|git_revision|start_time|host_load_start|host_load_end|host_busy_s|host_steal_s|clock_offset_ns|clock_rtt_ns|epoch\.[0-9]+\.train_s|cpu_s|wall_s|ranks_cpu_s|peak_gflops|peak_gbps|peak_source)(\.rank[0-9]+)?,'
part2() {
  train_runs before; train_runs after
  local r out=$ROOT/part2.txt B A
  printf '%-24s %-6s %-18s %-10s %-20s %-10s %s\n' run steps "metrics.csv (cmp)" "loss cols" checkpoint "meta keys" "meta values (not volatile)" >"$out"
  for r in $(train_cases | cut -d'|' -f1) train1-sgdm-resume; do
    B=$ROOT/runs/before/$r A=$ROOT/runs/after/$r
    if [ ! -s "$B/metrics.csv" ] || [ ! -s "$A/metrics.csv" ]; then
      echo "$r: no metrics.csv (before: $(tail -n 1 "$B.log"); after: $(tail -n 1 "$A.log"))" >>"$out"; continue
    fi
    local lc m ck mk mv
    cmp -s "$B/metrics.csv" "$A/metrics.csv" && m=identical || m=DIFFERS
    lc=$(diff <(losscols "$B/metrics.csv") <(losscols "$A/metrics.csv") >/dev/null && echo identical || echo DIFFERS)
    cmp -s "$B/checkpoint.safetensors" "$A/checkpoint.safetensors" && ck="identical($(stat -c %s "$A/checkpoint.safetensors")B)" || ck=DIFFERS
    diff <(cut -d, -f1 "$B/meta.csv") <(cut -d, -f1 "$A/meta.csv") >"$ROOT/runs/$r.metakeys.diff" && mk=identical || mk=DIFFERS
    diff <(grep -Ev "$volatile" "$B/meta.csv") <(grep -Ev "$volatile" "$A/meta.csv") >"$ROOT/runs/$r.metavalues.diff" && mv=identical || mv="DIFFERS: $(grep -c '^[<>]' "$ROOT/runs/$r.metavalues.diff") lines"
    printf '%-24s %-6s %-18s %-10s %-20s %-10s %s\n' "$r" "$(($(wc -l <"$A/metrics.csv") - 1))" "$m" "$lc" "$ck" "$mk" "$mv" >>"$out"
    printf '  %s: final loss before %s after %s; skipped (found_inf) steps %s; last loss scale %s\n' "$r" \
      "$(tail -n 1 "$B/metrics.csv" | cut -d, -f3)" "$(tail -n 1 "$A/metrics.csv" | cut -d, -f3)" \
      "$(col "$A/metrics.csv" found_inf | grep -c '^1$')" "$(tail -n 1 "$A/metrics.csv" | cut -d, -f4)" >>"$out"
  done
  cat "$out"
}

# ---- part 3: the seed workload's speed, alternated rounds -----------------------------------
# others RUN_DIR: the cores other programs kept busy during the run, from its meta.csv
# ((host_busy_s - ranks_cpu_s) / wall_s: the report's "measured under load" figure)
others() {
  awk -F, '{ v[$1] = $2 } END { if (v["wall_s"] > 0) printf "%.2f", (v["host_busy_s"] - v["ranks_cpu_s"]) / v["wall_s"] }' "$1/meta.csv"
}
part3() {
  local i s d csv=$ROOT/speed.csv
  mkdir -p "$ROOT/speed"
  echo "round,side,load1,load5,wall_s,base_train_s,base_images_per_s,ddp_train_s,ddp_images_per_s,speedup,base_step_p50_ms,ddp_step_p50_ms,base_opt_p50_ms,ddp_opt_p50_ms,base_others_cores,ddp_others_cores,rc" >"$csv"
  for i in $(seq 1 "$ROOT_ROUNDS"); do
    for s in before after; do
      d=$ROOT/speed/$s-$i
      rm -rf "$d"
      read -r l1 l5 _ </proc/loadavg
      local t0 t1 rc
      t0=$(date +%s.%N)
      "${BIN[$s]}" --model convnet --epochs 1 --limit "$LIMIT" --trace "$TRACE" --out "$d" >"$d.log" 2>&1; rc=$?
      t1=$(date +%s.%N)
      local sp=$d/speedup.csv ph=$d/phases.csv
      echo "$i,$s,$l1,$l5,$(echo "$t1 - $t0" | bc),$(col "$sp" train_s run=baseline),$(col "$sp" images_per_s run=baseline),$(col "$sp" train_s run=ddp),$(col "$sp" images_per_s run=ddp),$(col "$sp" speedup run=ddp),$(col "$ph" p50_ms run=baseline rank=0 phase=step),$(col "$ph" p50_ms run=ddp rank=0 phase=step),$(col "$ph" p50_ms run=baseline rank=0 phase=optimizer),$(col "$ph" p50_ms run=ddp rank=0 phase=optimizer),$(others "$d/baseline"),$(others "$d/ddp"),$rc" | tee -a "$csv"
    done
  done
  summarise "$csv"
}

# ---- part 4: one rank, one thread (a core taken by another program does not stall it) -------
part4() {
  local i s d csv=$ROOT/speed1t.csv
  mkdir -p "$ROOT/speed1t"
  echo "round,side,load1,load5,base_train_s,base_images_per_s,base_step_p50_ms,base_opt_p50_ms,base_others_cores,rc" >"$csv"
  for i in $(seq 1 "$ROOT_ROUNDS"); do
    for s in before after; do
      d=$ROOT/speed1t/$s-$i
      rm -rf "$d"
      read -r l1 l5 _ </proc/loadavg
      "${BIN[$s]}" train --cpu 1 --threads 1 --epochs 1 --limit "$LIMIT" --trace "$TRACE" --quiet --out "$d" >"$d.log" 2>&1 &&
        "${BIN[after]}" report "$d" --out "$d/report" >"$d.report.log" 2>&1
      local rc=$?
      echo "$i,$s,$l1,$l5,$(awk -F, '$1 == "epoch.1.train_s" { print $2 }' "$d/meta.csv"),$(awk -F, -v l="$LIMIT" '$1 == "epoch.1.train_s" { printf "%.1f", l / $2 }' "$d/meta.csv"),$(col "$d/report/phases.csv" p50_ms rank=0 phase=step),$(col "$d/report/phases.csv" p50_ms rank=0 phase=optimizer),$(others "$d"),$rc" | tee -a "$csv"
    done
  done
  summarise "$csv"
}

# summarise SPEED.CSV: median and min-max of each measure per side, after/before of the medians
summarise() {
  python3 - "$1" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cols = ["load1", "wall_s", "base_train_s", "base_images_per_s", "ddp_train_s", "ddp_images_per_s",
        "speedup", "base_step_p50_ms", "ddp_step_p50_ms", "base_opt_p50_ms", "ddp_opt_p50_ms",
        "base_others_cores", "ddp_others_cores"]
QUIET = 0.15  # a run is quiet when other programs kept under this many cores busy
def table(title, keep):
    print("\n%s\n" % title)
    print("| measure | before: n, median (min-max) | after: n, median (min-max) | after/before (medians) |")
    print("|---|---|---|---|")
    for c in cols:
        v = {s: [float(r[c]) for r in rows if r["side"] == s and r.get(c) and keep(r, c)] for s in ("before", "after")}
        if not v["before"] or not v["after"]:
            continue
        m = {s: statistics.median(v[s]) for s in v}
        f = lambda s: "%d, %.4g (%.4g-%.4g)" % (len(v[s]), m[s], min(v[s]), max(v[s]))
        print("| %s | %s | %s | %.3f |" % (c, f("before"), f("after"), m["after"] / m["before"] if m["before"] else float("nan")))
def quiet(r, c):
    run = "ddp" if c.startswith("ddp") or c == "speedup" else "base" if c.startswith("base") else None
    runs = ["base", "ddp"] if c in ("speedup", "wall_s", "load1") else [run]
    return all(r.get(k + "_others_cores") and float(r[k + "_others_cores"]) < QUIET for k in runs)
table("every run", lambda r, c: True)
table("quiet runs only (other programs under %.2f cores during the run)" % QUIET, quiet)
PY
}

ROOT_ROUNDS=$ROUNDS
for p in $PARTS; do
  case $p in
    2) part2 ;;
    3) part3 ;;
    4) part4 ;;
    1) ;;
  esac
done
# part 1 last: it also reads the runs parts 2 and 3 made
case " $PARTS " in *" 1 "*) part1 ;; esac
