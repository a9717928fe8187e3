#!/usr/bin/env bash
# test_report_screenshot.sh — report.html renders in headless Chromium without a network:
# a synthetic 2-rank run and the Kineto fixture (4 ranks on two hosts) go through
# `ddpprof report` together, the page must hold the representative-step drawings of both
# runs (median and slowest step of each, every rank a row, a lane per bucket), and
# scripts/report-screenshot takes a PNG that must be much larger than a blank page's (which
# compresses to almost nothing), i.e. the charts, drawings and tables drew.  Skips (77)
# without chromium, except in CI (DDPPROF_CI=1, set by .ci/run, which installs it).
set -euo pipefail
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
ddpprof=${DDPPROF:-$build/ddpprof}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-shot.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$build/ddpprof-bench-report" gen "$work/run" 2 400
"$ddpprof" report "$work/run" "$src/tests/fixtures/pytorch/kineto-2hosts" --out "$work/out" \
  >/dev/null
html=$work/out/report.html
drawings=$(grep -c 'class="stepview"' "$html" || true)
# the synthetic run's steps differ (median != slowest): 2 drawings; the fixture's are all
# 18 ms, median step 2 and the last of the equal ones as slowest: 2 more
if [ "$drawings" -ne 4 ]; then
  echo "FAIL: report.html has $drawings step drawings, want 4 (median and slowest of 2 runs)"
  exit 1
fi
for want in "run: median step" "kineto-2hosts: slowest step" "rank 3 bucket 2 all-reduce"; do
  grep -q "$want" "$html" || { echo "FAIL: report.html lacks '$want'"; exit 1; }
done
rc=0
"$src/scripts/report-screenshot" "$html" "$work/report.png" 1200x3200 >/dev/null || rc=$?
if [ $rc -eq 77 ]; then
  if [ "${DDPPROF_CI:-}" = 1 ]; then
    echo "FAIL: chromium is missing in CI (.ci/run installs Debian's chromium)"
    exit 1
  fi
  exit 77
fi
[ $rc -eq 0 ] || { echo "FAIL: report-screenshot exited $rc"; exit 1; }
printf '<!DOCTYPE html><html><body></body></html>' >"$work/blank.html"
"$src/scripts/report-screenshot" "$work/blank.html" "$work/blank.png" 1200x3200 >/dev/null
page=$(stat -c %s "$work/report.png")
blank=$(stat -c %s "$work/blank.png")
echo "report.png $page bytes, blank page $blank bytes"
# a drawn page (text, bars, tables) compresses far worse than a blank one: 5x is a wide
# margin (measured: about 20x)
if [ "$page" -lt $((blank * 5)) ]; then
  echo "FAIL: report.png ($page bytes) is not much larger than a blank page ($blank bytes)"
  exit 1
fi
echo "ok"
