#!/usr/bin/env bash
# test_report_injection.sh — names from traces are shown, never obeyed (docs/USAGE.md, "The
# main job": "Names in the tables come from the traces"): the 4 PyTorch traces of
# kineto-2hosts with an op renamed to carry an OSC sequence (ESC ] 0 ; title BEL: it set the
# terminal's title), another to "=1+1" and a line break (a formula, and a table row split in
# two), a C1 CSI (U+009B) in a third, and two ranks' host (from the file name) "@SUM(A1)":
#   1. nothing the report prints, on stdout or stderr, holds ESC, BEL or the C1 CSI: they are
#      shown escaped (\x1b, \x07, \xc2\x9b), and the formula's row stays one line ("\n");
#   2. in ops.csv and ranks.csv no cell a spreadsheet would take for a formula (= + - @, tab,
#      CR first) goes out as it is: such text gets a ' before it (OWASP), and the numbers
#      (negative ones included) stay numbers;
#   3. an error message that quotes a path with a line break and ESC is one line, escaped.
set -u
bin=${DDPPROF:?DDPPROF must point at the ddpprof binary}
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null || { echo "skip: python3 edits the traces"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"

python3 - "$src/tests/fixtures/pytorch/kineto-2hosts" "$tmp/traces" <<'PY'
import gzip, json, os, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
rename = {"Optimizer.step#SGD.step": "=1+1\nsplit",
          "autograd::engine::evaluate_function: TBackward0": "\x1b]0;pwned\x07TBackward0",
          "autograd::engine::evaluate_function: MmBackward0": "\u009b2JMmBackward0"}
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name)
    d = json.load(gzip.open(path) if name.endswith(".gz") else open(path))
    for e in d["traceEvents"]:
        if e.get("name") in rename:
            e["name"] = rename[e["name"]]
    out = name[:-3] if name.endswith(".gz") else name
    out = out.replace("hostB", "@SUM(A1)")
    json.dump(d, open(os.path.join(dst, out), "w"))
PY

"$bin" report "$tmp/traces" --out "$tmp/rep" >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
check report-exit "$rc" "exit $rc: $(tail -n 3 "$tmp/err")"

# 1. the terminal
python3 - "$tmp/out" "$tmp/err" <<'PY'
import sys
bad = []
for p in sys.argv[1:]:
    raw = open(p, "rb").read()
    for b, what in ((b"\x1b", "ESC"), (b"\x07", "BEL"), (b"\xc2\x9b", "CSI (U+009B)")):
        if b in raw:
            bad.append("%s in %s" % (what, p))
out = open(sys.argv[1], "rb").read()
if b"=1+1\\nsplit" not in out or b"\nsplit" in out:
    bad.append("the op with a line break is not one escaped row")
if b"\\x1b]0;pwned\\x07TBackward0" not in out:
    bad.append("the OSC op is not shown escaped")
print("; ".join(bad))
sys.exit(1 if bad else 0)
PY
check terminal "$?" "control bytes reached the terminal"

# 2. the CSV files
python3 - "$tmp/rep/ops.csv" "$tmp/rep/ranks.csv" <<'PY'
import csv, sys
bad = []
def number(s):
    try:
        float(s)
        return True
    except ValueError:
        return False
ops = list(csv.reader(open(sys.argv[1], newline="")))
ranks = list(csv.reader(open(sys.argv[2], newline="")))
for name, rows in (("ops.csv", ops), ("ranks.csv", ranks)):
    for row in rows:
        for cell in row:
            if cell and cell[0] in "=+-@\t\r" and not number(cell):
                bad.append("%s: a formula %r" % (name, cell[:30]))
cells = [c for r in ops for c in r]
if "'=1+1\nsplit" not in cells:
    bad.append("ops.csv: the op '=1+1...' is not written as text ('=1+1...)")
hosts = [c for r in ranks for c in r]
if "'@SUM(A1)" not in hosts:
    bad.append("ranks.csv: the host '@SUM(A1)' is not written as text ('@SUM(A1))")
if not any(c.startswith("-") and number(c) for c in hosts):
    bad.append("ranks.csv: no negative number left as it is (rank 2's clock offset)")
print("; ".join(bad[:6]))
sys.exit(1 if bad else 0)
PY
check csv "$?" "a cell goes out as a spreadsheet formula"

# 3. an error quoting a path
bad_dir=$(printf '%s/no\nsuch\033]0;x\007dir' "$tmp")
"$bin" report "$bad_dir" >"$tmp/out" 2>"$tmp/err" </dev/null
rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && ! grep -q "$(printf '\033')" "$tmp/err" &&
  grep -qF 'no\nsuch\x1b]0;x\x07dir' "$tmp/err"; then ok; else
  bad "an error naming a path with a line break and ESC: exit $rc, $(wc -l <"$tmp/err") line(s): $(cat -v "$tmp/err")"
fi

check_done
