#!/usr/bin/env bash
# test_csvcol.sh — tests/csvcol.sh, the shell tests' reader of CSV columns by header name:
#   - csv_col reads a column by name, with KEY=VALUE filters, wherever the column is
#     (the same table with its columns in another order gives the same answers);
#   - a quoted field (a comma, a doubled quote, a line break inside) is one field;
#   - csv_awk's col()/ncols/NF see the unquoted fields;
#   - a missing column (asked for, or used as a filter, or in col()) fails loudly: exit
#     status non-zero, one line on stderr naming the file and the column, and the calling
#     test's shell is ended even when the call was inside $(...).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/csvcol.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/check.sh"
printf 'run,rank,phase,ms\nddp,0,step,1.5\nddp,1,step,2.5\nbase,0,step,9\n' >"$tmp/a.csv"
# the same table, columns in another order and one more in the middle
printf 'ms,phase,extra,rank,run\n1.5,step,x,0,ddp\n2.5,step,y,1,ddp\n9,step,z,0,base\n' >"$tmp/b.csv"
for f in a b; do
  check_eq "$f: by name" "$(csv_col "$tmp/$f.csv" ms | tr '\n' ' ')" "1.5 2.5 9 "
  check_eq "$f: filtered" "$(csv_col "$tmp/$f.csv" ms run=ddp rank=1)" "2.5"
  check_eq "$f: no row" "$(csv_col "$tmp/$f.csv" ms run=nothing | wc -l)" 0
  check_eq "$f: csv_awk" "$(csv_awk 'FNR > 1 && col("run") == "ddp" { s += col("ms") } END { print s }' "$tmp/$f.csv")" 4
done
check_eq "csv_awk: ncols per file" "$(csv_awk 'FNR == 1 { printf "%d ", ncols }' "$tmp/a.csv" "$tmp/b.csv")" "4 5 "

# quoted fields: a comma, a doubled quote and a line break inside one
printf 'name,kind,n\n"a,b",x,1\n"say ""hi""",y,2\n"two\nlines",z,3\nplain,w,4\n' >"$tmp/q.csv"
check_eq "quoted comma" "$(csv_col "$tmp/q.csv" name kind=x)" "a,b"
check_eq "quoted quote" "$(csv_col "$tmp/q.csv" name n=2)" 'say "hi"'
check_eq "quoted line break" "$(csv_col "$tmp/q.csv" kind n=3)" z
check_eq "after a quoted row" "$(csv_col "$tmp/q.csv" n name=plain)" 4
check_eq "NF of quoted rows" "$(csv_awk 'FNR > 1 && NF != ncols { n++ } END { print n + 0 }' "$tmp/q.csv")" 0
check_eq "rows" "$(csv_awk 'FNR > 1 { n++ } END { print n }' "$tmp/q.csv")" 4
check_eq "numbers compare as numbers" "$(csv_awk 'FNR > 1 && col("n") > m { m = col("n") } END { print m }' "$tmp/q.csv")" 4
printf 'name,n\n"x,y",1000\nz,999\n"w",10\n' >"$tmp/n.csv"
check_eq "numbers of quoted rows" "$(csv_awk 'FNR > 1 && col("n") > m { m = col("n") } END { print m }' "$tmp/n.csv")" 1000
check_eq "csv_has" "$(csv_has "$tmp/q.csv" kind; echo $?)$(csv_has "$tmp/q.csv" nope; echo $?)" 01

# a missing column fails loudly, in every way it can be asked for; run in a shell of its
# own, as a test would (the helper ends the shell that sourced it)
missing() { # WHAT SCRIPT: runs SCRIPT in a test-like shell; want non-zero, one line on stderr
  local rc
  # (in a subshell whose stderr is dropped: bash's "Terminated" about the ended shell)
  (bash -c ". '$here/csvcol.sh'; $2; echo still-running" >"$tmp/out" 2>"$tmp/err"; exit $?) 2>/dev/null
  rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^csvcol: $tmp/a.csv: no column 'nope'" "$tmp/err" &&
    ! grep -q still-running "$tmp/out"; then ok; else
    bad "$1: exit $rc, stdout '$(cat "$tmp/out")', stderr '$(cat "$tmp/err")'"
  fi
}
missing "csv_col column" "csv_col '$tmp/a.csv' nope"
missing "csv_col filter" "csv_col '$tmp/a.csv' ms nope=1"
missing "csv_col in \$(...)" "x=\$(csv_col '$tmp/a.csv' nope)"
missing "csv_col in a pipeline" "csv_col '$tmp/a.csv' nope | wc -l"
missing "col() with END exit 0" "csv_awk 'FNR > 1 && col(\"nope\") > 0 { bad = 1 } END { exit bad }' '$tmp/a.csv'"
missing "col() in \$(...)" "x=\$(csv_awk 'FNR > 1 { print col(\"nope\") }' '$tmp/a.csv')"
# the status of a call whose shell is not ended (a subshell's own $$ is the test's)
rc=$(bash -c ". '$here/csvcol.sh'; csv_col '$tmp/a.csv' nope; echo \$?" 2>/dev/null)
check_eq "no 'still running' status" "$rc" ""
# a header-only table has every column it names, and no rows
printf 'run,ms\n' >"$tmp/h.csv"
check_eq "header only" "$(csv_col "$tmp/h.csv" ms; echo $?)" 0
# an empty file has no columns
: >"$tmp/e.csv"
check_eq "csv_has: an empty file" "$(csv_has "$tmp/e.csv" ms; echo $?)" 1
(bash -c ". '$here/csvcol.sh'; csv_col '$tmp/e.csv' ms" >/dev/null 2>"$tmp/err"; exit $?) 2>/dev/null
rc=$?
if [ $rc -ne 0 ] && grep -q "^csvcol: $tmp/e.csv: no column 'ms'" "$tmp/err"; then ok; else
  bad "empty file: exit $rc, $(cat "$tmp/err")"
fi

check_done
