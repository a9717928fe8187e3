#!/usr/bin/env bash
# test_cli_worker_argv.sh — an option reaches a worker as the user wrote it (cli.h,
# cli_child_argv): each training process is started under DDPPROF_WORKER_WRAPPER, a script
# that records its command line, and
#   1. `ddpprof train`'s workers get train's words as given (-e, 0.0500, 30.50, not
#      --epochs, 0.05, 30.5), less the rendezvous (in their environment), then --out;
#   2. the main job's baseline `train` gets the user's words less the main job's devices,
#      then --mode baseline, its --out and its one device; its DDP workers the user's words
#      then --mode ddp and the DDP run's --out;
# and the runs are the runs those words ask for (meta.csv).
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddpprof-test-worker-argv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

cat >"$tmp/record" <<EOF
#!/bin/sh
prog=\$1 # the program (its path as /proc/self/exe resolves it): not recorded
shift
printf '%s\n' "\$*" >>"$tmp/argv.log"
exec "\$prog" "\$@"
EOF
chmod +x "$tmp/record"
export DDPPROF_WORKER_WRAPPER=$tmp/record
meta() { sed -n "s/^$2,//p" "$1/meta.csv"; } # meta DIR KEY

words=(--dataset synthetic --limit 64 --test-limit 16 -e 1 -b 16 --lr 0.0500 --timeout 30.50
  --threads 1 --quiet)

# 1. train -> worker
"$bin" train --cpu 2 "${words[@]}" --master-addr 127.0.0.1 --out "$tmp/t" >"$tmp/t.log" 2>&1
check "train exit" $? "$(tail -n 3 "$tmp/t.log")"
want="worker --cpu 2 ${words[*]} --out $tmp/t"
check "train: two workers" "$([ "$(grep -c "^worker " "$tmp/argv.log")" -eq 2 ]; echo $?)" \
  "$(cat "$tmp/argv.log")"
while read -r line; do check_eq "a worker's command line" "$line" "$want"; done <"$tmp/argv.log"
check_eq "train: world_size" "$(meta "$tmp/t" world_size)" 2
check_eq "train: lr" "$(meta "$tmp/t" lr)" 0.05
check_eq "train: batch_size" "$(meta "$tmp/t" batch_size)" 16

# 2. the main job -> its baseline's train, and its DDP run's workers (through train)
rm -f "$tmp/argv.log"
"$bin" --cpu 2 "${words[@]}" --out "$tmp/m" >"$tmp/m.log" 2>&1
check "main job exit" $? "$(tail -n 3 "$tmp/m.log")"
check_eq "the baseline's train" "$(grep "^train " "$tmp/argv.log")" \
  "train ${words[*]} --mode baseline --out $tmp/m/baseline --cpu 1"
grep "^worker " "$tmp/argv.log" >"$tmp/workers"
check "main job: two workers" "$([ "$(wc -l <"$tmp/workers")" -eq 2 ]; echo $?)" \
  "$(cat "$tmp/argv.log")"
while read -r line; do
  check_eq "a DDP run's worker" "$line" "worker --cpu 2 ${words[*]} --mode ddp --out $tmp/m/ddp"
done <"$tmp/workers"
check_eq "main job: the baseline's world" "$(meta "$tmp/m/baseline" world_size)" 1
check_eq "main job: the baseline's amp" "$(meta "$tmp/m/baseline" amp)" off
check_eq "main job: the DDP run's world" "$(meta "$tmp/m/ddp" world_size)" 2
check_eq "main job: the DDP run's amp" "$(meta "$tmp/m/ddp" amp)" fp16
check_eq "main job: the DDP run's epochs" "$(meta "$tmp/m/ddp" epochs)" 1

check_done
