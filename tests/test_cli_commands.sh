#!/usr/bin/env bash
# test_cli_commands.sh — one option parser (common/options.h) for every command: the main
# job, train, worker, tune, report, diff and predict each say an unknown option, a missing
# value and a bad number in the same one line (named for the command where it has its own
# --help), exit non-zero, and list in --help, in the same layout, options their parser
# takes.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-cli-commands.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

# expect_line NAME WANT ARGS...: exit != 0 and stderr is exactly the one line WANT
expect_line() {
  local name=$1 want=$2
  shift 2
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && [ "$(cat "$tmp/err")" = "$want" ]; then
    ok
  else
    bad "$name: exit $rc, stderr '$(cat "$tmp/err")', want one line '$want'"
  fi
}

# the trainer's commands share one --help (ddpprof --help); the report's have their own
for cmd in main train worker tune report diff predict; do
  case $cmd in
  main) args=() pre="" see="ddpprof" num=--epochs range="[1, 1000000]" ;;
  train | worker | tune) args=("$cmd") pre="" see="ddpprof" num=--epochs range="[1, 1000000]" ;;
  *) args=("$cmd") pre="$cmd: " see="ddpprof $cmd" num=--warmup-steps range="[0, 1000000]" ;;
  esac
  expect_line "$cmd unknown option" "ddpprof: ${pre}unknown option '--bogus' (see $see --help)" \
    "${args[@]}" --bogus x
  expect_line "$cmd missing value" "ddpprof: ${pre}--out needs a value (see $see --help)" \
    "${args[@]}" --out
  expect_line "$cmd bad number" "ddpprof: ${pre}$num: '3x' is not an integer in $range" \
    "${args[@]}" "$num" 3x
  case $cmd in # a list's item
  predict)
    expect_line "$cmd bad item" \
      "ddpprof: predict: --world: 'x' is not a whole rank count in [1, 65536]" \
      "${args[@]}" --world 2,x
    ;;
  report | diff) ;;
  *) expect_line "$cmd bad item" "ddpprof: --gpu: 'x' is not an integer in [0, 1023]" \
    "${args[@]}" --gpu 0,x ;;
  esac
done
for cmd in report diff; do # a choice
  expect_line "$cmd bad choice" "ddpprof: $cmd: --timeline: 'all' is not steps or full" \
    "$cmd" --timeline all
done
expect_line "predict bad choice" "ddpprof: predict: --amp: 'fp32' is not fp16, bf16 or off" \
  predict --amp off,fp32

# --help: the usage on stdout, exit 0, each option on a line of its own in the parser's
# layout ("  -e, --epochs N"), and every option it lists is one the command takes: followed
# by two unknown words (the second is one even when the first is the option's value), the
# parser stops at those, not at it, and nothing runs
for cmd in report diff predict train; do
  if "$bin" "$cmd" --help >"$tmp/help" 2>"$tmp/err" && [ ! -s "$tmp/err" ] &&
    head -n 1 "$tmp/help" | grep -q "^usage: ddpprof"; then
    ok
  else
    bad "$cmd --help: exit status, stderr '$(cat "$tmp/err")' or no usage line"
  fi
  sed -n 's/^  \(-[a-z], \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p' "$tmp/help" | sort -u >"$tmp/names"
  n=$(wc -l <"$tmp/names")
  check "$cmd --help options" \
    "$([ "$n" -ge 5 ] && grep -qx -- --out "$tmp/names" && grep -qx -- --help "$tmp/names"; echo $?)" \
    "$n options listed: $(tr '\n' ' ' <"$tmp/names")"
  # the trainer's --help is the main job's, train's, worker's and tune's: one of them
  takers=("$cmd")
  [ "$cmd" = train ] && takers=(train "" tune)
  unknown=""
  while read -r name; do
    known=0
    for t in "${takers[@]}"; do
      "$bin" $t "$name" --bogus --bogus >/dev/null 2>"$tmp/err" </dev/null
      grep -qF "unknown option '$name'" "$tmp/err" || known=1
    done
    [ $known -eq 1 ] || unknown="$unknown $name"
  done <"$tmp/names"
  check "$cmd --help lists what it takes" "$([ -z "$unknown" ]; echo $?)" "unknown to $cmd:$unknown"
done
# the report's tables, as the parser prints an option: name, metavar or choices, help, default
"$bin" report --help >"$tmp/help"
check_run "report --help: --timeline's choices" \
  grep -qE "^  --timeline steps\|full +timeline.json" "$tmp/help"
# (the help is wrapped at 90 columns: read as one line)
check_run "report --help: --warmup-steps' default" \
  grep -q "(default: until the step time settles" <(tr -s '\n ' '  ' <"$tmp/help")
"$bin" predict --help >"$tmp/help"
check_run "predict --help: --amp's choices" \
  grep -qE "^  --amp fp16\|bf16\|off +precision" "$tmp/help"
check_run "predict --help: --out's default" \
  grep -q "where predict.csv goes (default: RUN_DIR)" "$tmp/help"

check_done
