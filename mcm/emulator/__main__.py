"""``python -m mcm.emulator serve``: run one emulator until SIGTERM or SIGINT.

After binding it writes the kubeconfig and, if asked, a ready file
``{"url": ..., "admin_url": ..., "kubeconfig": ..., "pid": ...}`` (written atomically), so a
parent process can wait for the file instead of polling the port. The admin listener serves the
emulator's controls (see :mod:`mcm.emulator.admin`).

Guarantees: on SIGTERM/SIGINT open watch streams end cleanly (terminating chunk), the process
exits 0 within ``--grace`` seconds plus the close, and the ready file, kubeconfig and TLS material
it wrote are removed unless ``--keep-files``. The request log (``--request-log``) is line-buffered.

Exposure: a plaintext API on a host other than loopback is refused (exit 2) unless ``--insecure``;
the (plain-HTTP, token-less) admin listener binds to loopback unless ``--insecure``. The
kubeconfig (it may hold the bearer token) and the TLS directory are readable by their owner only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path

import structlog

from mcm.emulator.admin import AdminServer
from mcm.emulator.emulator import Emulator
from mcm.emulator.exposure import InsecureListenError, check_listen


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcm.emulator", description="Kubernetes API server emulator"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve one emulated cluster until SIGTERM")
    serve.add_argument(
        "--host", default="127.0.0.1", help="listen address (non-loopback: --tls or --insecure)"
    )
    serve.add_argument("--port", type=int, default=0, help="0: the kernel picks a free port")
    serve.add_argument("--name", default="emulator", help="cluster, user and context name in the kubeconfig")
    serve.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    serve.add_argument("--crds", help="a directory (or file) of CustomResourceDefinition YAML to install")
    serve.add_argument("--namespace", help="default namespace of the kubeconfig context")
    serve.add_argument("--tls", action="store_true", help="serve https with a generated CA")
    serve.add_argument("--token", help="bearer token required over https")
    serve.add_argument("--ready-file", help="JSON file written once the server is ready")
    serve.add_argument("--request-log", help="append the request log as JSON lines to this file")
    serve.add_argument("--no-controllers", action="store_true", help="do not run the simulated controllers")
    serve.add_argument(
        "--run-pods",
        action="store_true",
        help="the simulated kubelet starts pods bound to an existing node (Running and Ready)",
    )
    serve.add_argument(
        "--history-size", type=int, default=10_000, help="watch history entries kept per resource (10,000)"
    )
    serve.add_argument(
        "--admin-port", type=int, default=0, help="port of the admin (controls) listener; -1: none"
    )
    serve.add_argument(
        "--keep-files", action="store_true", help="keep the ready file, kubeconfig and TLS material on exit"
    )
    serve.add_argument(
        "--grace", type=float, default=5.0, help="seconds open watches get to end on SIGTERM (5)"
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow plaintext API and admin listeners on a non-loopback --host (anyone there can use them)",
    )
    return parser


def admin_host(args: argparse.Namespace) -> str:
    """Where the admin listener binds: it speaks plain HTTP without a token, so loopback unless
    ``--insecure`` (then beside the API on ``--host``)."""
    return str(args.host) if args.insecure and not args.tls else "127.0.0.1"


def _write_ready(path: Path, emulator: Emulator, kubeconfig: Path, admin_url: str | None) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    info = {"url": emulator.url, "admin_url": admin_url, "kubeconfig": str(kubeconfig), "pid": os.getpid()}
    tmp.write_text(json.dumps(info), encoding="utf-8")
    tmp.replace(path)


def _refusal(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot be served (printed as ``error: ...``), else ``None``."""
    if args.crds and not Path(args.crds).exists():
        return f"--crds {args.crds}: no such file or directory"
    if args.run_pods and args.no_controllers:
        return "--run-pods needs the simulated controllers (drop --no-controllers)"
    try:
        check_listen(args.host, tls=args.tls, insecure=args.insecure, what="the emulator")
    except InsecureListenError as exc:
        return str(exc)
    return None


def serve(args: argparse.Namespace) -> int:
    """Run until a termination signal arrives."""
    refusal = _refusal(args)
    if refusal is not None:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    written: list[Path] = []
    tls_dir = Path(args.kubeconfig).parent / f"{args.name}-tls" if args.tls else None
    emulator = Emulator(
        name=args.name,
        host=args.host,
        port=args.port,
        tls=args.tls,
        token=args.token,
        log_file=args.request_log,
        controllers=not args.no_controllers,
        history_size=args.history_size,
        tls_dir=tls_dir,
        insecure=args.insecure,
    )
    admin: AdminServer | None = None
    try:
        emulator.start()
        if args.run_pods:
            emulator.kubelet.run_pods = True
        if args.crds:
            emulator.install_crds([args.crds])
        kubeconfig = emulator.write_kubeconfig(args.kubeconfig, namespace=args.namespace)
        written.append(kubeconfig)
        if args.admin_port >= 0:
            admin = AdminServer(emulator, admin_host(args), args.admin_port, insecure=args.insecure)
        if args.ready_file:
            _write_ready(Path(args.ready_file), emulator, kubeconfig, admin.url if admin else None)
            written.append(Path(args.ready_file))
        print(f"serving {emulator.url} (kubeconfig {kubeconfig})", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        if admin is not None:
            admin.close()
        emulator.shutdown(grace=args.grace)
        if not args.keep_files:
            for path in written:
                path.unlink(missing_ok=True)
            if tls_dir is not None:
                shutil.rmtree(tls_dir, ignore_errors=True)
    return 0


def configure_logging() -> None:
    """Log to stderr; tracebacks are plain, never with local variables (request bodies hold secrets)."""
    console = structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), console],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parser().parse_args(argv)
    configure_logging()
    if args.command == "serve":
        return serve(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
