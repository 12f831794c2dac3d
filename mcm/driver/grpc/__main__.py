"""Run a Python driver as a gRPC sidecar: ``python -m mcm.driver.grpc --driver MODULE:FACTORY``.

``FACTORY`` is a class or function in ``MODULE`` that takes no arguments and returns a
:class:`~mcm.driver.driver.Driver`. The sidecar prints ``serving <endpoint>`` on stdout once it
accepts calls (with the real port when ``--endpoint`` asks for port 0), logs to stderr, and on
SIGTERM or SIGINT stops accepting calls and gives running ones ``--grace`` seconds.

Plaintext is served on a unix socket or loopback only; another address needs ``--tls-cert-file``
and ``--tls-key-file`` with ``--tls-client-ca-file`` (clients must present a certificate signed
by that CA; ``--tls-any-client`` drops that requirement, with a warning), or an explicit
``--insecure``. Messages are capped at 4 MiB; at most ``--max-workers`` calls run, ``--max-queued``
wait and ``--max-inflight-mib`` MiB of requests are handled at once (beyond: RESOURCE_EXHAUSTED).
Logs never render local variables.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

import grpc

from mcm.driver.driver import Driver
from mcm.driver.grpc import tls
from mcm.driver.grpc.limits import DEFAULT_INFLIGHT_BYTES, MiB
from mcm.driver.grpc.server import InsecureEndpointError, serve
from mcm.driver.importing import import_driver_module
from mcm.runtime import logs

DEFAULT_ENDPOINT = "unix:/var/run/mcm/driver.sock"


def load_driver(spec: str) -> Driver:
    """Build the driver named ``MODULE:FACTORY``; raises ``ValueError`` with a clear reason."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--driver must look like MODULE:FACTORY, got {spec!r}")
    factory: Callable[[], object] = getattr(import_driver_module(module_name), attr)
    driver = factory()
    if not isinstance(driver, Driver):
        raise ValueError(f"{spec} returned {type(driver).__name__}, not a mcm.driver.Driver")
    return driver


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m mcm.driver.grpc", description="Serve a Python driver as a gRPC sidecar."
    )
    parser.add_argument("--driver", required=True, help="MODULE:FACTORY returning the Driver to serve")
    parser.add_argument("--endpoint", default=DEFAULT_ENDPOINT, help="unix:/path or host:port")
    parser.add_argument("--max-workers", type=int, default=16, help="calls served at the same time")
    parser.add_argument(
        "--max-queued", type=int, default=8, help="calls waiting for a worker; more get RESOURCE_EXHAUSTED"
    )
    parser.add_argument(
        "--max-inflight-mib",
        type=int,
        default=DEFAULT_INFLIGHT_BYTES // MiB,
        help="MiB of requests handled at once; a request beyond gets RESOURCE_EXHAUSTED",
    )
    parser.add_argument("--grace", type=float, default=10.0, help="seconds running calls get on shutdown")
    parser.add_argument("--tls-cert-file", help="PEM server certificate (serve TLS)")
    parser.add_argument("--tls-key-file", help="PEM private key of --tls-cert-file")
    parser.add_argument("--tls-client-ca-file", help="PEM CA that client certificates must be signed by")
    parser.add_argument(
        "--tls-any-client",
        action="store_true",
        help="serve TLS off loopback without --tls-client-ca-file (any client may call; logged)",
    )
    parser.add_argument(
        "--insecure", action="store_true", help="allow plaintext on an address other than unix or loopback"
    )
    parser.add_argument("--log-format", choices=logs.FORMATS, default="console", help="log line format")
    return parser.parse_args(argv)


def server_credentials(args: argparse.Namespace) -> grpc.ServerCredentials | None:
    """TLS credentials from the ``--tls-*`` files, or ``None`` without them."""
    return tls.server_credentials(args.tls_cert_file, args.tls_key_file, args.tls_client_ca_file)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(args.log_format)
    try:
        credentials = server_credentials(args)
        driver = load_driver(args.driver)
    except (ImportError, AttributeError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        server = serve(
            driver,
            args.endpoint,
            max_workers=args.max_workers,
            max_queued=args.max_queued,
            max_inflight_bytes=args.max_inflight_mib * MiB,
            credentials=credentials,
            verifies_clients=bool(args.tls_client_ca_file),
            any_client=args.tls_any_client,
            insecure=args.insecure,
        )
    except (InsecureEndpointError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        driver.close()
        return 2
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    print(f"serving {server.endpoint}", flush=True)
    # Wake up now and then: a signal delivered to one of gRPC's threads does not interrupt this
    # wait, and Python runs the handler only when the main thread gets control back.
    while not stop.wait(0.5):
        pass
    server.stop(args.grace)
    driver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
