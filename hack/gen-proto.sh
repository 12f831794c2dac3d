#!/usr/bin/env bash
# Regenerate the Python code of the driver sidecar protocol (mcm/driver/proto/**/*.proto) with the
# grpcio-tools of .venv. Usage: hack/gen-proto.sh [OUT_DIR]   (default: in place, mcm/driver/proto)
# tests/driver/test_proto_generated.py generates into a temporary directory and compares.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
PROTO_ROOT=mcm/driver/proto
OUT=${1:-$PROTO_ROOT}
mkdir -p "$OUT"

mapfile -t PROTOS < <(cd "$PROTO_ROOT" && find . -name '*.proto' -printf '%P\n' | sort)
"$PY" -m grpc_tools.protoc -I "$PROTO_ROOT" \
  --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" "${PROTOS[@]}"

# protoc writes imports relative to the proto root ("from mcm.driver.v1 import ..."); the code
# lives inside the mcm package, under mcm.driver.proto.
find "$OUT" -name '*_pb2*.py*' -print0 | xargs -0 sed -i -E \
  's/^(from|import) mcm\.driver\.(v[0-9]+)/\1 mcm.driver.proto.mcm.driver.\2/'
