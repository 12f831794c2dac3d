"""The driver as a gRPC sidecar: :class:`GrpcDriver` (client) and :func:`serve` (server).

The protocol is ``mcm/driver/proto/mcm/driver/v1/driver.proto``; ``docs/driver.md`` explains how
to write a sidecar in any language.
"""

from mcm.driver.grpc.client import GrpcDriver
from mcm.driver.grpc.server import DriverServer, serve
from mcm.driver.grpc.status import UndecodableDriverError
from mcm.driver.grpc.tls import InsecureEndpointError, channel_credentials, server_credentials

__all__ = [
    "DriverServer",
    "GrpcDriver",
    "InsecureEndpointError",
    "UndecodableDriverError",
    "channel_credentials",
    "serve",
    "server_credentials",
]
