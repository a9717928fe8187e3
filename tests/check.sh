# check.sh — the shell tests' verdicts, sourced by them (after `set -u`):
#   check NAME STATUS MESSAGE   one check: STATUS 0 passes; else it fails, saying
#                               "FAIL NAME: MESSAGE"
#   ok / bad MESSAGE...         one check the test judged itself: passed, or failed saying
#                               "FAIL MESSAGE"
#   check_run WHAT COMMAND...   one check: the command's exit status is the verdict ("FAIL
#                               WHAT" when it fails)
#   check_eval EXPR MESSAGE     one check: `eval EXPR`'s status is the verdict
#   check_eq WHAT GOT WANT      one check: GOT is WANT (else "FAIL WHAT: 'GOT', want 'WANT'")
#   check_done                  the counts; non-zero when a check failed (the test's last
#                               command, so its exit status)
passed=0 failed=0
check() {
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $1: $3"; fi
}
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check_run() {
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; fi
}
check_eval() { if eval "$1"; then ok; else bad "$2"; fi; }
check_eq() { if [ "$2" = "$3" ]; then ok; else bad "$1: '$2', want '$3'"; fi; }
check_done() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
