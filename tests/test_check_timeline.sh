#!/usr/bin/env bash
# test_check_timeline.sh — scripts/check-timeline, the Perfetto lane rule that
# scripts/gpu-check applies to the main job's timeline.json: slices on one (pid, tid) lane
# nested or disjoint pass (equal starts, touching ends, B/E pairs, nanosecond fractions),
# a partial overlap fails naming the lane and both slices, and a file that is not a Chrome
# trace is an error of its own (exit 2).  Skips (77) without python3.
set -u
src=${DDPPROF_SOURCE_DIR:-$(dirname "$0")/..}
checker=$src/scripts/check-timeline
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# nested (same start, longer first), disjoint, touching, a B/E pair around X events, and
# two lanes whose slices overlap each other (allowed: different tids)
cat >"$tmp/good.json" <<'EOF'
{"traceEvents":[
 {"ph":"M","pid":1,"name":"process_name","args":{"name":"rank0"}},
 {"ph":"X","pid":1,"tid":1,"name":"step","ts":1000.000,"dur":100.000},
 {"ph":"X","pid":1,"tid":1,"name":"forward","ts":1000.000,"dur":40.000},
 {"ph":"X","pid":1,"tid":1,"name":"backward","ts":1040.000,"dur":50.000},
 {"ph":"X","pid":1,"tid":1,"name":"kernel","ts":1040.001,"dur":0.000},
 {"ph":"X","pid":1,"tid":1,"name":"optimizer","ts":1090.000,"dur":10.000},
 {"ph":"X","pid":1,"tid":2,"name":"allreduce.b0","ts":1050.000,"dur":60.000},
 {"ph":"X","pid":1,"tid":3,"name":"allreduce.b1","ts":1080.000,"dur":25.000},
 {"ph":"B","pid":2,"tid":1,"name":"outer","ts":5.5},
 {"ph":"X","pid":2,"tid":1,"name":"inner","ts":6,"dur":1},
 {"ph":"E","pid":2,"tid":1,"ts":9.25}
]}
EOF
out=$(python3 "$checker" "$tmp/good.json" 2>&1)
rc=$?
check good "$rc" "nested/disjoint lanes rejected (rc $rc): $out"
check good-says "$(echo "$out" | grep -q 'OK: 9 slices on 4 lanes'; echo $?)" "summary: $out"

# two all-reduce rows on one lane, the second starting inside the first and ending after it
# (NCCL host rows of two buckets): the case Perfetto truncates; one nanosecond suffices
cat >"$tmp/bad.json" <<'EOF'
[
 {"ph":"X","pid":100000,"tid":2,"name":"allreduce.b0","ts":2000.000,"dur":50.000},
 {"ph":"X","pid":100000,"tid":2,"name":"allreduce.b1","ts":2010.000,"dur":40.001},
 {"ph":"X","pid":100000,"tid":1,"name":"step","ts":1990.000,"dur":100.000}
]
EOF
out=$(python3 "$checker" "$tmp/bad.json" 2>&1)
rc=$?
check bad "$([ "$rc" -eq 1 ]; echo $?)" "partial overlap passed (rc $rc): $out"
check bad-names "$(echo "$out" | grep -q "pid 100000 tid 2: 'allreduce.b1'.*inside 'allreduce.b0'"; echo $?)" \
  "message lacks lane and slices: $out"

echo '{"foo": 1}' >"$tmp/not.json"
python3 "$checker" "$tmp/not.json" >/dev/null 2>&1
rc=$?
check not-a-trace "$([ "$rc" -eq 2 ]; echo $?)" "a non-trace gave rc $rc"
python3 "$checker" "$tmp/good.json" "$tmp/bad.json" >/dev/null 2>&1
rc=$?
check worst-of-files "$([ "$rc" -eq 1 ]; echo $?)" "good + bad gave rc $rc"

check_done
