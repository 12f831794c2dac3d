#!/usr/bin/env bash
# The chaos suite's long profile: the real machine-controller against emulated clusters behind
# fault proxies, every single-fault scenario once, then mixed faults until the time is up.
#   hack/chaos.sh --minutes 30            # a new random seed (printed first)
#   hack/chaos.sh --minutes 30 --seed 7   # replay a run
#   hack/chaos.sh --scenario slow-driver --scenario mixed --minutes 5
# Prints the scenario x invariant table; exits 1 if any invariant was violated.
set -euo pipefail
cd "$(dirname "$0")/.."

hack/venv.sh dev >&2
export PATH="$PWD/.venv/bin:$PATH"
exec python -m mcm.testing.chaos "$@"
