#!/usr/bin/env bash
# test_layer_trace.sh — per-layer tracing under --trace full (issue 25 §2; probes/TRACE.md
# "layer.forward / layer.backward", report/FORMULAS.md "Per-layer FLOPs and bytes" and
# "layers.csv").  Real runs, a few steps each:
#   convnet  baseline, 1 rank, batch 8, 6 steps
#   resnet18 width 4, DDP on 2 CPU ranks, batch 8, synthetic data, 4 steps
# and checks
#   meta.csv    layers, layer.K.{name,type,param_bytes,flops_*,bytes_*}, param.I.{name,bytes},
#               peak_gflops/peak_gbps/peak_source; every PyTorch leaf module of the model is
#               a layer of the same name and type, and every conv's and linear's FLOPs equal
#               the independent count of tests/golden/make_golden_layers.py (PyTorch's shapes,
#               batch 8); the parameters are PyTorch's, in order, with their bytes
#   the trace   every step of every rank: one layer.forward and one layer.backward row per
#               layer, named as meta.csv's layers, bytes = its param_bytes, on the host clock,
#               inside that step's forward (backward) range; forward rows in meta.csv's
#               order; ConvNet's backward rows in the reverse order
#   --trace nvtx and the default (kernels)  no layer rows, no layers key
#   the report  layers.csv by column name: one row per rank and layer with positive
#               forward_ms/backward_ms, its FLOPs as meta.csv's, a roofline bound; and
#               report.html's roofline with a point per layer and direction; and a
#               meta.csv claiming more layers than it names neither crashes report nor predict
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
golden=$(cd "$(dirname "$0")/golden" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

train() { # train DIR ARGS...
  local dir=$1
  shift
  timeout 300 "$bin" train --quiet --threads 1 --epochs 1 --batch-size 8 --test-limit 16 \
    --out "$dir" "$@" >"$dir.log" 2>&1 || { cat "$dir.log"; return 1; }
}

meta() { awk -F, -v k="$2" '$1 == k { v = $2 } END { print v }' "$1/meta.csv"; }

# meta.csv against the golden: modules (name, type), conv/linear FLOPs, parameters
check_meta() { # check_meta RUN GOLDEN EXTRA: EXTRA layers that are no module (ResNet's sums)
  local run=$1 g=$2 extra=$3 why
  why=$(awk -F, -v extra="$extra" '
    FNR == NR { # meta.csv
      m[$1] = $2
      next
    }
    FNR == 1 { next }
    $1 == "module" { mods++; want[$2] = $3 }
    $1 == "flops" { ff[$2] = $4; fb[$2] = $5 }
    $1 == "param" { np++; pn[np - 1] = $2; pb[np - 1] = $4 }
    END {
      n = m["layers"] + 0
      if (n != mods + extra) { printf "layers %d, expected %d modules + %d\n", n, mods, extra; exit }
      for (k = 0; k < n; k++) {
        name = m["layer." k ".name"]; type = m["layer." k ".type"]
        if (!(name in want)) {
          if (name !~ /\.(add|relu)$/) { printf "layer %d %s is no module of the model\n", k, name; exit }
          continue
        }
        if (type != want[name]) { printf "layer %s: type %s, PyTorch %s\n", name, type, want[name]; exit }
        seen[name] = 1
        if (name in ff && (m["layer." k ".flops_forward"] != ff[name] || m["layer." k ".flops_backward"] != fb[name])) {
          printf "layer %s: flops %s/%s, golden %s/%s\n", name, m["layer." k ".flops_forward"], m["layer." k ".flops_backward"], ff[name], fb[name]; exit
        }
        if (name in ff) flopsok++
        for (d = 0; d < 4; d++) {
          key = "layer." k "." (d == 0 ? "flops_forward" : d == 1 ? "flops_backward" : d == 2 ? "bytes_forward" : "bytes_backward")
          if (!(m[key] > 0)) { printf "%s is %s, not positive\n", key, m[key]; exit }
        }
      }
      for (name in want) if (!(name in seen)) { printf "module %s is no layer\n", name; exit }
      if (flopsok == 0) { print "no conv or linear checked"; exit }
      for (i = 0; i < np; i++)
        if (m["param." i ".name"] != pn[i] || m["param." i ".bytes"] != pb[i]) {
          printf "param %d: %s %s, PyTorch %s %s\n", i, m["param." i ".name"], m["param." i ".bytes"], pn[i], pb[i]; exit
        }
      if (m["param." np ".name"] != "") { printf "more params than PyTorch (%d)\n", np; exit }
      if (!(m["peak_gflops"] > 0) || !(m["peak_gbps"] > 0) || m["peak_source"] == "")
        { printf "peak: %s GFLOP/s, %s GB/s, source \"%s\"\n", m["peak_gflops"], m["peak_gbps"], m["peak_source"]; exit }
    }' "$run/meta.csv" "$g")
  [ -z "$why" ] || { echo "  $run: $why"; return 1; }
}

# the trace rows of every rank against meta.csv's layers (see the top)
check_rows() { # check_rows RUN REVERSE (1: backward rows in reverse forward order)
  local run=$1 rev=$2 f why
  for f in "$run"/rank*.trace.csv; do
    why=$(csv_awk -v rev="$rev" '
      FNR == NR { m[$1] = $2; next }
      FNR == 1 { n = m["layers"] + 0; for (k = 0; k < n; k++) { idx[m["layer." k ".name"]] = k; pb[k] = m["layer." k ".param_bytes"] }; next }
      col("clock") != "host" || col("kind") != "range" { next }
      {
        s = col("step"); ph = col("phase")
        if (ph == "forward" || ph == "backward") { rs[s, ph] = col("start_ns"); re[s, ph] = col("end_ns"); steps[s] = 1 }
        if (ph != "layer.forward" && ph != "layer.backward") next
        nm = col("name")
        if (!(nm in idx)) { printf "step %s: %s row named %s, no layer\n", s, ph, nm; failed = 1; exit }
        k = idx[nm]; d = ph == "layer.forward" ? 0 : 1
        if (col("bytes") != pb[k]) { printf "%s %s: bytes %s, param_bytes %s\n", ph, nm, col("bytes"), pb[k]; failed = 1; exit }
        c = cnt[s, d]++
        if (d == 0 && k != c) { printf "step %s: forward row %d is %s, layer %d\n", s, c, nm, k; failed = 1; exit }
        if (d == 1 && rev == 1 && k != n - 1 - c) { printf "step %s: backward row %d is %s\n", s, c, nm; failed = 1; exit }
        seen[s, d, k]++
        ls[s, d, c] = col("start_ns"); le[s, d, c] = col("end_ns")
      }
      END {
        if (failed) exit
        if (length(steps) < 2) { printf "%d steps\n", length(steps); exit }
        for (s in steps) for (d = 0; d < 2; d++) {
          par = d ? "backward" : "forward"
          if (cnt[s, d] != n) { printf "step %s: %d %s layer rows, %d layers\n", s, cnt[s, d], par, n; exit }
          for (k = 0; k < n; k++) if (seen[s, d, k] != 1) { printf "step %s: layer %d in %s %d times\n", s, k, par, seen[s, d, k]; exit }
          for (c = 0; c < n; c++)
            if (ls[s, d, c] < rs[s, par] || le[s, d, c] > re[s, par] || le[s, d, c] < ls[s, d, c])
              { printf "step %s: %s layer row %d not inside its %s range\n", s, par, c, par; exit }
        }
      }' "$run/meta.csv" "$f")
    [ -z "$why" ] || { echo "  $f: $why"; return 1; }
  done
}

# layers.csv and the page
check_report() { # check_report RUN RANKS
  local run=$1 ranks=$2 why
  local out=$tmp/rep.${run##*/}
  "$bin" report "$run" --out "$out" >"$out.log" 2>&1 || { cat "$out.log"; return 1; }
  csv_header "$out/layers.csv" run rank layer name type steps clock forward_ms backward_ms \
    flops_forward flops_backward bytes_forward bytes_backward gflops gbps \
    intensity_flop_per_byte roofline_gflops pct_peak_flops pct_peak_bw pct_roofline bound ||
    { echo "  layers.csv header: $(head -1 "$out/layers.csv")"; return 1; }
  why=$(csv_awk -v ranks="$ranks" '
    FNR == NR { m[$1] = $2; next }
    FNR == 1 { next }
    {
      rows++; k = col("layer")
      if (col("name") != m["layer." k ".name"] || col("type") != m["layer." k ".type"]) { printf "row %d: layer %s is %s %s\n", rows, k, col("name"), col("type"); failed = 1; exit }
      if (!(col("forward_ms") > 0) || !(col("backward_ms") > 0)) { printf "%s: forward_ms %s backward_ms %s\n", col("name"), col("forward_ms"), col("backward_ms"); failed = 1; exit }
      if (col("flops_forward") != m["layer." k ".flops_forward"]) { printf "%s: flops_forward %s\n", col("name"), col("flops_forward"); failed = 1; exit }
      if (col("bound") != "memory" && col("bound") != "compute") { printf "%s: bound \"%s\"\n", col("name"), col("bound"); failed = 1; exit }
      if (!(col("pct_roofline") > 0)) { printf "%s: pct_roofline %s\n", col("name"), col("pct_roofline"); failed = 1; exit }
    }
    END { if (!failed && rows != ranks * m["layers"]) printf "%d rows, expected %d ranks x %d layers\n", rows, ranks, m["layers"] }
  ' "$run/meta.csv" "$out/layers.csv")
  [ -z "$why" ] || { echo "  layers.csv: $why"; return 1; }
  local points
  points=$(grep -c '<circle class="layer"' "$out/report.html")
  [ "$(grep -c 'class="roofline"' "$out/report.html")" -eq 1 ] && [ "$points" -eq $((2 * $(meta "$run" layers))) ] ||
    { echo "  report.html: $(grep -c 'class="roofline"' "$out/report.html") roofline(s), $points points"; return 1; }
}

c=$tmp/convnet
if train "$c" --model convnet --limit 48 --trace full; then
  check_run "convnet: meta.csv layers against PyTorch's modules" check_meta "$c" "$golden/layers_convnet_b8.csv" 0
  check_run "convnet: layer rows" check_rows "$c" 1
  check_run "convnet: layers.csv and the roofline" check_report "$c" 1
else
  bad "convnet run"
fi

r=$tmp/resnet
if train "$r" --model resnet18 --resnet-width 4 --dataset synthetic --limit 64 --cpu 2 \
  --mode ddp --trace full; then
  # 8 blocks, each a sum and the ReLU after it: no modules
  check_run "resnet18: meta.csv layers against PyTorch's modules" check_meta "$r" "$golden/layers_resnet18_w4_b8.csv" 16
  check_run "resnet18: layer rows on both ranks" check_rows "$r" 0
  check_run "resnet18: layers.csv (2 ranks) and the roofline" check_report "$r" 2
else
  bad "resnet18 run"
fi

# the checks can fail: a golden with one conv's FLOPs changed is refused
sed '0,/^flops,layer2.0,conv,[0-9]*/s//flops,layer2.0,conv,1/' "$golden/layers_convnet_b8.csv" >"$tmp/wrong.csv"
if [ -d "$c" ] && ! check_meta "$c" "$tmp/wrong.csv" 0 >/dev/null; then ok; else bad "a wrong FLOP count was accepted"; fi

# a damaged meta.csv (layers,99 with 9 layer names): report and predict skip the unnamed
# layers -- they crashed (SIGSEGV in predict's parameter-to-layer match, found by
# dev/structure_20261207) -- and predict.csv is the undamaged run's
if [ -d "$c" ]; then
  d=$tmp/damaged
  cp -r "$c" "$d"
  sed -i 's/^layers,.*/layers,99/' "$d/meta.csv"
  "$bin" predict "$c" --out "$tmp/pred-whole" >/dev/null 2>&1
  "$bin" predict "$d" --out "$tmp/pred-damaged" >"$tmp/pred-damaged.log" 2>&1
  check_eq "predict of meta.csv layers,99: exit" "$?" 0
  "$bin" report "$d" --out "$tmp/rep-damaged" >/dev/null 2>&1
  check_eq "report of meta.csv layers,99: exit" "$?" 0
  check_run "predict of meta.csv layers,99: predict.csv as the undamaged run's" \
    cmp -s "$tmp/pred-whole/predict.csv" "$tmp/pred-damaged/predict.csv"
fi

n=$tmp/nvtx
if train "$n" --model convnet --limit 16 --trace nvtx; then
  check_run "--trace nvtx: no layer rows" test "$(csv_col "$n/rank0.trace.csv" phase | grep -c '^layer\.')" -eq 0
  check_run "--trace nvtx: no layers in meta.csv" test -z "$(meta "$n" layers)"
else
  bad "--trace nvtx run"
fi
k=$tmp/kernels
if train "$k" --model convnet --limit 16; then
  check_run "the default (--trace kernels): meta.csv says kernels" test "$(meta "$k" trace)" = kernels
  check_run "the default: no layer rows" test "$(csv_col "$k/rank0.trace.csv" phase | grep -c '^layer\.')" -eq 0
  check_run "the default: no layers in meta.csv" test -z "$(meta "$k" layers)"
else
  bad "a run at the default --trace"
fi

check_done
