#!/usr/bin/env bash
# Build upstream's two Go binaries (gardener/machine-controller-manager, from the Go module proxy),
# the same-run yardsticks of benchmarks/vs_upstream.py and benchmarks/manager.py and the other side
# of the interop tests (tests/interop):
#   machine-controller          the machine controller (pkg/util/provider/app) with the in-memory
#                               driver of hack/upstream-mcm/main.go
#   machine-controller-manager  the MachineSet/MachineDeployment manager (upstream's
#                               cmd/machine-controller-manager, as hack/upstream-mcm/manager/main.go
#                               runs it)
# Prints both paths, one a line (the controller's first). A no-op when both are built.
#
#   hack/upstream-mcm.sh                 # build what is missing (first time: many minutes on 2 cores)
#   hack/upstream-mcm.sh --path          # print where the machine controller is (or would be); build nothing
#   hack/upstream-mcm.sh --manager-path  # print where the manager is (or would be); build nothing
#
# The binaries go to ${MCM_UPSTREAM_CACHE:-~/.cache/mcm-upstream}/<version>/, outside the
# repository, with every CRD of that release beside them in crds/ (the release writes fields, such
# as status.node, that today's CRDs prune, and its manager also watches the provider-specific
# machine classes). Each binary has a stamp (.<binary>.stamp): the hash of go.mod, go.sum and its
# main.go; a binary whose stamp differs is rebuilt. Nothing built is committed.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
MODULE_DIR="$HERE/upstream-mcm"
MODULE=github.com/gardener/machine-controller-manager
VERSION="$(awk -v m="$MODULE" '$1 == m {print $2} $1 == "require" && $2 == m {print $3}' "$MODULE_DIR/go.mod")"
if [ -z "$VERSION" ]; then
  echo "hack/upstream-mcm/go.mod does not require $MODULE" >&2
  exit 2
fi
CACHE="${MCM_UPSTREAM_CACHE:-$HOME/.cache/mcm-upstream}/$VERSION"
CONTROLLER="$CACHE/machine-controller"
MANAGER="$CACHE/machine-controller-manager"

case "${1:-}" in
  --path) echo "$CONTROLLER"; exit 0 ;;
  --manager-path) echo "$MANAGER"; exit 0 ;;
  "") ;;
  *) echo "usage: hack/upstream-mcm.sh [--path|--manager-path]" >&2; exit 2 ;;
esac

# stamp PACKAGE_DIR: what the binary built from that package of the module is stamped with.
stamp() {
  cat "$MODULE_DIR/go.mod" "$MODULE_DIR/go.sum" "$1/main.go" | sha256sum | cut -d' ' -f1
}
# built BINARY PACKAGE_DIR: whether BINARY is there and stamped with the current sources.
built() {
  [ -x "$1" ] && [ -f "$(dirname "$1")/.$(basename "$1").stamp" ] \
    && [ "$(cat "$(dirname "$1")/.$(basename "$1").stamp")" = "$(stamp "$2")" ]
}
if built "$CONTROLLER" "$MODULE_DIR" && built "$MANAGER" "$MODULE_DIR/manager" \
  && [ -f "$CACHE/crds/machine.sapcloud.io_machinedeployments.yaml" ] \
  && [ -f "$CACHE/crds/machine.sapcloud.io_awsmachineclasses.yaml" ]; then
  echo "$CONTROLLER"
  echo "$MANAGER"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go is not installed: cannot build upstream's machine controller and manager" >&2
  exit 2
fi
# The checksum database does not list this release: its hashes come from go.sum here instead.
export GONOSUMDB=github.com/gardener GOFLAGS=-mod=mod

copy_crds() {
  local dir
  dir="$(cd "$MODULE_DIR" && go mod download -json "$MODULE@$VERSION" \
    | awk -F'"' '$2 == "Dir" {print $4}')"
  rm -rf "$CACHE/crds.tmp"
  mkdir -p "$CACHE/crds.tmp"
  cp "$dir"/kubernetes/crds/machine.sapcloud.io_*.yaml "$CACHE/crds.tmp/"
  chmod u+w "$CACHE"/crds.tmp/*.yaml
  rm -rf "$CACHE/crds"
  mv "$CACHE/crds.tmp" "$CACHE/crds"
}

# build BINARY PACKAGE_DIR WHAT
build() {
  local start
  if built "$1" "$2"; then
    return 0
  fi
  start=$(date +%s)
  echo "building upstream $3 $VERSION ($(go env GOVERSION)) into $CACHE" >&2
  (cd "$2" && CGO_ENABLED=0 go build -trimpath -o "$1.tmp" .)
  mv "$1.tmp" "$1"
  stamp "$2" > "$(dirname "$1")/.$(basename "$1").stamp"
  echo "built $(basename "$1") in $(( $(date +%s) - start )) s" >&2
}

mkdir -p "$CACHE"
build "$CONTROLLER" "$MODULE_DIR" "machine controller"
build "$MANAGER" "$MODULE_DIR/manager" "machine-controller-manager"
copy_crds
echo "$CONTROLLER"
echo "$MANAGER"
