#!/usr/bin/env bash
# Mutation testing of the creation, deletion, health and drain logic (on demand, not in CI):
# one-line logic changes, each run against the tests that should notice it. See hack/mutants.py.
#   hack/mutants.sh                 # every mutant (long: run it when you have the time)
#   hack/mutants.sh --sample 80     # a seeded sample (--seed S to replay another)
#   hack/mutants.sh --list          # what would be mutated
# Exits non-zero when fewer than 90 % of the mutants are killed.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/venv.sh dev >&2
exec .venv/bin/python hack/mutants.py "$@"
