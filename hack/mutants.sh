#!/usr/bin/env bash
# Mutation testing of the controller (creation, deletion, health, drain, safety, Node handling),
# the drain, the API client, leader election and the MachineConfigController (on demand, not in
# CI): one-line logic changes, each run against the tests that should notice it (hack/mutants.toml).
# See hack/mutants.py for what counts as a kill.
#   hack/mutants.sh                           # every mutant (very long)
#   hack/mutants.sh --sample 150 --seed S     # a seeded sample
#   hack/mutants.sh --list                    # what would be mutated
#   hack/mutants.sh --rerun mutants-report.txt  # again, what a report did not count as killed
#   hack/mutants.sh ... --stop-after 3600      # no mutant starts after an hour (a random part is tested)
# Exits non-zero when fewer than 90 % of the counted mutants are killed.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/venv.sh dev >&2
exec .venv/bin/python hack/mutants.py "$@"
