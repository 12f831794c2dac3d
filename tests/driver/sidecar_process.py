"""A FakeDriver sidecar in its own process, for the end-to-end tests.

Usage: ``python sidecar_process.py ENDPOINT``. Prints ``READY <endpoint>`` once serving and
``HANG`` when a call for machine ``hang`` starts; serves until stdin closes. Scripted machines:
``code-<n>`` fails ``get_machine_status`` with machine code ``n``; ``broken`` raises a plain
exception; ``hang`` blocks until the call is cancelled.
"""

from __future__ import annotations

import sys

import structlog

from mcm.driver import CallContext, Code, FakeDriver, GetMachineStatusResponse, MachineError
from mcm.driver.fake import DriverRequest, DriverResponse
from mcm.driver.grpc import serve


def hang(ctx: CallContext, request: DriverRequest) -> DriverResponse:
    print("HANG", flush=True)
    ctx.cancelled.wait(60)
    return GetMachineStatusResponse("fake:///hang", "hang")


def scripted_driver() -> FakeDriver:
    fake = FakeDriver(initialization=True)
    for code in Code:
        error = MachineError(code, f"scripted {code.name}", last_known_state=f"state-{int(code)}")
        fake.always("get_machine_status", error, machine=f"code-{int(code)}")
    fake.always("get_machine_status", RuntimeError("driver bug"), machine="broken")
    fake.always("get_machine_status", hang, machine="hang")
    return fake


def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    server = serve(scripted_driver(), sys.argv[1])
    print(f"READY {server.endpoint}", flush=True)
    sys.stdin.read()
    server.stop(None)


if __name__ == "__main__":
    main()
