#!/usr/bin/env bash
# The one-command demo: installs mcm into .venv if needed (the versions locked in requirements/,
# hack/venv.sh), then runs `machine-controller demo` (two emulated clusters, the local provider,
# N machines going Running, one drained and deleted).
# Arguments go to the demo: --machines N, --keep, --workdir DIR, --timeout SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."

# The locked runtime dependencies (requirements/runtime.txt) and mcm, unless .venv has them.
hack/venv.sh runtime >&2
exec .venv/bin/machine-controller demo "$@"
