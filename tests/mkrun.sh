# tests/mkrun.sh — fabricated ddpprof run directories whose every figure is known, for the
# report's tests (sourced by test_report_advice.sh and test_report_verdict.sh): one
# generator, so the runs the verdict and the advice are judged on are laid out alike.
# mkrun DIR MODE WORLD [key=value...]: 10 steps per rank, times in ms.
#   data fwd bwd opt   the phases of every step, back to back (default 1, 40, 50, 2)
#   ar arh             the bucket all-reduce: ar ms long, its first arh ms under the last
#                      backward (default 4, 4: hidden); a rank whose backward ended
#                      earlier waits in it for the others
#   ag                 an all-gather (comm.allgather) at the start of forward, inside it
#   slow               rank 1's backward is slow ms longer (a steady straggler)
#   jitter             rank (step mod 2)'s backward is jitter ms longer (no steady one)
#   nb                 nb > 1: nb buckets instead, back to back from 5 ms into backward,
#                      bucket b ar + (b mod 2) x 0.1 ms long and 150000 + (b mod 2) x 100000
#                      bytes (each its own bucket at the cap of 0.1 MB meta.csv says)
#   batch images       meta batch_size (default 32); images per step (default batch x world)
#   meta               extra meta.csv lines, separated by ';'
#   steps              steps per rank (default 10)
#   sbn                SyncBatchNorm's all-reduces (comm.allreduce): one in the middle of
#                      forward and one in the middle of backward, sbn ms each (the
#                      transfer: every rank's row when no rank is late), each phase sbn
#                      ms longer
#   late lms           late="STEP:RANK ...": in each STEP, RANK comes lms ms (default 10)
#                      late to forward's all-reduce (it lost its core: under load), the
#                      others wait for it in there; every rank's forward is lms ms longer
#                      (needs sbn > 0)
mkrun() {
  local dir=$1 mode=$2 world=$3
  shift 3
  local data=1 fwd=40 bwd=50 opt=2 ar=4 arh=4 ag=0 slow=0 jitter=0 batch=32 images='' meta='' device=cpu amp=off nb=1
  local steps=10 sbn=0 late='' lms=10
  local kv
  for kv in "$@"; do local "${kv?}"; done
  [ -n "$images" ] || images=$((batch * world))
  mkdir -p "$dir"
  {
    printf 'key,value\nmode,%s\nworld_size,%s\nepochs,1\ndevice,%s\namp,%s\nbatch_size,%s\n' \
      "$mode" "$world" "$device" "$amp" "$batch"
    printf 'host_cores,2\nlocal_world_size,%s\nsync_bn,1\nwall_s,2\nsteps,%s\n' "$world" "$steps"
    if [ "$world" -gt 1 ] && [ "$nb" -gt 1 ]; then
      printf 'bucket_cap_mb,0.1\nbuckets,%s\n' "$nb"
      for ((b = 0; b < nb; b++)); do printf 'bucket.%d.params,1\nbucket.%d.bytes,%d\n' $b $b $((150000 + b % 2 * 100000)); done
    elif [ "$world" -gt 1 ]; then
      printf 'bucket_cap_mb,25\nbuckets,1\nbucket.0.params,8\nbucket.0.bytes,400000\n'
    fi
    [ -n "$meta" ] && echo "$meta" | tr ';' '\n'
  } >"$dir/meta.csv"
  {
    echo "step,epoch,loss,loss_scale,lr,images,found_inf"
    for ((s = 1; s <= steps; s++)); do echo "$s,1,2.3,1,0.01,$images,0"; done
  } >"$dir/metrics.csv"
  awk -v dir="$dir" -v world="$world" -v data="$data" -v fwd="$fwd" -v bwd="$bwd" \
      -v opt="$opt" -v ar="$ar" -v arh="$arh" -v ag="$ag" -v slow="$slow" -v jitter="$jitter" -v nb="$nb" \
      -v steps="$steps" -v sbn="$sbn" -v late="$late" -v lms="$lms" '
    function ns(ms) { return sprintf("%d", ms * 1000000) }
    function row(r, s, phase, bucket, a, b, bytes) {
      printf "%d,%d,1,%s,%d,host,%s,%s,%d,%s,range,0\n", r, s, phase, bucket, ns(a), ns(b), bytes, phase > (dir "/rank" r ".trace.csv")
    }
    BEGIN {
      for (r = 0; r < world; r++)
        print "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream" > (dir "/rank" r ".trace.csv")
      nl = split(late, lv, " ")
      for (k = 1; k <= nl; k++) { split(lv[k], sr, ":"); late_rank[sr[1] + 0] = sr[2] + 0 }
      t = 10
      for (s = 1; s <= steps; s++) {
        lr = (sbn > 0 && (s in late_rank)) ? late_rank[s] : -1
        fwde = fwd + (sbn > 0 ? sbn + (lr >= 0 ? lms : 0) : 0); bwde = bwd + (sbn > 0 ? sbn : 0)
        last = 0
        for (r = 0; r < world; r++) {
          extra = (r == 1 ? slow : 0) + (r == s % 2 ? jitter : 0)
          b1[r] = t + data + fwde + bwde + extra
          if (b1[r] > last) last = b1[r]
        }
        end = 0
        for (r = 0; r < world; r++) {
          f0 = t + data; b0 = f0 + fwde
          row(r, s, "data", -1, t, f0, 0)
          row(r, s, "forward", -1, f0, b0, 0)
          if (ag > 0) row(r, s, "comm.allgather", -1, f0, f0 + ag, 256)
          if (sbn > 0) {
            ce = f0 + fwd / 2 + (lr >= 0 ? lms : 0) + sbn
            row(r, s, "comm.allreduce", -1, f0 + fwd / 2 + (r == lr ? lms : 0), ce, 512)
            row(r, s, "comm.allreduce", -1, b0 + bwd / 2, b0 + bwd / 2 + sbn, 512)
          }
          row(r, s, "backward", -1, b0, b1[r], 0)
          if (world > 1 && nb > 1) {
            ae = b0 + 5
            for (b = 0; b < nb; b++) {
              row(r, s, "allreduce", b, ae, ae + ar + (b % 2) * 0.1, 150000 + (b % 2) * 100000)
              ae += ar + (b % 2) * 0.1
            }
          } else if (world > 1) {
            as = b1[r] - arh; ae = last - arh + ar
            row(r, s, "allreduce", 0, as, ae, 400000)
          } else ae = b1[r]
          o0 = (ae > b1[r] ? ae : b1[r])
          row(r, s, "optimizer", -1, o0, o0 + opt, 0)
          row(r, s, "step", -1, t, o0 + opt, 0)
          if (o0 + opt > end) end = o0 + opt
        }
        t = end + 0.5
      }
    }'
}
