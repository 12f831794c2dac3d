"""``GrpcDriver``: the :class:`~mcm.driver.driver.Driver` contract served by a sidecar over gRPC.

Guarantees:

- Every call has a deadline: the smaller of the driver's ``timeout`` and the time left in the
  call's :class:`~mcm.driver.context.CallContext`. A context that has already expired or been
  cancelled fails at once (``DeadlineExceeded`` / ``Canceled``) without touching the network.
- Calls never wait for a sidecar that is not there: a missing or dead sidecar fails the call
  promptly with ``Unavailable`` and a message naming the endpoint, which the controller retries
  soon. The channel reconnects by itself (backoff capped at a few seconds) once it is back.
- Cancelling the call's context cancels the call in flight: it fails at once with ``Canceled``
  and the sidecar sees the cancellation (its driver's context is cancelled too).
- Errors come back as the driver raised them (code, message, ``last_known_state``), with the
  message scrubbed of the request's secret data and capped; see :mod:`mcm.driver.grpc.status`.
- Keepalive pings detect a silently dropped TCP connection while no call is running.
- No message beyond :data:`~mcm.driver.grpc.limits.MAX_MESSAGE_BYTES` (4 MiB) is sent or
  accepted: a larger answer fails the call with ``ResourceExhausted`` instead of being read.
- The cloud API requests the sidecar's driver counted come back in a trailer and are replayed
  into the call's context (:mod:`mcm.driver.grpc.cloudapi`), on success and on failure.

Endpoints: ``unix:/absolute/path`` (or ``unix:///absolute/path``) and ``host:port``. Pass
``credentials`` (:func:`~mcm.driver.grpc.tls.channel_credentials`, or any
``grpc.ssl_channel_credentials(...)``) to talk TLS to a sidecar on another host; with a client
certificate in them and a server that asks for one, the link is mutual TLS. Every call carries
cloud credentials and userData with a bootstrap token, so plaintext to an endpoint that is not a
unix socket or loopback is refused (:class:`~mcm.driver.grpc.tls.InsecureEndpointError`) unless
``insecure=True`` (``--driver-insecure``), which logs a warning. ``server_name`` overrides the
name the sidecar's certificate is checked against (when dialling an address).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import grpc
import structlog

from mcm.driver.codes import Code
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
)
from mcm.driver.errors import MachineError
from mcm.driver.grpc.cloudapi import replay
from mcm.driver.grpc.limits import MAX_MESSAGE_BYTES
from mcm.driver.grpc.rpcs import (
    ALL_RPCS,
    CREATE_MACHINE,
    DELETE_MACHINE,
    GET_MACHINE_STATUS,
    GET_VOLUME_IDS,
    INITIALIZE_MACHINE,
    LIST_MACHINES,
    Rpc,
)
from mcm.driver.grpc.status import error_from_rpc
from mcm.driver.grpc.tls import InsecureEndpointError, is_local_endpoint

__all__ = ["DEFAULT_TIMEOUT", "GrpcDriver"]

log = structlog.get_logger(__name__)

DEFAULT_TIMEOUT = 300.0
"""Default per-call deadline in seconds (cloud calls such as VM creation can take minutes)."""

CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 3_000),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_metadata_size", 8 * 1024 * 1024),
    ("grpc.absolute_max_metadata_size", 16 * 1024 * 1024),
)
"""Client channel settings; the server in :mod:`mcm.driver.grpc.server` accepts these pings.
Messages are capped at :data:`~mcm.driver.grpc.limits.MAX_MESSAGE_BYTES` each way, as there."""

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class GrpcDriver(Driver):
    """A driver whose calls go to a sidecar at ``endpoint``; close it when done."""

    def __init__(
        self,
        endpoint: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        insecure: bool = False,
        server_name: str | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.endpoint = endpoint
        self.timeout = timeout
        self.transport = _transport(endpoint, credentials, insecure)
        self._channel = _channel(endpoint, credentials, server_name)
        log.info("driver_client_started", endpoint=endpoint, transport=self.transport)
        self._stubs: dict[str, grpc.UnaryUnaryMultiCallable[Any, Any]] = {
            rpc.name: self._channel.unary_unary(
                rpc.path,
                request_serializer=rpc.pb_request.SerializeToString,
                response_deserializer=rpc.pb_response.FromString,
            )
            for rpc in ALL_RPCS
        }

    def __enter__(self) -> GrpcDriver:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel; later calls fail."""
        self._channel.close()

    def wait_ready(self, timeout: float) -> bool:
        """Block until the sidecar accepts connections or ``timeout`` seconds pass."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            return False
        return True

    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        return self._invoke(CREATE_MACHINE, ctx, request)

    def initialize_machine(
        self, ctx: CallContext, request: InitializeMachineRequest
    ) -> InitializeMachineResponse:
        return self._invoke(INITIALIZE_MACHINE, ctx, request)

    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        return self._invoke(DELETE_MACHINE, ctx, request)

    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        return self._invoke(GET_MACHINE_STATUS, ctx, request)

    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        return self._invoke(LIST_MACHINES, ctx, request)

    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        return self._invoke(GET_VOLUME_IDS, ctx, request)

    def _invoke(self, rpc: Rpc[Req, Resp, Any, Any], ctx: CallContext, request: Req) -> Resp:
        """Send one call and convert the answer (or the failure) back to contract types."""
        timeout = self._deadline_for(ctx, rpc.name)
        message = rpc.encode_request(request)
        secret_data: Mapping[str, bytes] | None = getattr(request, "secret_data", None)
        try:
            call = self._stubs[rpc.name].future(message, timeout=timeout)
        except ValueError as exc:  # the channel was closed
            raise MachineError(Code.Unavailable, f"driver client for {self.endpoint} is closed") from exc
        stop_watching = ctx.on_cancel(call.cancel)
        try:
            reply = call.result()
        except grpc.FutureCancelledError:
            raise MachineError(Code.Canceled, f"{rpc.name} call was cancelled by its caller") from None
        except grpc.RpcError as exc:
            replay(_trailing_metadata(exc), ctx.cloud_api)
            error = error_from_rpc(
                exc, endpoint=self.endpoint, method=rpc.name, timeout=timeout, secret_data=secret_data
            )
            log.debug("driver_call_failed", method=rpc.name, endpoint=self.endpoint, error=str(error))
            raise error from None
        finally:
            stop_watching()
        replay(call.trailing_metadata(), ctx.cloud_api)
        return rpc.decode_response(reply)

    def _deadline_for(self, ctx: CallContext, method: str) -> float:
        """Seconds this call may take; raises when the context is already done."""
        if ctx.cancelled.is_set():
            raise MachineError(Code.Canceled, f"{method} call was cancelled before it was sent")
        remaining = ctx.remaining()
        if remaining is None:
            return self.timeout
        if remaining <= 0:
            raise MachineError(Code.DeadlineExceeded, f"{method} call deadline passed before it was sent")
        return min(self.timeout, remaining)


def _transport(endpoint: str, credentials: grpc.ChannelCredentials | None, insecure: bool) -> str:
    """``tls``, ``local`` or ``insecure``; refuses plaintext to another host unless ``insecure``."""
    if credentials is not None:
        return "tls"
    if is_local_endpoint(endpoint):
        return "local"
    if not insecure:
        raise InsecureEndpointError(
            f"driver endpoint {endpoint} is not a unix socket or loopback address: every call carries "
            "cloud credentials and userData, so talk TLS (--driver-ca-file, plus --driver-cert-file and "
            "--driver-key-file for mutual TLS) or allow plaintext explicitly (--driver-insecure)"
        )
    log.warning("driver_client_insecure", endpoint=endpoint, reason="plaintext to a non-loopback address")
    return "insecure"


def _channel(
    endpoint: str, credentials: grpc.ChannelCredentials | None, server_name: str | None
) -> grpc.Channel:
    if credentials is None:
        return grpc.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
    options: tuple[tuple[str, Any], ...] = CHANNEL_OPTIONS
    if server_name:
        options = (*options, ("grpc.ssl_target_name_override", server_name))
    return grpc.secure_channel(endpoint, credentials, options=options)


def _trailing_metadata(exc: grpc.RpcError) -> Any:
    """The trailers of a failed call (``None`` when the error carries none)."""
    trailing = getattr(exc, "trailing_metadata", None)
    return trailing() if callable(trailing) else None
