#!/usr/bin/env bash
# Lock what the checks, the demo and the image install: exact versions with hashes, for every
# platform and every Python that pyproject.toml allows (>= 3.11), in requirements/:
#   bench.txt    runtime deps + the dev, test, conformance and bench extras + the build tools;
#                resolved first: the other files take their versions from it, so a package has
#                one version in all four
#   dev.txt      the same without the bench extra: what hack/test.sh installs
#   runtime.txt  the runtime deps only: what the image and hack/demo.sh install
#   build.txt    pip and pyproject.toml's [build-system] requires: what builds mcm itself
#                (hack/test.sh, hack/demo.sh and the image install mcm with --no-deps
#                --no-build-isolation, so nothing unlocked comes in)
#
# Usage: hack/lock.sh                     keep the locked versions; change only what pyproject.toml
#                                         now asks for (added, removed or re-ranged dependencies)
#        hack/lock.sh --upgrade           refresh: the newest versions pyproject.toml allows
#        hack/lock.sh --upgrade-package P the newest P (and what it needs), the rest kept
# Commit a refresh on its own, after hack/test.sh passes on it (README, "Locked dependencies").
#
# The resolver is uv, itself pinned below, installed into a venv of its own in the user's cache.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
PY=${PYTHON:-python3}
tool_dir=${XDG_CACHE_HOME:-$HOME/.cache}/mcm-lock/uv-$UV_VERSION
if [ ! -x "$tool_dir/bin/uv" ]; then
  echo "lock: installing uv $UV_VERSION into $tool_dir" >&2
  rm -rf "$tool_dir"
  "$PY" -m venv "$tool_dir"
  "$tool_dir/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
uv=$tool_dir/bin/uv

# pip and the build backend, from pyproject.toml's [build-system] (one place says which).
build_requires() {
  "$PY" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    print("pip")
    print("\n".join(tomllib.load(f)["build-system"]["requires"]))
EOF
}

compile() {  # OUTPUT ARGS...: one lock file; the header names this script as the command
  local output=$1
  shift
  "$uv" pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --no-emit-index-url --custom-compile-command "hack/lock.sh" -o "$output" "$@"
}

mkdir -p requirements
# The superset first; then each subset constrained to its versions.
build_requires | compile requirements/bench.txt pyproject.toml - --extra dev --extra bench "$@"
build_requires | compile requirements/dev.txt pyproject.toml - --extra dev -c requirements/bench.txt
compile requirements/runtime.txt pyproject.toml -c requirements/bench.txt
build_requires | compile requirements/build.txt - -c requirements/bench.txt
for f in requirements/{bench,dev,runtime,build}.txt; do
  echo "lock: $f: $(grep -c '^[A-Za-z0-9]' "$f") packages" >&2
done
