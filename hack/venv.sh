#!/usr/bin/env bash
# Make .venv hold the locked dependencies (requirements/, written by hack/lock.sh) and mcm itself
# (editable, --no-deps, built with the locked build tools), installing only when the lock,
# pyproject.toml or the interpreter changed since the last install here.
#
# Usage: hack/venv.sh dev       what hack/test.sh needs: requirements/dev.txt
#        hack/venv.sh runtime   what hack/demo.sh needs: requirements/build.txt + runtime.txt
#        hack/venv.sh bench     the dev set and the benchmarks' plots and profiles: bench.txt
# Each set holds the one before it (bench > dev > runtime): a venv with a larger set is kept.
# The stamp is .venv/.mcm-installed; delete it to force a reinstall. PYTHON picks the interpreter
# that creates .venv (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

locks_of() {  # SET: its lock files
  case "$1" in
    bench) echo requirements/bench.txt ;;
    dev) echo requirements/dev.txt ;;
    runtime) echo requirements/build.txt requirements/runtime.txt ;;
    *) return 1 ;;
  esac
}
set_name=${1:-}
if ! locks_of "$set_name" >/dev/null; then
  echo "usage: hack/venv.sh runtime|dev|bench" >&2
  exit 2
fi
read -r -a locks <<<"$(locks_of "$set_name")"
case "$set_name" in
  runtime) enough=(runtime dev bench) ;;
  dev) enough=(dev bench) ;;
  bench) enough=(bench) ;;
esac

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
stamp_file=.venv/.mcm-installed
stamp_of() {  # SET: what the stamp says once SET is installed from its lock files as they are now
  # shellcheck disable=SC2046  # the lock file names have no spaces
  echo "$1 $(cat pyproject.toml $(locks_of "$1") | sha256sum | cut -c1-16) $(.venv/bin/python -V 2>&1)"
}
current=$(cat "$stamp_file" 2>/dev/null || true)
for have in "${enough[@]}"; do
  if [ "$current" = "$(stamp_of "$have")" ]; then
    echo "== .venv holds the $have set as locked in $(locks_of "$have") (delete $stamp_file to reinstall)"
    exit 0
  fi
done
wanted=$(stamp_of "$set_name")
echo "== installing ${locks[*]} and mcm (editable) into .venv"
rm -f "$stamp_file"
lock_args=()
for lock in "${locks[@]}"; do lock_args+=(-r "$lock"); done
.venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes "${lock_args[@]}"
# setuptools warns about editable installs on stderr even under --quiet: show its output only when
# the install fails.
if ! out=$(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
  --no-build-isolation -e . 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "$wanted" >"$stamp_file"
