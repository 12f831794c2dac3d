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
if [ "$#" -eq 0 ]; then
  echo "== benchmark smoke runs (figures are informative; a crash fails the run)"
  python benchmarks/emulator.py --smoke
  python benchmarks/informer.py --objects 1000
  python benchmarks/workqueue.py --smoke
  python benchmarks/drain.py --smoke
  python benchmarks/controller.py --smoke
  mcc_log=$(mktemp)
  python benchmarks/machineconfig.py --smoke >"$mcc_log" 2>&1 || { cat "$mcc_log"; rm -f "$mcc_log"; exit 1; }
  rm -f "$mcc_log"
fi
echo "== pytest"
pytest -n 2 "$@"
