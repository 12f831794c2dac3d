#!/usr/bin/env bash
# Install everything mcm needs into .venv and run the whole check: ruff, mypy, import layers, tests.
# Works on a fresh machine with only python3 and pip. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
export PATH="$PWD/.venv/bin:$PATH"

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy
echo "== import layers"
lint-imports
# Smoke runs prove the benchmarks still run; their output is shown only when one fails.
smoke() {
  local out
  out=$(mktemp)
  if ! python "$@" >"$out" 2>&1; then
    cat "$out"
    rm -f "$out"
    echo "benchmark smoke run failed: python $*" >&2
    return 1
  fi
  rm -f "$out"
  echo "   ok: $*"
}
if [ "$#" -eq 0 ]; then
  echo "== benchmark smoke runs (output shown only on failure)"
  smoke benchmarks/emulator.py --smoke
  smoke benchmarks/informer.py --objects 1000
  smoke benchmarks/workqueue.py --smoke
  smoke benchmarks/drain.py --smoke
  smoke benchmarks/controller.py --smoke
fi
echo "== pytest"
pytest -n 2 "$@"
