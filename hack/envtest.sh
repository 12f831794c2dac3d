#!/usr/bin/env bash
# Build the real control plane that tests/realapi runs on: etcd, kube-apiserver and
# kube-controller-manager, from the Go module in hack/envtest (its go.mod pins the releases).
#
# The binaries go to a cache outside the repository:
#   ${MCM_ENVTEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/mcm-envtest}/<kubernetes version>/bin
# A second run with the same go.mod and go.sum is a no-op. The last line printed on stdout is
# that bin directory; progress and timings go to stderr.
#
# Usage: hack/envtest.sh [--print-dir]   (--print-dir: only print the directory, build nothing)
# Exit status: 0 built or already built; 2 no `go` on PATH; 1 the build failed.
set -euo pipefail
cd "$(dirname "$0")/envtest"

say() { echo "envtest: $*" >&2; }

k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' go.mod)
cache_root=${MCM_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcm-envtest}
bin_dir="$cache_root/$k8s_version/bin"
binaries=(etcd kube-apiserver kube-controller-manager)

if [ "${1:-}" = "--print-dir" ]; then
  echo "$bin_dir"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  say "no 'go' on PATH: cannot build the real control plane"
  exit 2
fi

stamp=$(cat go.mod go.sum etcd/main.go | sha256sum | cut -c1-16)-$(go env GOVERSION)
built() {
  [ "$(cat "$bin_dir/.stamp" 2>/dev/null)" = "$stamp" ] || return 1
  local b
  for b in "${binaries[@]}"; do [ -x "$bin_dir/$b" ] || return 1; done
}
if built; then
  say "kubernetes $k8s_version binaries already built in $bin_dir"
  echo "$bin_dir"
  exit 0
fi

start=$(date +%s)
mkdir -p "$cache_root/$k8s_version"
work=$(mktemp -d "$cache_root/$k8s_version/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

say "downloading modules for kubernetes $k8s_version (once per module cache)"
go mod download

minor=${k8s_version#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for kv in gitVersion="$k8s_version" gitMajor=1 gitMinor="$minor" gitTreeState=clean \
  buildDate="$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
  ldflags="$ldflags -X k8s.io/component-base/version.$kv"
done

# One `go build` for all three shares the compilation of their common packages. -v names each
# package as it is compiled: count them as progress (about 2,600 on a cold cache).
progress() {
  local n=0 line
  while IFS= read -r line; do
    if [[ $line =~ ^[A-Za-z0-9_./~-]+$ ]]; then
      n=$((n + 1))
      if ((n % 100 == 0)); then say "  $n packages compiled ($(($(date +%s) - start))s)"; fi
    else
      echo "$line" >&2
    fi
  done
  say "  $n packages compiled"
}
say "building ${binaries[*]} with $(go env GOVERSION) on $(nproc) cores (a cold build takes a while)"
if ! go build -v -trimpath -ldflags "$ldflags" -o "$work/" ./etcd \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager 2>&1 | progress; then
  say "build failed"
  exit 1
fi

mkdir -p "$bin_dir"
for b in "${binaries[@]}"; do mv -f "$work/$b" "$bin_dir/$b"; done
echo "$stamp" >"$bin_dir/.stamp"
say "built kubernetes $k8s_version binaries in $(($(date +%s) - start))s: $bin_dir"
echo "$bin_dir"
