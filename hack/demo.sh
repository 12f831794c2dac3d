#!/usr/bin/env bash
# The one-command demo: installs mcm into .venv if needed, then runs `machine-controller demo`
# (two emulated clusters, the local provider, N machines going Running, one drained and deleted).
# Arguments go to the demo: --machines N, --keep, --workdir DIR, --timeout SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c 'import mcm.app.demo' 2>/dev/null || [ ! -x .venv/bin/machine-controller ]; then
  .venv/bin/python -m pip install --quiet -e .
fi
exec .venv/bin/machine-controller demo "$@"
