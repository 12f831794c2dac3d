"""The driver contract between the machine controller and a provider.

Start with :class:`Driver` (the six methods) and :class:`MachineError` (how a driver fails);
``docs/driver.md`` states the rules a driver must follow. :class:`FakeDriver` is an in-memory
driver for tests; :mod:`mcm.driver.grpc` runs a driver out of process as a gRPC sidecar.
"""

from mcm.driver.codes import RETRYABLE_CODES, Code, code_name, string_to_code
from mcm.driver.context import CallContext
from mcm.driver.driver import (
    CreateMachineRequest,
    CreateMachineResponse,
    DeleteMachineRequest,
    DeleteMachineResponse,
    Driver,
    GetMachineStatusRequest,
    GetMachineStatusResponse,
    GetVolumeIDsRequest,
    GetVolumeIDsResponse,
    InitializeMachineRequest,
    InitializeMachineResponse,
    ListMachinesRequest,
    ListMachinesResponse,
    MachineRequest,
)
from mcm.driver.errors import MachineError, Status, status_from_error
from mcm.driver.fake import DriverCall, FakeDriver, FakeVM

__all__ = [
    "RETRYABLE_CODES",
    "CallContext",
    "Code",
    "CreateMachineRequest",
    "CreateMachineResponse",
    "DeleteMachineRequest",
    "DeleteMachineResponse",
    "Driver",
    "DriverCall",
    "FakeDriver",
    "FakeVM",
    "GetMachineStatusRequest",
    "GetMachineStatusResponse",
    "GetVolumeIDsRequest",
    "GetVolumeIDsResponse",
    "InitializeMachineRequest",
    "InitializeMachineResponse",
    "ListMachinesRequest",
    "ListMachinesResponse",
    "MachineError",
    "MachineRequest",
    "Status",
    "code_name",
    "status_from_error",
    "string_to_code",
]
