#!/usr/bin/env bash
# test_report_layers.sh — layers.csv's figures on fabricated runs, where every value is
# known (report/FORMULAS.md "layers.csv").  A 1-rank run of 5 steps with two layers:
#   conv_a  2 MFLOP forward, 4 MFLOP backward, 100 kB / 200 kB; forward 50 ms in step 1
#           (the warm-up, left out), then 1, 2, 3, 100 ms; backward 4 ms: the medians are
#           2 ms (nearest rank of 4) and 4 ms; 6 MFLOP in 6 ms = 1 GFLOP/s, 300 kB in
#           6 ms = 0.05 GB/s, intensity 20 FLOP/B: right of the ridge (peak 10 GFLOP/s,
#           2 GB/s: 5 FLOP/B), compute-bound, roofline 10 GFLOP/s, 10 % of it
#   relu_b  1000 + 1000 FLOP, 8 kB + 12 kB, 0.5 ms each way: 0.002 GFLOP/s, 0.02 GB/s,
#           intensity 0.1, memory-bound, roofline 0.2 GFLOP/s (1 %)
# and a row named by no layer, which is ignored.  A second run's rank has `device` rows of
# conv_a as well (0.25 ms): they are the ones used for it (clock device); relu_b, without
# any, keeps its host rows.  A run without layer rows writes no layers.csv.
set -u
. "$(dirname "$0")/csvcol.sh"
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
run() { # run DIR DEVICE(0|1) LAYERS(0|1)
  local dir=$1 device=$2 layers=$3 ms=1000000
  mkdir -p "$dir"
  {
    printf 'key,value\nmode,baseline\nworld_size,1\nepochs,1\ndevice,cpu\nwall_s,2\n'
    if [ "$layers" = 1 ]; then
      printf 'layers,2\nlayer.0.name,conv_a\nlayer.0.type,conv\nlayer.0.param_bytes,100\n'
      printf 'layer.0.flops_forward,2000000\nlayer.0.flops_backward,4000000\n'
      printf 'layer.0.bytes_forward,100000\nlayer.0.bytes_backward,200000\n'
      printf 'layer.1.name,relu_b\nlayer.1.type,relu\nlayer.1.param_bytes,0\n'
      printf 'layer.1.flops_forward,1000\nlayer.1.flops_backward,1000\n'
      printf 'layer.1.bytes_forward,8000\nlayer.1.bytes_backward,12000\n'
      printf 'peak_gflops,10\npeak_gbps,2\npeak_source,fabricated\n'
    fi
  } >"$dir/meta.csv"
  {
    echo "step,epoch,loss,loss_scale,lr,images,found_inf"
    for s in 1 2 3 4 5; do echo "$s,1,2.3,1,0.01,32,0"; done
  } >"$dir/metrics.csv"
  {
    echo "rank,step,epoch,phase,bucket,clock,start_ns,end_ns,bytes,name,kind,stream"
    local t=0 s f
    for s in 1 2 3 4 5; do
      case $s in 1) f=50 ;; 2) f=1 ;; 3) f=2 ;; 4) f=3 ;; 5) f=100 ;; esac
      local a=$((t + ms)) # forward: conv_a, relu_b
      if [ "$layers" = 1 ]; then
        echo "0,$s,1,layer.forward,-1,host,$a,$((a + f * ms)),100,conv_a,range,0"
        echo "0,$s,1,layer.forward,-1,host,$((a + f * ms)),$((a + f * ms + ms / 2)),0,relu_b,range,0"
        echo "0,$s,1,layer.forward,-1,host,$a,$((a + 7 * ms)),0,not_a_layer,range,0"
        [ "$device" = 1 ] && echo "0,$s,1,layer.forward,-1,device,$a,$((a + ms / 4)),100,conv_a,range,0"
      fi
      echo "0,$s,1,forward,-1,host,$a,$((a + f * ms + ms)),0,forward,range,0"
      local b=$((a + f * ms + 2 * ms))
      if [ "$layers" = 1 ]; then
        echo "0,$s,1,layer.backward,-1,host,$b,$((b + ms / 2)),0,relu_b,range,0"
        echo "0,$s,1,layer.backward,-1,host,$((b + ms / 2)),$((b + ms / 2 + 4 * ms)),100,conv_a,range,0"
        [ "$device" = 1 ] && echo "0,$s,1,layer.backward,-1,device,$b,$((b + ms / 4)),100,conv_a,range,0"
      fi
      echo "0,$s,1,backward,-1,host,$b,$((b + 5 * ms)),0,backward,range,0"
      echo "0,$s,1,step,-1,host,$t,$((b + 6 * ms)),0,step,range,0"
      t=$((b + 7 * ms))
    done
  } >"$dir/rank0.trace.csv"
}

run "$tmp/host" 0 1
"$bin" report "$tmp/host" --warmup-steps 1 --out "$tmp/o1" >"$tmp/o1.log" 2>&1 || { cat "$tmp/o1.log"; bad "report"; }
L=$tmp/o1/layers.csv
check_eq "rows" "$(csv_col "$L" name | tr '\n' ' ')" "conv_a relu_b "
check_eq "conv_a steps" "$(csv_col "$L" steps name=conv_a)" 4
check_eq "conv_a clock" "$(csv_col "$L" clock name=conv_a)" host
check_eq "conv_a forward_ms (median after the warm-up)" "$(csv_col "$L" forward_ms name=conv_a)" 2.0000
check_eq "conv_a backward_ms" "$(csv_col "$L" backward_ms name=conv_a)" 4.0000
check_eq "conv_a gflops" "$(csv_col "$L" gflops name=conv_a)" 1.000
check_eq "conv_a forward_gflops" "$(csv_col "$L" forward_gflops name=conv_a)" 1.000
check_eq "conv_a gbps" "$(csv_col "$L" gbps name=conv_a)" 0.050
check_eq "conv_a intensity" "$(csv_col "$L" intensity_flop_per_byte name=conv_a)" 20.0000
check_eq "conv_a roofline" "$(csv_col "$L" roofline_gflops name=conv_a)" 10.000
check_eq "conv_a pct_peak_flops" "$(csv_col "$L" pct_peak_flops name=conv_a)" 10.00
check_eq "conv_a pct_peak_bw" "$(csv_col "$L" pct_peak_bw name=conv_a)" 2.50
check_eq "conv_a pct_roofline" "$(csv_col "$L" pct_roofline name=conv_a)" 10.00
check_eq "conv_a bound" "$(csv_col "$L" bound name=conv_a)" compute
check_eq "relu_b forward_ms" "$(csv_col "$L" forward_ms name=relu_b)" 0.5000
check_eq "relu_b gflops" "$(csv_col "$L" gflops name=relu_b)" 0.002
check_eq "relu_b gbps" "$(csv_col "$L" gbps name=relu_b)" 0.020
check_eq "relu_b roofline" "$(csv_col "$L" roofline_gflops name=relu_b)" 0.200
check_eq "relu_b pct_roofline" "$(csv_col "$L" pct_roofline name=relu_b)" 1.00
check_eq "relu_b bound" "$(csv_col "$L" bound name=relu_b)" memory
check_eq "roofline on the page" "$(grep -c 'class="roofline"' "$tmp/o1/report.html")" 1
check_eq "a point per layer and direction" "$(grep -c '<circle class="layer"' "$tmp/o1/report.html")" 4
check_eq "the terminal names layers.csv" "$(grep -c 'in layers.csv' "$tmp/o1.log")" 1

# --warmup-steps 0 counts step 1's 50 ms: forward median of 50,1,2,3,100 is 3 ms
"$bin" report "$tmp/host" --warmup-steps 0 --out "$tmp/o0" >/dev/null 2>&1
check_eq "warm-up kept: conv_a steps" "$(csv_col "$tmp/o0/layers.csv" steps name=conv_a)" 5
check_eq "warm-up kept: conv_a forward_ms" "$(csv_col "$tmp/o0/layers.csv" forward_ms name=conv_a)" 3.0000

run "$tmp/dev" 1 1
"$bin" report "$tmp/dev" --warmup-steps 1 --out "$tmp/o2" >/dev/null 2>&1
check_eq "device rows preferred: clock" "$(csv_col "$tmp/o2/layers.csv" clock name=conv_a)" device
check_eq "device rows preferred: forward_ms" "$(csv_col "$tmp/o2/layers.csv" forward_ms name=conv_a)" 0.2500
# relu_b has no device rows of its own (an event pair dropped, say): its host rows count
check_eq "host rows where a layer has no device rows" "$(csv_col "$tmp/o2/layers.csv" clock name=relu_b)" host
check_eq "  ... and their figures" "$(csv_col "$tmp/o2/layers.csv" forward_ms name=relu_b)" 0.5000

run "$tmp/none" 0 0
"$bin" report "$tmp/none" --warmup-steps 1 --out "$tmp/o3" >/dev/null 2>&1
if [ -e "$tmp/o3/layers.csv" ]; then bad "a run without layer rows wrote layers.csv"; else ok; fi
check_eq "no roofline without layers" "$(grep -c 'class="roofline"' "$tmp/o3/report.html")" 0

check_done
