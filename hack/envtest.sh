#!/usr/bin/env bash
# Build the real control plane that tests/realapi runs on: etcd, kube-apiserver and
# kube-controller-manager. A thin wrapper over the package's command, the one implementation:
#   python -m mcm.testing.envtest build [--print-dir]      (mcm/testing/envtest/build.py)
# which builds them from the Go module shipped in the package (mcm/testing/envtest/gomodule; its
# go.mod pins the releases) into
#   ${MCM_ENVTEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/mcm-envtest}/<kubernetes version>/bin
# A second run with the same go.mod, go.sum and Go version is a no-op. The last line printed on
# stdout is that bin directory; progress and timings go to stderr.
#
# Usage: hack/envtest.sh [--print-dir]   (--print-dir: only print the directory, build nothing)
# Exit status: 0 built or already built; 2 no `go` on PATH; 1 the build failed.
#
# It needs no venv: the build module imports only the standard library and mcm.packaged, so any
# python3 >= 3.11 runs it from this checkout by path (-P: the module's own directory does not go
# on sys.path; PYTHONPATH makes this checkout's mcm the one imported).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -P \
  "$root/mcm/testing/envtest/build.py" build "$@"
