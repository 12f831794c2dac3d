"""The in-process Kubernetes API server emulator (docs/emulator.md).

``Emulator`` is a facade: it builds and wires the parts and offers the controls tests use; the
behaviour lives in the parts: ``store.py`` (objects, resourceVersions, history), ``storage.py``,
``deletion.py`` and ``eviction.py`` (REST semantics), ``handlers.py`` (verbs), ``frontend.py``
(pause modes, auth, faults, stats), ``server.py`` (HTTP transport), ``watch.py``,
``crdserving.py`` and ``controllers/``. Guarantees:

- ``start()`` binds ``host:port`` (port 0: the kernel picks; later starts re-bind the same port)
  and serves until ``stop()``. A plaintext emulator on a non-loopback host is refused
  (:class:`~mcm.emulator.exposure.InsecureListenError`) unless ``insecure=True``. Data, RV
  counter and history survive ``stop``/``start``.
- ``pause("refuse"|"hang"|"error")`` makes the server look unreachable in three ways;
  ``resume()`` ends it.
- Test access (``get``, ``list``, ``wait_for``, ``history``, ``seed``) goes to the store directly,
  is not counted in stats and returns read-only dicts.
- Simulated controllers (``mcm.emulator.controllers``) start with the first ``start()`` unless
  ``controllers=False``; a controller that fails to start is logged and the server runs without.
"""

from __future__ import annotations

import builtins
import secrets
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog

from mcm.emulator.controllers import start_controllers
from mcm.emulator.crdserving import follow_crds, install_crds
from mcm.emulator.discovery import KUBERNETES_VERSION, Discovery
from mcm.emulator.exposure import check_listen
from mcm.emulator.faults import Faults
from mcm.emulator.frontend import Frontend
from mcm.emulator.handlers import Api
from mcm.emulator.kubeconfig import TlsMaterial, make_tls_material, write_kubeconfig, write_private
from mcm.emulator.listing import NODE_INDEX
from mcm.emulator.registry import Registry, ResourceType
from mcm.emulator.server import HttpServer
from mcm.emulator.services import seed_kubernetes_service
from mcm.emulator.stats import Stats
from mcm.emulator.storage import Storage
from mcm.emulator.store import Change, Obj, VersionedStore
from mcm.emulator.watch import WatchHub
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["Emulator"]

log = structlog.get_logger(__name__)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _watch_hub(store: VersionedStore, min_request_timeout: float, bookmark_interval: float) -> WatchHub:
    """The watch hub of ``store`` with the server's watch timeout and bookmark interval."""
    hub = WatchHub(store)
    hub.min_request_timeout = min_request_timeout
    hub.bookmark_interval = bookmark_interval
    return hub


def _bearer_token(token: str | None, tls: bool) -> str | None:
    """The given token, else a random one when serving TLS, else none."""
    if token is not None:
        return token
    return secrets.token_hex(16) if tls else None


class Emulator:
    """One emulated cluster: API server, store and simulated controllers."""

    def __init__(
        self,
        *,
        name: str = "emulator",
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        token: str | None = None,
        base_rv: int = 1,
        history_size: int = 10_000,
        history_age: float | None = None,
        freshness_timeout: float = 3.0,
        git_version: str = KUBERNETES_VERSION,
        min_request_timeout: float = 1800.0,
        bookmark_interval: float = 60.0,
        log_file: str | Path | None = None,
        controllers: bool = True,
        tls_dir: str | Path | None = None,
        clock: Clock = REAL_CLOCK,
        insecure: bool = False,
    ) -> None:
        check_listen(host, tls=tls, insecure=insecure, what="the emulator")
        self.name = name
        self.clock = clock
        self.store = VersionedStore(base_rv, history_size, history_age)
        self.registry = Registry()
        self.storage = Storage(self.store, self.registry)
        self.discovery = Discovery(self.registry, git_version)
        self.watches = _watch_hub(self.store, min_request_timeout, bookmark_interval)
        self.faults = Faults()
        self.stats = Stats(log_file=log_file)
        self.tls: TlsMaterial | None = make_tls_material(tls_dir) if tls else None
        self.token = _bearer_token(token, tls)
        self.api = Api(
            self.storage,
            self.discovery,
            self.watches,
            server_address=self._address,
            freshness_timeout=freshness_timeout,
            clock=clock,
        )
        self.frontend = Frontend(self.api, self.watches, self.faults, self.stats, self.token if tls else None)
        self._server = self._http_server(host, port)
        self._wire_store()
        self._want_controllers = controllers
        self.controllers: Any = None
        self._seed_namespaces()

    def _http_server(self, host: str, port: int) -> HttpServer:
        """The (not yet started) HTTP(S) listener serving the frontend."""
        return HttpServer(
            self.frontend.handle,
            self.frontend.run_watch,
            self.frontend.completed,
            host=host,
            port=port,
            ssl_context=self.tls.server_context() if self.tls else None,
        )

    def _wire_store(self) -> None:
        """Serve CRD-defined types as CRDs are established, and index pods by node."""
        follow_crds(self.store, self.registry)
        self.store.add_index("pods", NODE_INDEX, _node_name)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> Emulator:
        """Bind and serve (same port as before after a stop); start controllers once."""
        if self._want_controllers and self.controllers is None:
            self.controllers = _start_controllers(self)
        self._server.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection (watches end); keep all data."""
        self._server.stop()
        self.watches.drop("close")

    def shutdown(self, grace: float = 5.0) -> None:
        """Graceful :meth:`close` (SIGTERM): stop accepting, end open watches cleanly (each stream
        gets its terminating chunk), wait up to ``grace`` seconds for them, then close."""
        self.faults.set_pause(None)
        self._server.drain(lambda: self.watches.drop("close"), grace)
        self.close()

    def close(self) -> None:
        """Stop serving and stop the controllers."""
        self.faults.set_pause(None)
        self.stop()
        if self.controllers is not None and hasattr(self.controllers, "stop"):
            self.controllers.stop()
        self.controllers = None
        self.stats.close()

    def restart(self, downtime: float = 0.5, reset_history: bool = False) -> None:
        """``stop``, wait ``downtime`` seconds, ``start``; optionally compact history."""
        self.stop()
        if reset_history:
            self.store.compact()
        time.sleep(downtime)
        self._server.start()

    def pause(self, mode: str, drop_on_resume: bool = False) -> None:
        """Look unreachable: ``refuse`` (connections refused), ``hang`` (no answers), ``error`` (503)."""
        self.faults.set_pause(mode, drop_on_resume)
        if mode == "hang":
            self.watches.flowing.clear()
        if mode == "refuse":
            self._server.reset_all()
            self._server.stop()
            self.watches.drop("close")

    def resume(self) -> None:
        """End a pause."""
        mode = self.faults.mode
        if mode == "hang" and self.faults.drop_on_resume:
            self.watches.drop("close")
        self.faults.set_pause(None)
        self.watches.flowing.set()
        if mode == "refuse":
            self._server.start()

    def compact(self, rv: int | None = None) -> None:
        """Raise every history floor to ``rv`` (default: the current RV)."""
        self.store.compact(rv)

    def latency(self, seconds: float, jitter: float = 0.0, **match: Any) -> Any:
        """Delay matching requests (see :meth:`Faults.latency`)."""
        return self.faults.latency(seconds, jitter, **match)

    def watch_delay(self, seconds: float) -> None:
        """Delay every watch event delivery by ``seconds``."""
        self.watches.delay = seconds

    # ------------------------------------------------------------------ simulated controllers

    def _controller(self, name: str) -> Any:
        if self.controllers is None:
            raise RuntimeError("the simulated controllers are not running (Emulator(controllers=False)?)")
        return getattr(self.controllers, name)

    @property
    def kubelet(self) -> Any:
        """The kubelet simulator (``mode``, ``finish(ns, name)``, ``finish_all(node=...)``, ...)."""
        return self._controller("kubelet")

    @property
    def pdb(self) -> Any:
        """The disruption controller (``mode``, ``delay``, ``enabled``)."""
        return self._controller("pdb")

    @property
    def gc(self) -> Any:
        """The garbage collector."""
        return self._controller("gc")

    # ------------------------------------------------------------------ addresses

    @property
    def host(self) -> str:
        """The listening host."""
        return self._server.host

    @property
    def port(self) -> int:
        """The bound port."""
        return self._server.port

    @property
    def url(self) -> str:
        """``http://host:port`` or ``https://...``."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def _address(self) -> str:
        return f"{self.host}:{self.port}"

    def write_kubeconfig(self, path: str | Path, namespace: str | None = None) -> Path:
        """Write a kubeconfig for this emulator (both the Python client and kubectl accept it).

        With TLS, the CA certificate and key are copied next to it as ``<name>-ca.crt``/``.key``.
        """
        ca = self.tls.ca_pem() if self.tls else None
        token = self.token if self.tls else None
        written = write_kubeconfig(path, self.name, self.url, ca_pem=ca, token=token, namespace=namespace)
        if self.tls is not None:
            for source in (self.tls.ca_cert, self.tls.ca_key):
                copy = written.parent / f"{self.name}-{source.name}"
                if copy.resolve() != source.resolve():
                    write_private(copy, source.read_bytes())
        return written

    # ------------------------------------------------------------------ CRDs and fixtures

    def install_crds(
        self, paths: Iterable[str | Path] | str | Path, timeout: float = 5.0
    ) -> builtins.list[Obj]:
        """Create (or replace) CRDs from YAML files or directories and wait until Established."""
        return install_crds(self.storage, paths, lambda check: self.wait_for(check, timeout))

    def _seed_namespaces(self) -> None:
        rt = self.registry.resource("", "namespaces")
        assert rt is not None
        for namespace in DEFAULT_NAMESPACES:
            if self.storage.get(rt, "", namespace) is None:
                self.storage.create(rt, {"metadata": {"name": namespace}})
        seed_kubernetes_service(self.storage)

    def resource_type(self, gvr: str | tuple[str, str] | ResourceType) -> ResourceType:
        """Resolve ``"pods"``, ``"machines.machine.sapcloud.io"`` or ``(group, resource)``."""
        if isinstance(gvr, ResourceType):
            return gvr
        if isinstance(gvr, tuple):
            group, resource = gvr
        else:
            resource, _, group = gvr.partition(".")
        rt = self.registry.resource(group, resource)
        if rt is None:
            raise KeyError(f"resource {gvr!r} is not served")
        return rt

    def get(self, gvr: str | tuple[str, str] | ResourceType, namespace: str, name: str) -> Obj | None:
        """The stored object (read-only), not counted in stats."""
        return self.storage.get(self.resource_type(gvr), namespace, name)

    def list(
        self, gvr: str | tuple[str, str] | ResourceType, namespace: str | None = None
    ) -> builtins.list[Obj]:
        """Stored objects (read-only) in key order."""
        return self.storage.list(self.resource_type(gvr), namespace)

    def history(self, gvr: str | tuple[str, str] | ResourceType) -> builtins.list[Change]:
        """Retained changes of one resource."""
        return self.store.history(self.resource_type(gvr).storage_key)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Wait (bounded) until ``predicate()`` holds, re-checking after each commit."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.store.wait_changed(min(remaining, 0.05))
        return True

    def seed(self, objects: Iterable[Obj], bypass_strategy: bool = False) -> builtins.list[Obj]:
        """Insert objects directly (fixtures); ``bypass_strategy`` keeps status on create."""
        created: builtins.list[Obj] = []
        for obj in objects:
            api_version = str(obj.get("apiVersion", "v1"))
            group = api_version.rpartition("/")[0]
            rt = self.registry.by_kind(group, str(obj.get("kind", "")))
            if rt is None:
                raise KeyError(f"kind {obj.get('kind')} of {api_version} is not served")
            namespace = str(
                (obj.get("metadata") or {}).get("namespace") or ("default" if rt.namespaced else "")
            )
            created.append(self.storage.create(rt, obj, namespace, bypass_strategy=bypass_strategy).obj)
        return created


def _node_name(obj: Obj) -> str | None:
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    return node if isinstance(node, str) and node else None


def _start_controllers(emulator: Emulator) -> Any:
    try:
        return start_controllers(emulator)
    except Exception:
        log.exception("emulator_controllers_failed_to_start")
        return None
