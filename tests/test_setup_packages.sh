#!/usr/bin/env bash
# test_setup_packages.sh — scripts/setup installs what every test runs: each command a test
# skips (77) without (found by its `command -v` check) must come from a Debian package in
# setup's list (or, for a tool no package installs, such as Debian's non-free nsys, from a
# script that scripts/test runs), or a fresh machine set up as the README says skips that test for ever (test_mpirun did:
# openmpi-bin was not in the list).  A new such command needs its package in the table.
set -u
here=$(cd "$(dirname "$0")" && pwd)
setup=$here/../scripts/setup
list=$(sed -n '/^packages=(/,/)/p' "$setup" | tr -d '()' | sed 's/^packages=//')
# the package of each command the tests check for; "-": always there (essential packages,
# or build-essential's binutils)
package_of() {
  case $1 in
    mpirun) echo openmpi-bin ;;
    python3) echo python3 ;;
    nm) echo build-essential ;;
    nsys) echo @setup-nsys ;; # Debian's non-free nsys, unpacked (not installed) by scripts/setup-nsys
    ldd | script) echo - ;;
    *) echo "?" ;;
  esac
}
failed=0 checked=0
for cmd in $(grep -ho 'command -v [A-Za-z0-9_.-]*' "$here"/test_*.sh | awk '{print $3}' | sort -u); do
  pkg=$(package_of "$cmd")
  checked=$((checked + 1))
  if [ "${pkg#@}" != "$pkg" ]; then
    # not a package: a script the README's test command (scripts/test) runs must provide it
    if ! grep -q "scripts/${pkg#@}" "$here/../scripts/test"; then
      failed=$((failed + 1)); echo "FAIL a test needs '$cmd', which scripts/test does not get (scripts/${pkg#@})"
    fi
  elif [ "$pkg" = "?" ]; then
    failed=$((failed + 1)); echo "FAIL a test needs '$cmd': name its package in $0 and scripts/setup"
  elif [ "$pkg" != - ] && ! grep -qw -- "$pkg" <<<"$list"; then
    failed=$((failed + 1)); echo "FAIL a test needs '$cmd' ($pkg), which scripts/setup does not install"
  fi
done
echo "$checked command(s) checked, $failed failed"
[ $failed -eq 0 ]
