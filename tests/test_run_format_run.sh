#!/usr/bin/env bash
# test_run_format_run.sh — a run writes meta.csv as probes/run_format.h says: a 2-rank DDP
# run and a baseline (CPU ranks, --trace full, a few steps) each write only keys of the
# format, and every key the format says such a run writes (test_run_format --check); and the
# report reads both without a word about meta.csv (no unknown or malformed key).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
check=${DDPPROF_BUILD_DIR:?DDPPROF_BUILD_DIR must point at the build}/tests/test_run_format
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
tiny=(--cpu 2 --model convnet --dataset synthetic --limit 128 --test-limit 32 --batch-size 16
      --epochs 1 --trace full --quiet)
if ! timeout 300 "$bin" "${tiny[@]}" --out "$tmp/job" >"$tmp/out" 2>"$tmp/err" </dev/null; then
  echo "FAIL the main job:"; tail -5 "$tmp/err"; exit 1
fi
for run in baseline ddp; do
  if "$check" --check "$tmp/job/$run" >"$tmp/check.$run" 2>&1; then
    ok
  else
    bad "$run/meta.csv against probes/run_format.h:"; sed 's/^/  | /' "$tmp/check.$run"
  fi
done
if "$bin" report "$tmp/job" --out "$tmp/rep" >/dev/null 2>"$tmp/rep.err"; then
  if grep -q "meta.csv" "$tmp/rep.err"; then
    bad "the report warns about meta.csv: $(grep meta.csv "$tmp/rep.err" | head -3)"
  else
    ok
  fi
else
  bad "report failed: $(cat "$tmp/rep.err")"
fi
check_done
