#!/usr/bin/env bash
# test_readme.sh — the README stays a page a newcomer reads in five minutes, and the docs'
# links hold (issue 36 item 6):
#  1. README.md is at most 250 lines (the reference is in docs/);
#  2. its first fenced block is exactly the two first commands, and .ci/run runs the second
#     (the README's test command) as it is written there;
#  3. every relative link of README.md and docs/*.md ([text](path), [text](path#anchor),
#     [name]: path; not inside fenced blocks) names a file or folder that exists, and an
#     anchor into a Markdown file (or into the same file) names one of its headings as
#     GitHub spells them (lower case, punctuation but - and _ dropped, spaces to -);
#  4. every docs/*.md is linked from README.md (the map of docs/).
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/check.sh"
readme=$src/README.md

# 1. its length
lines=$(wc -l <"$readme")
check readme-lines "$([ "$lines" -le 250 ]; echo $?)" \
  "README.md is $lines lines, over 250: move reference material into docs/ and link it"
echo "README.md: $lines lines"

# 2. the first fenced block: the two first commands, exactly
first=$(awk '/^```/ { if (open) exit; open = 1; next } open' "$readme")
want='scripts/setup && build/ddpprof --model convnet --epochs 1
scripts/test'
check_eq "README.md's first fenced block" "$first" "$want"
test_cmd=$(sed -n 2p <<<"$want")
check ci-runs-test-command "$(grep -qE "^[^#]*[[:space:]\"]${test_cmd}( |;|$)" "$src/.ci/run"; echo $?)" \
  ".ci/run does not run the README's test command '$test_cmd'"

# 3. relative links and their anchors. links FILE: "TARGET" per link outside fenced blocks
links() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)   # code spans hold no links (and may hold "](")
      while (match(line, /\]\([^) \t]+\)/)) {
        print substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
      }
      if (match($0, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {
        t = $0; sub(/^[ \t]*\[[^]]+\]:[ \t]+/, "", t); sub(/[ \t].*$/, "", t); print t
      }
    }' "$1"
}
# anchors FILE: the anchor of each heading outside fenced blocks, as GitHub makes them
anchors() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence || !/^#+ / { next }
    {
      h = $0; sub(/^#+ +/, "", h); sub(/ +#* *$/, "", h)
      h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
      n = seen[h]++; print (n ? h "-" n : h)
    }' "$1"
}
bad_links=
nlinks=0
for md in "$readme" "$src"/docs/*.md; do
  [ -f "$md" ] || continue
  dir=$(dirname "$md")
  while IFS= read -r target; do
    case $target in
      http://* | https://* | mailto:*) continue ;;
    esac
    nlinks=$((nlinks + 1))
    path=${target%%#*}
    anchor=
    [ "$path" != "$target" ] && anchor=${target#*#}
    file=$md
    if [ -n "$path" ]; then
      file=$dir/$path
      if [ ! -e "$file" ]; then
        bad_links="$bad_links ${md#"$src"/}: $target (no such file);"
        continue
      fi
    fi
    if [ -n "$anchor" ] && [ "${file%.md}" != "$file" ] && [ -f "$file" ] &&
       ! anchors "$file" | grep -qxF -- "$anchor"; then
      bad_links="$bad_links ${md#"$src"/}: $target (no such heading);"
    fi
  done < <(links "$md")
done
check relative-links "$([ -z "$bad_links" ]; echo $?)" "broken links:$bad_links"
echo "$nlinks relative link(s) checked"

# 4. the map of docs/: every docs/*.md is linked from the README
for md in "$src"/docs/*.md; do
  [ -f "$md" ] || continue
  name=docs/$(basename "$md")
  check "readme-links-$name" "$(links "$readme" | grep -qxF -- "$name"; echo $?)" \
    "README.md does not link $name (the map of docs/ names every file there)"
done
check_done
