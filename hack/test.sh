#!/usr/bin/env bash
# Install everything mcm needs into .venv (the versions locked in requirements/dev.txt, hack/venv.sh)
# and run the whole check: ruff, mypy, import layers, tests.
# Works on a fresh machine with only python3 and pip. Extra arguments go to pytest (and skip the
# benchmark smoke runs and the chaos suite's short profile).
# With `go` on PATH it first builds (or finds cached) the real control plane for tests/realapi
# (hack/envtest.sh, a wrapper over `python -m mcm.testing.envtest build`) and upstream's Go machine
# controller and manager for tests/interop (hack/upstream-mcm.sh); without it those tiers are
# skipped, and under CI=true the real control plane's absence fails the run (and so does a failed
# build of either).
#
# Ruff runs first; mypy with the import layers, the benchmark smoke runs and the chaos short profile
# then run in the background next to pytest (they mostly wait, as do most tests, and the machine
# has two cores): their output is shown after pytest's, in full only when one fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# The run starts hundreds of Python processes (the command under test, demos, benchmarks, chaos
# replicas, pytest workers): let them share compiled bytecode (the gitignored __pycache__
# directories) even where the caller's environment turns that off.
unset PYTHONDONTWRITEBYTECODE

# The locked dependencies (requirements/dev.txt, from hack/lock.sh) and mcm, only when the lock,
# pyproject.toml or the interpreter changed since the last install here.
hack/venv.sh dev
export PATH="$PWD/.venv/bin:$PATH"

# Run a command silently; print its output only when it fails.
quiet_unless_failing() {
  local out
  if ! out="$("$@" 2>&1)"; then
    echo "$out"
    echo "FAILED: $*" >&2
    return 1
  fi
  echo "$* : ok"
}

# Background tasks: each in a process group of its own (so an early exit stops all of it), its
# output in $bg_dir/<name>.txt.
bg_dir=$(mktemp -d "${TMPDIR:-/tmp}/mcm-test.XXXXXX")
bg_names=()
bg_pids=()
stop_background() {
  local pid
  for pid in "${bg_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap stop_background EXIT
in_background() {  # NAME COMMAND...
  local name=$1
  shift
  set -m
  "$@" > "$bg_dir/$name.txt" 2>&1 &
  bg_pids+=("$!")
  set +m
  bg_names+=("$name")
}
# Wait for every background task; show each one's summary, or its whole output when it failed.
await_background() {
  local i status failed=0
  for i in "${!bg_names[@]}"; do
    status=0
    wait "${bg_pids[$i]}" || status=$?
    echo "== ${bg_names[$i]}"
    if [ "$status" -ne 0 ]; then
      cat "$bg_dir/${bg_names[$i]}.txt"
      echo "FAILED: ${bg_names[$i]} (exit status $status; its files are in $bg_dir)" >&2
      failed=1
    else
      summary "${bg_names[$i]}"
    fi
  done
  bg_pids=()
  return "$failed"
}
summary() {
  case "$1" in
    chaos) grep -v '^chaos:  ' "$bg_dir/chaos.txt" | tail -n 25 ;;
    *) cat "$bg_dir/$1.txt" ;;
  esac
}

static_checks() {
  quiet_unless_failing mypy
  quiet_unless_failing lint-imports
}

# Smoke runs prove the benchmarks still run, one after the other.
benchmark_smoke_runs() {
  quiet_unless_failing python benchmarks/emulator.py --smoke
  quiet_unless_failing python benchmarks/informer.py --objects 500 --list-runs 1
  quiet_unless_failing python benchmarks/workqueue.py --smoke
  quiet_unless_failing python benchmarks/drain.py --smoke
  quiet_unless_failing python benchmarks/controller.py --smoke
  quiet_unless_failing python benchmarks/machineconfig.py --smoke
  quiet_unless_failing python benchmarks/machineconfig_pass.py --smoke
  quiet_unless_failing python benchmarks/scale.py --smoke
  quiet_unless_failing python benchmarks/scrub.py --smoke
  if [ -x "$(hack/upstream-mcm.sh --path)" ]; then
    quiet_unless_failing python benchmarks/vs_upstream.py --smoke
  else
    echo "vs_upstream smoke: skipped (upstream's machine controller is not built: hack/upstream-mcm.sh)"
  fi
  if [ -x "$(hack/upstream-mcm.sh --path)" ] && [ -x "$(hack/upstream-mcm.sh --manager-path)" ]; then
    quiet_unless_failing python benchmarks/manager.py --smoke
  else
    echo "manager smoke: skipped (upstream's machine controller and manager are not built: hack/upstream-mcm.sh)"
  fi
}

echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy and import layers (in the background)"
in_background "mypy and import layers" static_checks
echo "== real control plane (hack/envtest.sh)"
if command -v go >/dev/null 2>&1; then
  if bin_dir=$(hack/envtest.sh | tail -n 1) && [ -n "$bin_dir" ]; then
    export MCM_ENVTEST_ASSETS="$bin_dir"
  elif [ "${CI:-}" = true ]; then
    echo "realapi tier: hack/envtest.sh failed and CI=true requires the tier" >&2
    exit 1
  else
    echo "realapi tier: hack/envtest.sh failed; tests/realapi will be skipped" >&2
  fi
elif [ "${CI:-}" = true ] && [ -z "${MCM_ENVTEST_ASSETS:-}" ]; then
  echo "realapi tier: no 'go' on PATH to build the real control plane, and CI=true requires it" >&2
  exit 1
else
  echo "realapi tier: no 'go' on PATH; tests/realapi will be skipped"
fi
echo "== upstream's Go machine controller and manager (hack/upstream-mcm.sh)"
# tests/interop runs them beside mcm's; a no-op once built (a cold build downloads and compiles
# the release with its cloud SDKs: about 15 min on 2 shared cores, once per machine).
if command -v go >/dev/null 2>&1; then
  if ! hack/upstream-mcm.sh >/dev/null; then
    if [ "${CI:-}" = true ]; then
      echo "interop tier: hack/upstream-mcm.sh failed and CI=true requires the tier" >&2
      exit 1
    fi
    echo "interop tier: hack/upstream-mcm.sh failed; tests/interop will be skipped" >&2
  fi
else
  echo "interop tier: no 'go' on PATH; tests/interop will be skipped"
fi
# After the builds: the smoke runs include the two against upstream's binaries, which a cold run
# has only now.
if [ "$#" -eq 0 ]; then
  echo "== benchmark smoke runs (in the background)"
  in_background "benchmark smoke runs" benchmark_smoke_runs
fi
# Three pytest workers on two cores: most tests wait (for a subprocess, a Lease, a watch) rather
# than compute, and a third worker fills those waits (the whole run took 6 min 30 s with two
# workers and 5 min 29 s with three, one after the other on a quiet machine). MCM_TEST_WORKERS
# overrides it.
workers=${MCM_TEST_WORKERS:-3}
pytest_status=0
if [ "$#" -eq 0 ]; then
  # The chaos short profile mostly waits for the controller to converge, so it runs next to
  # pytest instead of holding one of its workers (docs/reliability.md, "The chaos suite").
  echo "== chaos short profile (in the background; files in $bg_dir)"
  in_background chaos python -m mcm.testing.chaos --short --dir "$bg_dir/chaos-files"
  echo "== pytest (the chaos profile's pytest entry point is deselected: it runs above)"
  # loadgroup: the real-API tests share one worker and so one real control plane.
  pytest -n "$workers" --dist loadgroup -rs -m "not chaos" || pytest_status=$?
else
  echo "== pytest"
  # loadgroup: the real-API tests share one worker and so one real control plane.
  pytest -n "$workers" --dist loadgroup -rs "$@" || pytest_status=$?
fi
background_status=0
await_background || background_status=$?
trap - EXIT
if [ "$pytest_status" -ne 0 ]; then
  exit "$pytest_status"
fi
if [ "$background_status" -ne 0 ]; then
  exit "$background_status"
fi
rm -rf "$bg_dir"
