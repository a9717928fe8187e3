#!/usr/bin/env bash
# test_timelines_valid.sh — every timeline.json the test suite wrote draws in Perfetto as
# written: on each thread lane, slices nested or disjoint (scripts/check-timeline).  The
# report copies each timeline it writes into $DDPPROF_TIMELINE_COLLECT (tests/CMakeLists.txt
# sets it for every test and runs this one after all the others).  Skips (77) when no test
# that writes a timeline ran (a ctest -R selection without them).
set -u
dir=${DDPPROF_TIMELINE_COLLECT:?not set: run through ctest}
shopt -s nullglob
files=("$dir"/timeline.*.json)
if ((${#files[@]} == 0)); then
  echo "SKIP: no timeline was written by the tests that ran (none in $dir)"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "FAIL: python3 is needed for scripts/check-timeline"
  exit 1
fi
echo "checking ${#files[@]} timelines written by the test suite"
"$DDPPROF_SOURCE_DIR/scripts/check-timeline" "${files[@]}" >"$dir/check.log" 2>&1
rc=$?
grep -v ': OK:' "$dir/check.log"
echo "$(grep -c ': OK:' "$dir/check.log") of ${#files[@]} OK"
rm -f "${files[@]}"
exit $rc
