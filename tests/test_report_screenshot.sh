#!/usr/bin/env bash
# test_report_screenshot.sh — report.html renders in headless Chromium without a network:
# a synthetic 2-rank run goes through `ddpprof report`, scripts/report-screenshot takes a
# PNG, and the PNG must be much larger than a blank page's (which compresses to almost
# nothing), i.e. the charts and tables drew.  Skips (77) without chromium.
set -euo pipefail
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
ddpprof=${DDPPROF:-$build/ddpprof}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-shot.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$build/ddpprof-bench-report" gen "$work/run" 2 400
"$ddpprof" report "$work/run" >/dev/null
rc=0
"$src/scripts/report-screenshot" "$work/run" "$work/report.png" 1200x1600 >/dev/null || rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: report-screenshot exited $rc"; exit 1; }
printf '<!DOCTYPE html><html><body></body></html>' >"$work/blank.html"
"$src/scripts/report-screenshot" "$work/blank.html" "$work/blank.png" 1200x1600 >/dev/null
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
