# tests/csvcol.sh — the shell tests read CSV columns by their header name, never by
# position, so a column added to a table (anywhere in it) breaks no test.  Sourced:
#   . "$(dirname "$0")/csvcol.sh"
#
#   csv_col FILE COLUMN [KEY=VALUE...]
#       COLUMN of every data row (the header left out) whose column KEY is VALUE, for
#       each KEY=VALUE given, one value a line.  (A file that cannot be read: one line
#       on stderr and status 1, as awk would, without ending the test.)
#   csv_awk [-v VAR=VALUE...] 'PROGRAM' FILE...
#       awk -F, running PROGRAM, where col("NAME") is the field NAME of the current row
#       (by the current file's header, its first line), has("NAME") whether the file
#       has that column, and ncols the header's field count (a row is well-formed when
#       NF == ncols).  The header is an ordinary record (FNR == 1), as in plain awk.
#       (Before any header was read -- an empty or missing file -- col() is "", as a
#       field of plain awk would be.)
#   csv_has FILE COLUMN
#       exit status 0 when FILE's header has COLUMN (never ends the test).
#   csv_header FILE COLUMN...
#       exit status 0 when FILE's first line is a header holding every COLUMN, in any
#       order, other columns beside them (an assertion: never ends the test).
#
# Fields are read as RFC 4180, as the tables are written (report/output/table.c, probes/
# trace_writer.c, probes/runlog.c): a field holding a comma, quote or line break is
# quoted, a quote in it doubled; $i and NF are the fields after unquoting.
#
# A missing column ends the test: csv_col (checking every named column against the
# header) and col() print one line "csvcol: FILE: no column 'NAME' (columns: ...)" to
# stderr, return 2, and kill the test's shell ($$) -- the caller is usually inside $(...)
# or a pipeline whose status the test never looks at, and must not pass on an empty
# answer.

# the awk run before PROGRAM: RFC 4180 fields, the header's columns of each file
_csvcol_lib='
function __csv_die(name,   i, h) {
  for (i = 1; i <= ncols; i++) h = h (i > 1 ? "," : "") __csv_name[i]
  printf "csvcol: %s: no column '\''%s'\'' (columns: %s)\n", FILENAME, name, h > "/dev/stderr"
  printf "%s\n", name > __csv_errf
  close(__csv_errf)
  exit 2
}
function col(name) {
  if (!(name in __csv_idx)) { if (!__csv_hdr) return ""; __csv_die(name) }
  return $(__csv_idx[name])
}
function has(name) { return name in __csv_idx }
# a row with quotes, unquoted: split again on \034 so that its fields compare as numbers
# where they look like numbers (as fields do; assigned ones would not), then $0 rebuilt
# with commas (a row with quotes prints unquoted)
function __csv_split(   s, line, i, c, f, q, fs, ofs) {
  s = $0
  while (gsub(/"/, "\"", s) % 2 == 1 && (getline line) > 0) s = s "\n" line
  f = ""; q = 0
  for (i = 1; i <= length(s); i++) {
    c = substr(s, i, 1)
    if (q) {
      if (c != "\"") f = f c
      else if (substr(s, i + 1, 1) == "\"") { f = f c; i++ }
      else q = 0
    } else if (c == "\"") q = 1
    else if (c == ",") f = f "\034"
    else f = f c
  }
  fs = FS; FS = "\034"; $0 = f; FS = fs
  ofs = OFS; OFS = ","; $1 = $1; OFS = ofs
}
function __csv_header(   i) {
  split("", __csv_idx); split("", __csv_name)
  ncols = NF; __csv_hdr = 1
  for (i = 1; i <= NF; i++) { __csv_idx[$i] = i; __csv_name[i] = $i }
}
index($0, "\"") { __csv_split() }
FNR == 1 { __csv_header() }
'

# _csvcol_fail: a column was missing (the message is printed): end the test
_csvcol_fail() {
  kill -TERM $$ 2>/dev/null
  return 2
}

csv_awk() {
  local args=() errf rc
  while [ "$1" = -v ]; do args+=(-v "$2"); shift 2; done
  errf=$(mktemp) || return 2
  awk -F, -v __csv_errf="$errf" "${args[@]}" "$_csvcol_lib$1" "${@:2}"
  rc=$?
  if [ -s "$errf" ]; then
    rm -f "$errf"
    _csvcol_fail
    return 2
  fi
  rm -f "$errf"
  return $rc
}

csv_col() {
  local file=$1 want=$2 keys="" kv
  shift 2
  for kv in "$@"; do
    case $kv in *=*) ;; *) echo "csvcol: csv_col $file $want: '$kv' is not KEY=VALUE" >&2; _csvcol_fail; return 2 ;; esac
    keys="$keys$kv"$'\n'
  done
  if [ ! -r "$file" ]; then
    echo "csvcol: $file: cannot read" >&2
    return 1
  fi
  csv_awk -v want="$want" -v keys="$keys" '
    FNR == 1 {
      col(want)
      nk = split(keys, kv, "\n") - 1
      for (k = 1; k <= nk; k++) { e = index(kv[k], "="); kn[k] = substr(kv[k], 1, e - 1)
                                  kval[k] = substr(kv[k], e + 1); col(kn[k]) }
      next
    }
    { for (k = 1; k <= nk; k++) if (col(kn[k]) != kval[k]) next
      print col(want) }
    END { if (NR == 0) __csv_die(want) }' "$file"
}

csv_has() {
  [ -r "$1" ] || return 1
  awk -F, -v want="$2" "$_csvcol_lib"'FNR == 1 { found = has(want); exit } END { exit !found }' "$1"
}

csv_header() {
  local file=$1 c
  shift
  for c in "$@"; do csv_has "$file" "$c" || return 1; done
}
