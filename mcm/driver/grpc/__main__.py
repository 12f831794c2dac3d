"""Run a Python driver as a gRPC sidecar: ``python -m mcm.driver.grpc --driver MODULE:FACTORY``.

``FACTORY`` is a class or function in ``MODULE`` that takes no arguments and returns a
:class:`~mcm.driver.driver.Driver`. The sidecar prints ``serving <endpoint>`` on stdout once it
accepts calls (with the real port when ``--endpoint`` asks for port 0), logs to stderr, and on
SIGTERM or SIGINT stops accepting calls and gives running ones ``--grace`` seconds.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

import structlog

from mcm.driver.driver import Driver
from mcm.driver.grpc.server import serve

DEFAULT_ENDPOINT = "unix:/var/run/mcm/driver.sock"


def load_driver(spec: str) -> Driver:
    """Build the driver named ``MODULE:FACTORY``; raises ``ValueError`` with a clear reason."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--driver must look like MODULE:FACTORY, got {spec!r}")
    factory: Callable[[], object] = getattr(importlib.import_module(module_name), attr)
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
    parser.add_argument("--grace", type=float, default=10.0, help="seconds running calls get on shutdown")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        driver = load_driver(args.driver)
    except (ImportError, AttributeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    server = serve(driver, args.endpoint, max_workers=args.max_workers)
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
