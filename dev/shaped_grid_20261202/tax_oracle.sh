#!/usr/bin/env bash
# tax_oracle.sh BIN — how far a compute "tax" could take the committed grids.  BIN is
# ddpprof built with tax_oracle.patch: predict adds k1 * the replay's overlapped comm
# (comm - exposed) + k2 * min(its exposed comm, cw) to compute and step, less the same of
# the calibration's own configuration.  Prints reuse_grids.sh's lines at k1 = k2 = 0 (the
# model as committed), then per setting the means over the 8 grids and how many meet the
# goal.  The settings are the best of a wider sweep made the same way (k1 0-0.2, k2 0-0.2,
# cw 3-15); the constants are fitted on the very grids they are scored on, so this is an
# upper bound of the form, not a model.
set -eu
bin=${1:?usage: tax_oracle.sh BIN}
here=$(cd "$(dirname "$0")" && pwd)
echo "# k1 = k2 = 0 (the model as committed)"
K1=0 K2=0 CW=1 "$here/reuse_grids.sh" "$bin"
echo "# settings: means over the 8 grids"
for s in "0 0 1" "0.1 0 15" "0.1 0.03 15" "0.1 0.06 15" "0.05 0.06 15" "0.15 0.06 15" \
         "0.05 0.2 6" "0.1 0.1 6" "0.1 0.1 3" "0.1 0.2 3"; do
  set -- $s
  K1=$1 K2=$2 CW=$3 "$here/reuse_grids.sh" "$bin" | awk -v t="k1=$1 k2=$2 cw=$3" \
    '{m += $3; w += $5; if ($3 <= 5 && $5 <= 10) g++; n++}
     END {printf "%-24s mean median %.2f  mean worst %.2f  goal met %d of %d\n", t, m/n, w/n, g, n}'
done
