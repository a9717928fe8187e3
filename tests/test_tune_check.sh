#!/usr/bin/env bash
# test_tune_check.sh — scripts/tune-check (issue 38 §4: `ddpprof tune`'s pick against the
# exhaustive grid of its candidates' compatible combinations), shortened to what 2 cores
# run in seconds (3 rounds of 5 steps, three candidates, two of them one setting: 6
# configurations):
#  1. it runs tune and the grid and exits 0 or 3 (the goal met or missed: either may be
#     right on a noisy machine), never 1, 2 or 124;
#  2. grid.csv holds every compatible combination once (given, each candidate, the two
#     compatible pairs), each with 3 per-round steps whose median is its step_ms and whose
#     smallest and largest are low_ms and high_ms; exactly one row is the grid's best (the
#     least step) and one tune's pick;
#  3. summary.csv's off_pct is (the pick's step - the best's) / the best's, and goal_met
#     says whether it is within --goal;
#  4. two candidates that set one setting (two bucket caps) are never combined: the grid
#     has no row of both;
#  5. bad input: --rounds 2 (fewer than 3 rounds) is refused in one line with exit 2.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
src=${DDPPROF_SOURCE_DIR:?DDPPROF_SOURCE_DIR must point at the source tree}
command -v python3 >/dev/null || { echo "skipped: scripts/tune-check needs python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
tc=("$src/scripts/tune-check" --bin "$bin" --rounds 3 --tune-steps 5 --time-limit 240)
config='--cpu 2 --threads 1 --dataset synthetic --batch-size 8'

# --- 1-4: two compatible candidates and a third clashing with one of them ---
timeout 300 "${tc[@]}" --out "$tmp/a" --config "$config" \
  --candidates 'nosync=--no-sync-bn;cap=--bucket-cap-mb 0.02;cap2=--bucket-cap-mb 0.0001' \
  >"$tmp/a.log" 2>&1 </dev/null
rc=$?
check exit "$([ $rc -eq 0 ] || [ $rc -eq 3 ]; echo $?)" "exit $rc, want 0 or 3: $(tail -n 3 "$tmp/a.log")"
if [ ! -s "$tmp/a/grid.csv" ] || [ ! -s "$tmp/a/summary.csv" ]; then
  bad "no grid.csv or summary.csv in $tmp/a: $(tail -n 3 "$tmp/a.log")"
  check_done
  exit
fi
python3 - "$tmp/a" >"$tmp/py.log" 2>&1 <<'EOF'
import csv, statistics, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/grid.csv")))
summ = {r["key"]: r["value"] for r in csv.DictReader(open(f"{d}/summary.csv"))}
fails = []
names = sorted(r["configuration"] for r in rows)
# given, nosync, cap, cap2, nosync+cap, nosync+cap2: cap and cap2 set one setting
want = sorted(["given", "nosync", "cap", "cap2", "nosync+cap", "nosync+cap2"])
if names != want:
    fails.append(f"configurations {names}, want {want}")
for r in rows:
    ms = [float(x) for x in r["rounds_ms"].split()]
    if len(ms) != 3:
        fails.append(f"{r['configuration']}: {len(ms)} rounds, want 3")
        continue
    s = sorted(ms)
    if abs(float(r["step_ms"]) - s[1]) > 0.0015 or abs(float(r["low_ms"]) - s[0]) > 0.0015 \
            or abs(float(r["high_ms"]) - s[2]) > 0.0015:
        fails.append(f"{r['configuration']}: step/low/high {r['step_ms']} {r['low_ms']} "
                     f"{r['high_ms']} against its rounds {ms}")
best = [r for r in rows if r["best"] == "1"]
pick = [r for r in rows if r["pick"] == "1"]
if len(best) != 1 or len(pick) != 1:
    fails.append(f"{len(best)} best rows and {len(pick)} pick rows, want 1 and 1")
else:
    least = min(float(r["step_ms"]) for r in rows)
    if float(best[0]["step_ms"]) != least:
        fails.append(f"best {best[0]['configuration']} {best[0]['step_ms']}, least {least}")
    off = 100 * (float(pick[0]["step_ms"]) - least) / least
    if abs(off - float(summ["off_pct"])) > 0.02:
        fails.append(f"off_pct {summ['off_pct']}, want {off:.2f}")
    met = off <= float(summ["goal_pct"]) + 1e-9
    if summ["goal_met"] != str(int(met)):
        fails.append(f"goal_met {summ['goal_met']} with off {off:.2f} % against "
                     f"{summ['goal_pct']}")
for f in fails:
    print("FAIL", f)
print(f"{len(rows)} configurations; pick {pick[0]['configuration'] if pick else '?'}, "
      f"off {summ.get('off_pct')} %")
sys.exit(1 if fails else 0)
EOF
check grid "$?" "$(cat "$tmp/py.log")"
echo "tune-check: $(tail -n 1 "$tmp/py.log")"

# --- 5: bad input ---
"${tc[@]}" --rounds 2 --out "$tmp/b" >"$tmp/b.log" 2>&1 </dev/null
rc=$?
check_eq "--rounds 2: exit" "$rc" 2
check "--rounds 2: one line" "$([ "$(grep -c . "$tmp/b.log")" -le 2 ]; echo $?)" "$(cat "$tmp/b.log")"
check_done
