"""The committed protobuf/gRPC code is what hack/gen-proto.sh generates from driver.proto today."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcm.driver.grpc.rpcs import ALL_RPCS, SERVICE_NAME
from mcm.driver.proto.mcm.driver.v1 import driver_pb2

REPO = Path(__file__).resolve().parents[2]
PROTO_ROOT = REPO / "mcm" / "driver" / "proto"


def generated_files(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): path.read_text()
        for path in sorted(root.rglob("*_pb2*"))
        if path.suffix in (".py", ".pyi")
    }


def test_committed_code_equals_a_fresh_generation(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(
        ["bash", str(REPO / "hack" / "gen-proto.sh"), str(tmp_path)],
        check=True,
        env=env,
        capture_output=True,
        timeout=60,
    )
    fresh = generated_files(tmp_path)
    assert set(fresh) == {
        "mcm/driver/v1/driver_pb2.py",
        "mcm/driver/v1/driver_pb2.pyi",
        "mcm/driver/v1/driver_pb2_grpc.py",
    }
    assert generated_files(PROTO_ROOT) == fresh, "run hack/gen-proto.sh and commit the result"


def test_generated_code_imports_as_part_of_the_mcm_package() -> None:
    from mcm.driver.proto.mcm.driver.v1 import driver_pb2_grpc

    assert driver_pb2_grpc.DriverStub is not None
    assert driver_pb2.DESCRIPTOR.package == "mcm.driver.v1"


def test_rpc_table_covers_exactly_the_service_methods() -> None:
    service = driver_pb2.DESCRIPTOR.services_by_name["Driver"]
    assert SERVICE_NAME == "mcm.driver.v1.Driver"
    assert [m.name for m in service.methods] == [rpc.name for rpc in ALL_RPCS]
    for rpc, method in zip(ALL_RPCS, service.methods, strict=True):
        assert rpc.pb_request.DESCRIPTOR is method.input_type
        assert rpc.pb_response.DESCRIPTOR is method.output_type
