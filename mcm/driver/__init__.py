"""The driver contract between the machine controller and a provider.

Start with :class:`Driver` (the six methods) and :class:`MachineError` (how a driver fails);
``docs/driver.md`` states the rules a driver must follow. :class:`FakeDriver` is an in-memory
driver for tests; :mod:`mcm.driver.grpc` runs a driver out of process as a gRPC sidecar.
Callers wrap a driver in :class:`SafeDriver`, so that every error comes back as a
:class:`MachineError` scrubbed of the request's secret data (:func:`scrub_message`).
"""

from mcm.driver.codes import RETRYABLE_CODES, Code, code_name, string_to_code
from mcm.driver.context import NO_CLOUD_API_METRICS, CallContext, CloudApiMetrics
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
    MachineResponse,
)
from mcm.driver.errors import MachineError, Status, status_from_error
from mcm.driver.fake import DriverCall, FakeDriver, FakeVM
from mcm.driver.safe import SafeDriver, safe_error
from mcm.driver.scrub import MAX_MESSAGE, REDACTED, scrub_message

__all__ = [
    "MAX_MESSAGE",
    "NO_CLOUD_API_METRICS",
    "REDACTED",
    "RETRYABLE_CODES",
    "CallContext",
    "CloudApiMetrics",
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
    "MachineResponse",
    "SafeDriver",
    "Status",
    "code_name",
    "safe_error",
    "scrub_message",
    "status_from_error",
    "string_to_code",
]
