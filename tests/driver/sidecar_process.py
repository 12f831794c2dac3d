"""The scripted FakeDriver the end-to-end tests serve in a separate process.

Run as ``python -m mcm.driver.grpc --driver tests.driver.sidecar_process:scripted_driver``.
Scripted machines: ``code-<n>`` fails ``get_machine_status`` with machine code ``n``; ``broken``
raises a plain exception; ``hang`` prints ``HANG`` on stdout and blocks until the call is
cancelled.
"""

from __future__ import annotations

from mcm.driver import CallContext, Code, FakeDriver, GetMachineStatusResponse, MachineError
from mcm.driver.fake import DriverRequest, DriverResponse


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
