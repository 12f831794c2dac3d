#!/usr/bin/env bash
# Build upstream's Go machine controller (gardener/machine-controller-manager, from the Go module
# proxy) with the in-memory driver of hack/upstream-mcm/main.go, the same-run yardstick of
# benchmarks/vs_upstream.py. Prints the binary's path. A no-op when it is already built.
#
#   hack/upstream-mcm.sh            # build (first time: several minutes on 2 cores) and print the path
#   hack/upstream-mcm.sh --path     # print where the binary is (or would be); build nothing
#
# The binary goes to ${MCM_UPSTREAM_CACHE:-~/.cache/mcm-upstream}/<version>/machine-controller,
# outside the repository, with that release's Machine CRDs beside it in crds/ (the release writes
# fields, such as status.node, that today's CRDs prune). Nothing built is committed.
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
BINARY="$CACHE/machine-controller"

if [ "${1:-}" = "--path" ]; then
  echo "$BINARY"
  exit 0
fi
if [ -x "$BINARY" ] && [ -d "$CACHE/crds" ] && [ "$BINARY" -nt "$MODULE_DIR/main.go" ] \
  && [ "$BINARY" -nt "$MODULE_DIR/go.mod" ]; then
  echo "$BINARY"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "go is not installed: cannot build upstream's machine controller" >&2
  exit 2
fi
# The checksum database does not list this release: its hashes come from go.sum here instead.
export GONOSUMDB=github.com/gardener GOFLAGS=-mod=mod

copy_crds() {
  local dir
  dir="$(cd "$MODULE_DIR" && go mod download -json "$MODULE@$VERSION" \
    | awk -F'"' '$2 == "Dir" {print $4}')"
  mkdir -p "$CACHE/crds.tmp"
  for kind in machines machineclasses machinesets machinedeployments; do
    cp "$dir/kubernetes/crds/machine.sapcloud.io_$kind.yaml" "$CACHE/crds.tmp/"
  done
  rm -rf "$CACHE/crds"
  mv "$CACHE/crds.tmp" "$CACHE/crds"
}

mkdir -p "$CACHE"
if [ -x "$BINARY" ] && [ "$BINARY" -nt "$MODULE_DIR/main.go" ] && [ "$BINARY" -nt "$MODULE_DIR/go.mod" ]; then
  copy_crds
  echo "$BINARY"
  exit 0
fi
start=$(date +%s)
echo "building upstream machine controller $VERSION ($(go env GOVERSION)) into $CACHE" >&2
(cd "$MODULE_DIR" && CGO_ENABLED=0 go build -trimpath -o "$BINARY.tmp" .)
mv "$BINARY.tmp" "$BINARY"
copy_crds
echo "built in $(( $(date +%s) - start )) s" >&2
echo "$BINARY"
