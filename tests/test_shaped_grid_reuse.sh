#!/usr/bin/env bash
# test_shaped_grid_reuse.sh — scripts/shaped-grid's comparison without the network (no root):
# `--reuse` on a committed grid (tests/fixtures/shaped_grid/20261128, the runs and
# summary.csv of results/shaped_grid_20261128 as they were committed: the fixture's README)
# runs `ddpprof predict` on every run again and writes the tables:
#  1. every point is there (9 grid, 1 baseline) with the buckets each cap gives (1, 3, 7);
#  2. each error is (predicted - measured) / measured of its own row, and summary.csv's
#     median and worst |error| are those of the rows;
#  3. the exit status says whether the goal was met (0) or missed (3), as summary.csv does;
#     the recommended cap (the lowest predicted step per bandwidth) is counted right, and on
#     the committed pinned grid (20261128_pinned_floor) it is the best measured cap at all 3;
#     on a grid of the trainer that writes comm_progress,gradient (20261202_ci1_1) the ring
#     at the gradients applies (predict says so) and does no worse than committed, and
#     without the key it is predicted by the model before it (its worst error > 5 points
#     higher);
#     the measured steps are the same through `ddpprof report` (--measure-only: phases.csv's
#     rank 0 step p50) as through predict's config=measured rows;
#  4. the 80 % intervals (report/FORMULAS.md "Prediction error"): every row's is ddpprof
#     predict's, in_interval and the width are the row's own, summary.csv's coverage and
#     mean width the rows' (printed: on 20261128 60 % inside, 38 % wide), and
#     interval_coverage on rows worked by hand; out of sample, a grid whose calibration is
#     one of its points never scores it (and a grid of only that point is refused);
#  5. the noise floor (report/FORMULAS.md): scripts/shaped-grid's noise_floor on series
#     worked by hand, and on the committed grid (3 runs a point) 6 pseudo-grids one run a
#     point and 3 against the median of the other two, each no worse than the widest
#     spread of errors.csv's points allows;
#  6. bad input: a directory that is no grid, and an archive with a path out of runs/, are
#     refused in one line with exit 2.
# The test read results/ until the raw runs left it (results/ holds tables; no test reads
# it): with them went its checks of the grids it had no room to keep (each 0.4-1 MB packed),
# the model no worse than committed on the five grids of results/shaped_grid_20261201
# (grid_a, grid_b, grid_c, warmup_a, warmup_b; the best cap recommended on each, the goal
# met on grid_a and warmup_b) and on gp3a, gp3b and ci1_2 of results/shaped_grid_20261202
# (with predict saying the ring at the gradients applies).  Those runs are in git history
# (results/*/README.md says where) for a check by hand.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
src=${DDPPROF_SOURCE_DIR:?DDPPROF_SOURCE_DIR must point at the source tree}
command -v python3 >/dev/null || { echo "skipped: scripts/shaped-grid needs python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
# grid_of NAME: the fixture grid NAME as results/ committed grids, summary.csv and
# runs.tar.gz (the fixture's runs.tar.xz as gzip, by python's lzma: no xz needed), in
# $tmp/NAME; prints that folder
grid_of() {
  mkdir -p "$tmp/$1" && cp "$src/tests/fixtures/shaped_grid/$1/summary.csv" "$tmp/$1/" &&
    python3 -c 'import gzip, lzma, shutil, sys
with lzma.open(sys.argv[1]) as i, gzip.open(sys.argv[2], "wb", compresslevel=1) as o:
    shutil.copyfileobj(i, o)' "$src/tests/fixtures/shaped_grid/$1/runs.tar.xz" "$tmp/$1/runs.tar.gz" &&
    echo "$tmp/$1"
}
grid=$(grid_of 20261128) || { echo "FAIL: the fixture tests/fixtures/shaped_grid/20261128 cannot be read"; exit 1; }

timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$grid" --out "$tmp/o" >"$tmp/o.log" 2>&1
rc=$?
check exit "$([ $rc -eq 0 ] || [ $rc -eq 3 ]; echo $?)" "exit $rc: $(tail -n 2 "$tmp/o.log")"
e=$tmp/o/errors.csv
check rows "$(csv_awk 'FNR > 1 && col("kind") == "grid" { g++ } FNR > 1 && col("kind") == "baseline" { b++ }
  END { exit !(g == 9 && b == 1) }' "$e"; echo $?)" "not 9 grid rows and 1 baseline row: $(cat "$e")"
check buckets "$(csv_awk 'FNR > 1 { want = col("bucket_cap_mb") == "25" ? 1 : col("bucket_cap_mb") == "0.02" ? 3 : 7
  if (col("buckets") != want) bad = 1 } END { exit bad }' "$e"; echo $?)" "caps 25, 0.02, 0.0001 MiB did not give 1, 3, 7 buckets"
# errors written with 2 decimals from steps written with 3: 0.02 points of slack
check error-arith "$(csv_awk 'FNR > 1 { m = col("measured_step_ms"); p = col("predicted_step_ms")
  d = 100 * (p - m) / m - col("error_pct"); if (m <= 0 || p <= 0 || d > 0.02 || d < -0.02) bad = 1 }
  END { exit bad }' "$e"; echo $?)" "an error_pct is not (predicted - measured) / measured: $(cat "$e")"
csv_col "$e" error_pct | awk '{ print ($1 < 0) ? -$1 : $1 }' | sort -g >"$tmp/abs"
n=$(wc -l <"$tmp/abs")
med=$(awk -v n="$n" '{ a[NR] = $1 } END { print (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }' "$tmp/abs")
worst=$(tail -n 1 "$tmp/abs")
s=$tmp/o/summary.csv
smed=$(csv_col "$s" value key=median_abs_error_pct)
sworst=$(csv_col "$s" value key=worst_abs_error_pct)
check summary "$(awk -v a="$med" -v b="$smed" -v c="$worst" -v d="$sworst" \
  'BEGIN { exit !(a - b < 0.011 && b - a < 0.011 && c - d < 0.011 && d - c < 0.011) }'; echo $?)" \
  "summary.csv says median $smed / worst $sworst, the rows give $med / $worst"
met=$(csv_col "$s" value key=goal_met)
check goal-exit "$( { [ "$met" = 1 ] && [ $rc -eq 0 ]; } || { [ "$met" = 0 ] && [ $rc -eq 3 ]; }; echo $?)" \
  "goal_met $met but exit $rc"
check md "$([ "$(grep -c '^| calibration run |' "$tmp/o/errors.md")" -eq 9 ] &&
  grep -q '^| 1-rank baseline |' "$tmp/o/errors.md"; echo $?)" "errors.md lacks rows: $(cat "$tmp/o/errors.md")"

# the recommended cap (issue 25): per bandwidth, the cap of the lowest predicted step, its
# measured step against the best measured; summary.csv's count is the rows'
want=$(csv_awk 'FNR > 1 && col("kind") == "grid" { r = col("bandwidth_mbit"); p = col("predicted_step_ms") + 0; m = col("measured_step_ms") + 0
  if (!(r in bp) || p < bp[r]) { bp[r] = p; rm[r] = m }; if (!(r in bm) || m < bm[r]) bm[r] = m }
  END { for (r in bp) { n++; if (100 * (rm[r] - bm[r]) / bm[r] <= 5) k++ }; printf "%d of %d", k, n }' "$e")
got=$(csv_col "$s" value key=recommended_cap_within_goal)
check rec-cap "$([ -n "$got" ] && [ "$got" = "$want" ] && grep -q "^Recommended cap within 5 %: $want bandwidths" "$tmp/o/errors.md"; echo $?)" \
  "recommended_cap_within_goal '$got', the rows give '$want'"
# the noise floor: by hand, [[10, 10, 12], [20, 20, 20]] (goal 5 / 10 %): one run a point,
# pairs (0,1) (1,0) 0 %, (0,2) (1,2) 20 % and (2,0) (2,1) 16.67 % on the first point, 0 on
# the second: medians 0 0 10 10 8.33 8.33 (mean 6.111), worsts 0 0 20 20 16.67 16.67 (mean
# 12.222), 2 of 6 met; against the median of the others: 12 vs 10 (20 %), 10 vs 11 (9.09 %)
# twice: medians 10 4.545 4.545 (6.364), worsts 20 9.09 9.09 (12.727), 2 of 3 met; one run a
# point: none; [[10, 11], [20, 18]]: 10 and 10 %, then 9.09 and 11.11 %: 10.051, 10.556, 0 of 2
got=$(python3 - "$src/scripts/shaped-grid" <<'PY'
import importlib.machinery, importlib.util, sys
ld = importlib.machinery.SourceFileLoader("shaped_grid", sys.argv[1])
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("shaped_grid", ld))
ld.exec_module(m)
def show(f):
    return " ".join("%s:%d,%d,%.3f,%.3f" % ((k,) + f[k]) for k in sorted(f)) or "none"
print(show(m.noise_floor([[10, 10, 12], [20, 20, 20]], 5, 10)),
      show(m.noise_floor([[10], [20]], 5, 10)), show(m.noise_floor([[10, 11], [20, 18]], 5, 10)))
PY
)
want="rest:3,2,6.364,12.727 single:6,2,6.111,12.222 none single:2,0,10.051,10.556"
check noise-floor-by-hand "$([ "$got" = "$want" ]; echo $?)" "noise_floor gave '$got', want '$want'"
fs=$(csv_col "$s" value key=noise_floor_single_grids) fr=$(csv_col "$s" value key=noise_floor_rest_grids)
fsm=$(csv_col "$s" value key=noise_floor_single_median_pct) fsw=$(csv_col "$s" value key=noise_floor_single_worst_pct)
frw=$(csv_col "$s" value key=noise_floor_rest_worst_pct)
spread=$(csv_awk 'FNR > 1 && col("kind") == "grid" { d = 100 * (col("measured_max_ms") - col("measured_min_ms")) / col("measured_min_ms"); if (d > w) w = d }
  END { print w }' "$e")
check noise-floor-committed "$([ "$fs" = 6 ] && [ "$fr" = 3 ] && awk -v m="$fsm" -v w="$fsw" -v r="$frw" -v s="$spread" \
  'BEGIN { exit !(m > 0 && m <= w && w <= s + 0.01 && r > 0 && r <= s + 0.01) }' &&
  grep -q '^Noise floor .* the goal met by [0-9]* of 6; against the median of the other 2 rounds' "$tmp/o/errors.md"; echo $?)" \
  "noise floor: $fs and $fr pseudo-grids (want 6, 3), single $fsm / $fsw %, rest worst $frw %, widest spread $spread %: $(grep '^Noise' "$tmp/o/errors.md")"
# the 80 % intervals (report/FORMULAS.md "Prediction error"): every row has one, around its
# prediction, and it is ddpprof predict's own (predict.csv of the calibration run at that
# point); in_interval is lo <= measured <= hi and interval_width_pct 100 (hi - lo) /
# predicted of the row's own figures (0.006: the width's 2 decimals); summary.csv's coverage
# is the share of rows inside, its mean width the rows' mean (0.011: their rounding)
check interval-rows "$(csv_awk 'FNR > 1 { lo = col("predicted_lo_ms") + 0; hi = col("predicted_hi_ms") + 0
  p = col("predicted_step_ms") + 0; m = col("measured_step_ms") + 0
  if (col("predicted_lo_ms") == "" || !(lo <= p && p <= hi)) bad = 1
  if (col("in_interval") != (lo <= m && m <= hi ? 1 : 0)) bad = 1
  d = 100 * (hi - lo) / p - col("interval_width_pct"); if (d > 0.006 || d < -0.006) bad = 1 }
  END { exit bad }' "$e"; echo $?)" "a row's interval, in_interval or width is not as documented: $(cat "$e")"
lo=$(csv_col "$e" predicted_lo_ms kind=grid bandwidth_mbit=100 bucket_cap_mb=0.0001)
plo=$(csv_col "$tmp/o/work/predict-calib/predict.csv" step_lo_ms config=predicted bandwidth_gbps=0.1 bucket_cap_mb=0.0001)
check interval-is-predicts "$([ -n "$lo" ] && [ "$lo" = "$plo" ]; echo $?)" "errors.csv's interval from $lo ms, predict.csv's from $plo ms"
want=$(csv_awk 'FNR > 1 { n++; k += col("in_interval"); w += col("interval_width_pct") } END { printf "%.1f %.2f %d", 100 * k / n, w / n, n }' "$e")
got="$(csv_col "$s" value key=interval_coverage_pct) $(csv_col "$s" value key=interval_mean_width_pct) $(csv_col "$s" value key=interval_points)"
check interval-summary "$(awk -v a="$want" -v b="$got" 'BEGIN { split(a, x, " "); split(b, y, " ")
  exit !(x[1] == y[1] && x[2] - y[2] < 0.011 && y[2] - x[2] < 0.011 && x[3] == y[3] && y[3] == 10) }'; echo $?)" \
  "summary.csv's coverage, width, points '$got', the rows give '$want'"
check interval-md "$(grep -q "^80 % intervals: [0-9]* of 10 measured steps inside their prediction's ($(csv_col "$s" value key=interval_coverage_pct | cut -d. -f1)[0-9]* %; goal >= 80 %)" "$tmp/o/errors.md"; echo $?)" \
  "errors.md does not state the coverage: $(grep '^80 %' "$tmp/o/errors.md")"
echo "80 % intervals on the committed grid 20261128: $(csv_col "$s" value key=interval_coverage_pct) % inside, mean width $(csv_col "$s" value key=interval_mean_width_pct) %"
# interval_coverage by hand: measured 10, 12 and 9 ms against predictions of 10 ms in
# [9, 11], [9, 11] and [9, 11.5]: the first and the last (its lower end) inside, 2 of 3,
# 66.67 %; widths 20, 20 and 25 %, 21.667 %; no rows, None
got=$(python3 - "$src/scripts/shaped-grid" <<'PY'
import importlib.machinery, importlib.util, sys
ld = importlib.machinery.SourceFileLoader("shaped_grid", sys.argv[1])
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("shaped_grid", ld))
ld.exec_module(m)
n, k, c, w = m.interval_coverage([(10, 10, 9, 11), (12, 10, 9, 11), (9, 10, 9, 11.5)])
print("%d %d %.2f %.3f %s" % (n, k, c, w, m.interval_coverage([])))
PY
)
check interval-by-hand "$([ "$got" = "3 2 66.67 21.667 None" ]; echo $?)" "interval_coverage gave '$got', want '3 2 66.67 21.667 None'"

# out of sample: a grid whose calibration is one of its points (the committed grid with
# its summary saying calibration 100,25) scores the other 8 and never that one, from the
# calibration run and, --baseline-point all, from the 1-rank run; a grid of nothing but
# the calibration's configuration is refused
mkdir -p "$tmp/oos" && cp "$grid/runs.tar.gz" "$tmp/oos/" &&
  sed 's/^calib,.*/calib,"100,25"/' "$grid/summary.csv" >"$tmp/oos/summary.csv"
timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$tmp/oos" --baseline-point all --out "$tmp/oos/o" >"$tmp/oos.log" 2>&1
rc=$?
check oos-rows "$( { [ $rc -eq 0 ] || [ $rc -eq 3 ]; } && csv_awk 'FNR > 1 && col("kind") == "grid" { g++ } FNR > 1 && col("kind") == "baseline" { b++ }
  FNR > 1 && col("bandwidth_mbit") == "100" && col("bucket_cap_mb") == "25" { calib++ }
  END { exit !(g == 8 && b == 8 && calib == 0) }' "$tmp/oos/o/errors.csv"; echo $?)" \
  "calibration 100,25: exit $rc, want 8 grid and 8 baseline rows, none at 100 Mbit/s cap 25: $(cat "$tmp/oos/o/errors.csv" 2>/dev/null || tail -n 2 "$tmp/oos.log")"
check oos-said "$(grep -q 'neither the calibration.s configuration nor its repeat' "$tmp/oos/o/errors.md" &&
  [ "$(csv_col "$tmp/oos/o/summary.csv" value key=baseline_points)" = 8 ]; echo $?)" "errors.md or summary.csv does not say so"
sed -e 's/^calib,.*/calib,"100,25"/' -e 's/^rates_mbit,.*/rates_mbit,100/' -e 's/^caps_mb,.*/caps_mb,25/' \
  "$grid/summary.csv" >"$tmp/oos/summary.csv"
"$src/scripts/shaped-grid" --bin "$bin" --reuse "$tmp/oos" --out "$tmp/oos/o2" >"$tmp/oos2.log" 2>&1
rc=$?
check oos-only-calib "$([ $rc -eq 2 ] && grep -q 'no point but the calibration' "$tmp/oos2.log"; echo $?)" "exit $rc: $(cat "$tmp/oos2.log")"

# on the committed pinned grid with the floor the model recommends the best measured cap at
# every bandwidth (the step within 5 %: 3 of 3)
timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$(grid_of 20261128_pinned_floor)" --out "$tmp/pf" >"$tmp/pf.log" 2>&1
got=$(csv_col "$tmp/pf/summary.csv" value key=recommended_cap_within_goal)
check rec-cap-pinned "$([ "$got" = "3 of 3" ]; echo $?)" "pinned_floor: recommended cap within 5 % at '$got' (want 3 of 3): $(grep -A6 '^Recommended' "$tmp/pf/errors.md")"

# the grid of the trainer that writes comm_progress,gradient (20261202_ci1_1, CI's grid,
# one run a point): predicted with the ring at the gradients (predict says so), no worse
# than committed (median and worst |error|, 0.05 points of rounding); and with the key taken
# out of the runs, the model before it, which did worse on its worst point (42.0 % against
# 16.7 %: the check that the key is what turns it on).  The model's figures, not new code
# paths: a sanitizer's build, 5x slower, leaves them to the plain build's run of this test
san=$(ldd "$bin" 2>/dev/null | grep -oE 'lib(asan|tsan|ubsan)' | head -n 1)
if [ -n "$san" ]; then
  echo "committed grid's figures not checked: a sanitizer's build ($san)"
else
  g=$(grid_of 20261202_ci1_1)
  d=ci1_1
  timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$g" --out "$tmp/$d" >"$tmp/$d.log" 2>&1
  rc=$?
  m0=$(csv_col "$g/summary.csv" value key=median_abs_error_pct) w0=$(csv_col "$g/summary.csv" value key=worst_abs_error_pct)
  m1=$(csv_col "$tmp/$d/summary.csv" value key=median_abs_error_pct) w1=$(csv_col "$tmp/$d/summary.csv" value key=worst_abs_error_pct)
  check "no-worse-$d" "$(awk -v a="$m0" -v b="$m1" -v c="$w0" -v d="$w1" \
    'BEGIN { exit !(a != "" && b != "" && b <= a + 0.05 && d <= c + 0.05) }'; echo $?)" \
    "$d: median $m1 %, worst $w1 % against $m0 %, $w0 % committed (exit $rc): $(tail -n 1 "$tmp/$d.log")"
  check "ring-said-$d" "$(grep -q 'its threads run at the gradients' "$tmp/$d/work/predict-calib.log"; echo $?)" \
    "$d: predict does not say the ring at the gradients applies: $(grep '^#  comm' "$tmp/$d/work/predict-calib.log")"
  mkdir -p "$tmp/nokey"
  tar -xzf "$g/runs.tar.gz" -C "$tmp/nokey"
  cp "$g/summary.csv" "$tmp/nokey/"
  sed -i '/^comm_progress,/d' "$tmp/nokey"/runs/*/meta.csv
  timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$tmp/nokey" --out "$tmp/nokey/o" >"$tmp/nokey.log" 2>&1
  w2=$(csv_col "$tmp/nokey/o/summary.csv" value key=worst_abs_error_pct)
  check ring-key "$(awk -v a="$w0" -v b="$w2" 'BEGIN { exit !(a != "" && b != "" && b > a + 5) }'; echo $?)" \
    "ci1_1 without comm_progress: worst $w2 %, with it $w0 % (want the model before, worse)"
fi

# the measured step is one figure by either road: predict's config=measured row and, with
# --measure-only, the report's phases.csv rank 0 step p50 (report/FORMULAS.md)
timeout 300 "$src/scripts/shaped-grid" --bin "$bin" --reuse "$grid" --out "$tmp/m" --measure-only \
  >"$tmp/m.log" 2>&1
rc=$?
check measure-only "$([ $rc -eq 0 ]; echo $?)" "--measure-only: exit $rc: $(tail -n 1 "$tmp/m.log")"
check same-measured "$(cmp -s <(csv_col "$e" measured_step_ms) <(csv_col "$tmp/m/errors.csv" measured_step_ms); echo $?)" \
  "predict's measured steps differ from the report's p50: $(paste -d' ' <(csv_col "$e" measured_step_ms) <(csv_col "$tmp/m/errors.csv" measured_step_ms) | tr '\n' ';')"

# --- bad input ---
mkdir "$tmp/empty"
"$src/scripts/shaped-grid" --bin "$bin" --reuse "$tmp/empty" >"$tmp/bad1.log" 2>&1
rc=$?
check not-a-grid "$([ $rc -eq 2 ] && [ "$(wc -l <"$tmp/bad1.log")" -eq 1 ] &&
  grep -q "summary.csv" "$tmp/bad1.log"; echo $?)" "exit $rc: $(cat "$tmp/bad1.log")"
mkdir -p "$tmp/evil/runs" && cp "$grid/summary.csv" "$tmp/evil/" && echo x >"$tmp/x"
tar czf "$tmp/evil/runs.tar.gz" -C "$tmp" --transform 's,^x,runs/../../x,' x
rmdir "$tmp/evil/runs"
"$src/scripts/shaped-grid" --bin "$bin" --reuse "$tmp/evil" --out "$tmp/evil-out" >"$tmp/bad2.log" 2>&1
rc=$?
check evil-archive "$([ $rc -eq 2 ] && grep -q 'not a shaped-grid runs archive' "$tmp/bad2.log"; echo $?)" \
  "exit $rc: $(cat "$tmp/bad2.log")"

check_done
