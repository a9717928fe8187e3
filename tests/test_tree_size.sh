#!/usr/bin/env bash
# test_tree_size.sh — the repository stays what it says it is (issues 34, 36, 38):
#  1. the tracked tree (git ls-files, sizes in the working tree) is at most 10 MiB; over,
#     the five largest top-level entries are named;
#  2. results/ holds results (tables, figures, their READMEs): no file there is code
#     (.sh .py .patch .diff .c .h .cu .cuh .cc .cpp, a #! first line, or git's executable
#     mode); experiments' code lives in dev/;
#  3. no test reads the committed results/ folder: nothing in tests/, fuzz/ or the CMake
#     files names it from the source root ($src/results, ${DDPPROF_SOURCE_DIR}/results,
#     (ROOT, "results") ...; writing output under results/ is scripts' business, not tests');
#  4. what travels to the GPU machine (tracked + untracked-not-ignored files + build-gpu-deps/,
#     scripts/gpu-check's travel_sizes: the device tool takes 64 MiB) is at most 60 MiB;
#     over, the five largest top-level entries are named (needs python3).
# Skips (77) where the source tree is not a git checkout of its own (an exported tarball).
set -u
src=${DDPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) || top=
if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$(cd "$src" && pwd -P)" ]; then
  echo "skipped: $src is not the top of a git checkout (no git ls-files to size)"
  exit 77
fi
. "$(dirname "$0")/check.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. the tracked tree: "SIZE|PATH" per tracked file present here (not folders: submodules)
(cd "$src" && git ls-files -z | xargs -0 -r stat -c '%F|%s|%n' -- 2>/dev/null) |
  awk -F'|' '$1 != "directory" { print $2 "|" $3 }' >"$tmp/tracked"
limit=$((10 * 1024 * 1024))
total=$(awk -F'|' '{ s += $1 } END { print s + 0 }' "$tmp/tracked")
largest=$(awk -F'|' '{ split($2, p, "/"); s[p[1]] += $1 } END { for (k in s) print s[k], k }' "$tmp/tracked" |
  sort -rn | head -n 5 | awk '{ printf "%s%s %.1f MiB", (NR > 1 ? ", " : ""), $2, $1 / 1048576 }')
check tracked-size "$([ "$total" -gt 0 ] && [ "$total" -le "$limit" ]; echo $?)" \
  "the tracked tree is $total bytes, over 10 MiB ($limit): the largest: $largest (raw runs and logs belong in git history, not the tree)"
echo "tracked tree: $total bytes ($largest)"

# 2. results/ holds results
code=$(cd "$src" && git ls-files -s -- results | while read -r mode _ _ path; do
  if [ "$mode" = 100755 ] || [[ $path =~ \.(sh|py|patch|diff|c|h|cu|cuh|cc|cpp)$ ]] ||
     [ "$(head -c 2 "$path" 2>/dev/null)" = '#!' ]; then echo "$path"; fi
done)
check results-no-code "$([ -z "$code" ]; echo $?)" \
  "code under results/ (experiments' code goes to dev/): $(echo $code)"

# 3. no test reads results/ (this file, which names the patterns, left out)
readers=$(cd "$src" && grep -rlIE --exclude=test_tree_size.sh \
  '(SOURCE_DIR[}" ]*|\$\{?(src|root|ROOT|top)\}?)/results([/" ]|$)|[(,] *"results"[,)]' \
  tests fuzz cmake $(git ls-files '*CMakeLists.txt') 2>/dev/null | sort -u)
check no-test-reads-results "$([ -z "$readers" ]; echo $?)" \
  "these read the committed results/ (give them a fixture under tests/fixtures/): $(echo $readers)"

# 4. what travels to the GPU machine, by scripts/gpu-check's own sum
if command -v python3 >/dev/null; then
  line=$(python3 - "$src" <<'PY'
import importlib.machinery, importlib.util, os, sys
src = sys.argv[1]
loader = importlib.machinery.SourceFileLoader("gpu_check", os.path.join(src, "scripts", "gpu-check"))
gc = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpu_check", loader))
loader.exec_module(gc)
sizes = gc.travel_sizes(src, os.path.join(src, "build-gpu-deps"))
ok, line = gc.travel_verdict(sizes or {})
print(line)
sys.exit(0 if sizes and ok else 1)
PY
)
  check travel-size $? "$line"
  echo "$line"
else
  echo "what travels to the GPU machine not summed: no python3"
fi
check_done
