# grid_lib.sh — sourced by alt_calib.sh, reuse_grids.sh, ring_grads.sh and
# one_bucket_calib.sh (set -eu): a committed grid's runs unpacked, their meta.csv's
# comm_progress set or taken out, the grid predicted again (scripts/shaped-grid --reuse: no
# root, no runs) and summed up in a line.
lib_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# the last commit whose results/ held the grids' runs.tar.gz (results/ keeps the tables)
raw_sha=7bb424bf2fa7c493c1a79fbea309e503c0444ec9

# runs_tar GRID: the runs.tar.gz of GRID (a folder relative to the root, e.g.
# results/shaped_grid_20261202/r6a) on stdout: from the tree where it is there, else from
# git history at $raw_sha
runs_tar() {
  if [ -f "$lib_root/$1/runs.tar.gz" ]; then cat "$lib_root/$1/runs.tar.gz"
  else git -C "$lib_root" show "$raw_sha:$1/runs.tar.gz"; fi
}

# unpack_grid GRID DEST: GRID's runs (runs_tar) and summary.csv into DEST
unpack_grid() {
  mkdir -p "$2"
  runs_tar "$1" | tar -xz -C "$2"
  cp "$lib_root/$1/summary.csv" "$2/"
}

# progress_key DEST on|off: every run with `comm_progress,gradient` beside gloo, or without
# the key (the model before the ring at the gradients)
progress_key() {
  local m
  for m in "$1"/runs/*/meta.csv; do
    sed -i '/^comm_progress,/d' "$m"
    if [ "$2" = on ]; then sed -i 's/^comm,gloo$/comm,gloo\ncomm_progress,gradient/' "$m"; fi
  done
}

# predict_line BIN DEST LABEL [SKIP]: DEST predicted again into DEST/out with BIN; prints
# LABEL, the |error| median and worst, then each point's error (the grid point SKIP, e.g.
# r100-c25, left out)
predict_line() {
  "$lib_root/scripts/shaped-grid" --bin "$1" --reuse "$2" --out "$2/out" >/dev/null 2>&1 || true
  python3 - "$2/out/errors.csv" "$3" "${4:-}" <<'PY'
import csv, statistics as st, sys
skip = sys.argv[3]
e = [float(r["error_pct"]) for r in csv.DictReader(open(sys.argv[1]))
     if not (skip and r["kind"] == "grid" and "r%s-c%s" % (r["bandwidth_mbit"], r["bucket_cap_mb"]) == skip)]
print("%s median %5.1f worst %5.1f | %s" % (sys.argv[2], st.median(abs(x) for x in e),
      max(abs(x) for x in e), " ".join("%+5.1f" % x for x in e)))
PY
}
