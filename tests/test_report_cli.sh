#!/usr/bin/env bash
# test_report_cli.sh — `ddpprof report` from the command line: --help, an unknown option, no
# input, a file that is not a trace, a cut trace (a warning and a report), trace files and a
# trace directory, --kineto; every error is one line on stderr and a non-zero exit.
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fix=$src/tests/fixtures/pytorch
. "$(dirname "$0")/check.sh"
bad_err() { bad "$@"; sed 's/^/  | /' "$tmp/err"; } # a failure, with the command's stderr

# expect_error NAME PATTERN ARGS...: exit != 0, exactly one stderr line matching PATTERN
expect_error() {
  local name=$1 pattern=$2; shift 2
  "$bin" report "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qE -- "$pattern" "$tmp/err"; then
    ok
  else
    bad_err "$name: exit $rc, wanted one stderr line /$pattern/"
  fi
}

"$bin" report --help >"$tmp/out" 2>"$tmp/err" && grep -q -- "--kineto" "$tmp/out" && ok ||
  bad_err "--help: exit 0 and the usage with --kineto"
expect_error "unknown option" "unknown option '--bogus'" --bogus "$fix/kineto-2hosts"
expect_error "no input" "no run directory or trace given"
printf 'not json at all' >"$tmp/bad.json"
expect_error "not JSON" "bad.json: not valid JSON at byte" "$tmp/bad.json"
expect_error "missing file" "nope.json: no such run directory or trace file" "$tmp/nope.json"

# a cut trace: a warning, a report, exit 0
head -c 40000 "$fix/kineto-2hosts/hostA_1001.1700000000123.pt.trace.json" >"$tmp/cut.json"
if "$bin" report "$tmp/cut.json" --out "$tmp/cut" >"$tmp/out" 2>"$tmp/err" &&
  grep -q "cut short" "$tmp/err" && [ -s "$tmp/cut/phases.csv" ]; then ok; else bad_err "cut trace"; fi

# files, a directory and --kineto of a ddpprof run written by the bench generator
"$DDPPROF_BUILD_DIR/ddpprof-bench-report" gen "$tmp/run" 2 160 >/dev/null
if "$bin" report "$tmp/run" "$fix/kineto-2hosts" "$fix/legacy-gloo-2ranks"/*.gz --kineto \
  --out "$tmp/all" >"$tmp/out" 2>"$tmp/err" &&
  [ "$(grep -c '' "$tmp/all/speedup.csv")" -eq 4 ] &&
  [ -s "$tmp/all/kineto/run/ddpprof_1.pt.trace.json" ] && grep -q "Kineto JSON: 2 rank" "$tmp/out"; then
  ok
else
  bad_err "mixed inputs with --kineto: $(cat "$tmp/all/speedup.csv" 2>/dev/null)"
fi

check_done
