#!/usr/bin/env bash
# test_nsys_profile_stop.sh — scripts/nsys-profile stops what it started: with a fake nsys
# that behaves as Debian's nsys 2022.4 did with CPU sampling (`nsys profile` never returns
# and ignores SIGTERM; the agent it starts sits in a session of its own, ignores SIGTERM
# and never exits), the time limit, SIGINT and SIGTERM must each end the script promptly
# with its message and exit status, and leave nothing running: no fake nsys, no fake
# agent (each carries this test's unique marker in its command line), no ddpprof of the
# run.  Without nsys at all it must say how to get one and exit 2.  Needs no nsys.
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${DDPPROF_BUILD_DIR:-$src/build}
export DDPPROF=${DDPPROF:-$build/ddpprof}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-nsysstop.XXXXXX")
marker=ddpprof-fake-nsys-$$-$RANDOM
cleanup() {
  pkill -KILL -f -- "$marker" 2>/dev/null
  pkill -KILL -f -- "$work" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/check.sh"

mkdir -p "$work/bin"
cat >"$work/bin/nsys" <<EOF
#!/usr/bin/env bash
# fake nsys: lists nvtxsum; 'profile' starts an agent in its own session, then hangs
case \$1 in
stats) echo "  nvtxsum -- NVTX Range Summary"; exit 0 ;;
profile)
  setsid bash -c 'trap "" TERM INT; exec -a "$marker-agent" sleep 1000' </dev/null >/dev/null 2>&1 &
  trap "" TERM INT
  bash -c 'trap "" TERM INT; exec -a "$marker-profile" sleep 1000' &
  while :; do wait; done ;;
esac
exit 1
EOF
chmod +x "$work/bin/nsys"
export NSYS=$work/bin/nsys PATH=$work/bin:$PATH
job=(--cpu 2 --epochs 1 --limit 128 --test-limit 32 --threads 1 --quiet)

# left NAME: nothing of the run may be left running
left() {
  local rest
  rest=$(pgrep -af -- "$marker"; pgrep -af -- "$work/out" | grep -v pgrep)
  check "$1-nothing-left" "$([ -z "$rest" ]; echo $?)" "still running after the script ended: $rest"
}

# 1. the time limit
t0=$SECONDS
timeout 60 "$src/scripts/nsys-profile" --time-limit 3 "$work/out" "${job[@]}" >"$work/limit.log" 2>&1
rc=$?
took=$((SECONDS - t0))
echo "time limit 3 s: exit $rc after $took s"
check limit-status "$([ $rc -eq 124 ]; echo $?)" "exit status $rc, want 124: $(tail -n 3 "$work/limit.log")"
check limit-message "$(grep -q 'time limit of 3 s reached (--time-limit): stopped the job, nsys and its agents' "$work/limit.log"; echo $?)" \
  "no time-limit message: $(tail -n 3 "$work/limit.log")"
# 3 s limit + 5 s before SIGKILL + the job's start: 20 s is a wide margin
check limit-prompt "$([ $took -le 20 ]; echo $?)" "took $took s with --time-limit 3"
left limit

# 2. SIGINT and SIGTERM to the script while the fake agent runs (job control: a background
# job of a non-interactive shell would otherwise ignore SIGINT)
set -m
for sig in INT TERM; do
  rm -rf "$work/out"
  "$src/scripts/nsys-profile" --time-limit 50 "$work/out" "${job[@]}" >"$work/$sig.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 200; i++)); do
    pgrep -f -- "$marker-agent" >/dev/null && break
    sleep 0.1
  done
  t0=$SECONDS
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  took=$((SECONDS - t0))
  echo "SIG$sig: exit $rc $took s after the signal"
  want=$([ $sig = INT ] && echo 130 || echo 143)
  check "$sig-status" "$([ $rc -eq "$want" ]; echo $?)" "exit status $rc, want $want: $(tail -n 3 "$work/$sig.log")"
  check "$sig-message" "$(grep -q "interrupted (SIG$sig): stopped the job, nsys and its agents" "$work/$sig.log"; echo $?)" \
    "no message: $(tail -n 3 "$work/$sig.log")"
  check "$sig-prompt" "$([ $took -le 15 ]; echo $?)" "took $took s to stop after SIG$sig"
  left "$sig"
done
set +m

# 3. no nsys: say how to get one, exit 2
PATH=${PATH#"$work/bin:"} NSYS=$work/none/nsys "$src/scripts/nsys-profile" "$work/out" "${job[@]}" >"$work/none.log" 2>&1
rc=$?
check none-status "$([ $rc -eq 2 ]; echo $?)" "exit status $rc, want 2"
check none-message "$(grep -q 'scripts/setup-nsys' "$work/none.log"; echo $?)" \
  "does not say how to get nsys: $(cat "$work/none.log")"

check_done
