"""The in-process Kubernetes API server emulator (spec §3, §4).

``Emulator`` ties the store, registry, storage semantics, watch hub, HTTP transport, faults and
stats together. Guarantees:

- ``start()`` binds ``host:port`` (port 0: the kernel picks; later starts re-bind the same port)
  and serves until ``stop()``. Data, RV counter and history survive ``stop``/``start``.
- ``pause("refuse"|"hang"|"error")`` makes the server look unreachable in three ways;
  ``resume()`` ends it.
- Test access (``get``, ``list``, ``wait_for``, ``history``, ``seed``) goes to the store directly,
  is not counted in stats and returns read-only dicts.
- Simulated controllers (``mcm.emulator.controllers``) are started through their package's
  ``start_controllers(emulator)`` when it exists; it returns an object with ``stop()``.
"""

from __future__ import annotations

import builtins
import secrets
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

import structlog
import yaml

from mcm.emulator import errors
from mcm.emulator.discovery import Discovery
from mcm.emulator.errors import ApiStatusError
from mcm.emulator.faults import Faults, RequestMeta
from mcm.emulator.handlers import Api, Request, Response, health_response, status_response
from mcm.emulator.kubeconfig import TlsMaterial, make_tls_material, write_kubeconfig
from mcm.emulator.listing import NODE_INDEX, WatchStart
from mcm.emulator.registry import CRD_STORAGE_KEY, Registry, ResourceType
from mcm.emulator.routing import RequestInfo, parse_bool, resolve
from mcm.emulator.server import Completed, HttpServer, _ChunkWriter
from mcm.emulator.services import seed_kubernetes_service
from mcm.emulator.stats import LogEntry, Stats
from mcm.emulator.storage import Storage
from mcm.emulator.store import Change, VersionedStore
from mcm.emulator.watch import WatchHub, error_line, serve_watch
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["Emulator"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


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
        git_version: str = "v1.32.0",
        min_request_timeout: float = 1800.0,
        bookmark_interval: float = 60.0,
        log_file: str | Path | None = None,
        controllers: bool = True,
        tls_dir: str | Path | None = None,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.name = name
        self.clock = clock
        self.store = VersionedStore(base_rv, history_size, history_age)
        self.registry = Registry()
        self.storage = Storage(self.store, self.registry)
        self.discovery = Discovery(self.registry, git_version)
        self.watches = WatchHub(self.store)
        self.watches.min_request_timeout = min_request_timeout
        self.watches.bookmark_interval = bookmark_interval
        self.faults = Faults()
        self.stats = Stats(log_file=log_file)
        self.tls: TlsMaterial | None = make_tls_material(tls_dir) if tls else None
        self.token = token if token is not None else (secrets.token_hex(16) if tls else None)
        self.api = Api(
            self.storage,
            self.discovery,
            self.watches,
            server_address=self._address,
            freshness_timeout=freshness_timeout,
            evict=_find_evict(),
        )
        self._server = HttpServer(
            self._handle,
            self._run_watch,
            self._completed,
            host=host,
            port=port,
            ssl_context=self.tls.server_context() if self.tls else None,
        )
        self.store.subscribe(self._serve_crds)
        self.store.add_index("pods", NODE_INDEX, _node_name)
        self._want_controllers = controllers
        self.controllers: Any = None
        self._seed_namespaces()

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
                    shutil.copyfile(source, copy)
        return written

    # ------------------------------------------------------------------ CRDs and fixtures

    def install_crds(
        self, paths: Iterable[str | Path] | str | Path, timeout: float = 5.0
    ) -> builtins.list[Obj]:
        """Create (or replace) CRDs from YAML files or directories and wait until Established."""
        items = [paths] if isinstance(paths, str | Path) else list(paths)
        files: builtins.list[Path] = []
        for item in items:
            path = Path(item)
            files += sorted(path.glob("*.yaml")) + sorted(path.glob("*.yml")) if path.is_dir() else [path]
        rt = self.registry.resource("apiextensions.k8s.io", "customresourcedefinitions")
        assert rt is not None
        installed: builtins.list[Obj] = []
        for file in files:
            for doc in yaml.safe_load_all(file.read_text(encoding="utf-8")):
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                installed.append(self._apply_crd(rt, doc))
        for crd in installed:
            name = str(crd["metadata"]["name"])
            if not self.wait_for(_served(self.registry, name), timeout):
                raise TimeoutError(f"CRD {name} did not become Established")
        return installed

    def _apply_crd(self, rt: ResourceType, doc: Obj) -> Obj:
        name = str((doc.get("metadata") or {}).get("name", ""))
        current = self.storage.get(rt, "", name)
        if current is None:
            return self.storage.create(rt, doc).obj

        def replace(existing: Obj) -> Obj:
            return {**existing, "spec": doc.get("spec", {})}

        return self.storage.guaranteed_update(rt, "", name, replace).obj

    def _serve_crds(self, change: Change) -> None:
        if change.resource != CRD_STORAGE_KEY:
            return
        name = change.new.obj["metadata"]["name"]
        if change.type == "DELETED":
            for removed in self.registry.remove_crd(name):
                if self.registry.by_storage(removed.storage_key) is None:
                    self.store.drop(removed.storage_key)
            return
        self.registry.set_crd(change.new.obj)

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

    # ------------------------------------------------------------------ request path

    def _handle(self, req: Request) -> Response | WatchStart:
        try:
            watch = bool(parse_bool(req.query.get("watch")))
        except ValueError as exc:
            return status_response(errors.bad_request(str(exc)))
        info = resolve(req.method, req.path, watch)
        req.info = info
        if not self.faults.wait_if_hung():
            return Response(503, b"", headers=[("Connection", "close")])
        if self.faults.mode == "error":
            if info.kind in ("healthz", "livez", "readyz"):
                return health_response(info.kind, req.query, ok=False)
            return status_response(errors.service_unavailable())
        if self.tls is not None and self.token and not self._authorized(req, info):
            return status_response(errors.unauthorized())
        meta = _request_meta(info, req)
        self.faults.sleep_for(meta)
        rule = self.faults.match(meta) if info.kind == "resource" else None
        if rule is not None and rule.phase == "before":
            return self._fault_response(info, rule.error(meta))
        result = self.api.handle(req, info)
        if rule is not None:
            return self._fault_response(info, rule.error(meta))
        return result

    def _authorized(self, req: Request, info: RequestInfo) -> bool:
        header = req.headers.get("Authorization", "")
        if not header and info.kind in ("version", "healthz", "livez", "readyz"):
            return True  # anonymous access to the public-info endpoints, as upstream allows
        return bool(header == f"Bearer {self.token}")

    @staticmethod
    def _fault_response(info: RequestInfo, err: ApiStatusError) -> Response | WatchStart:
        if info.verb == "watch" and err.code == 410:
            return WatchStart(None, 0.0, error_line(err.status))
        return status_response(err)

    def _run_watch(self, req: Request, start: WatchStart, writer: _ChunkWriter) -> str:
        del req
        if start.watcher is None:
            if start.error is not None:
                writer.write_chunk(start.error)
            self.watches.count_end("expired")
            return "expired"
        return serve_watch(self.watches, start.watcher, writer, start.timeout)

    def _completed(self, done: Completed) -> None:
        info = done.request.info
        if info is None or info.kind != "resource":
            verb, key = "nonresource", ("nonresource", "", done.request.path, "")
        else:
            verb = info.verb
            key = (verb, info.group, info.resource, info.subresource)
        entry = LogEntry(
            time=time.time(),
            audit_id=done.audit_id,
            verb=verb,
            method=done.request.method,
            path=done.request.path,
            query="&".join(f"{k}={v}" for k, v in done.request.query.items()),
            code=done.code,
            duration_ms=done.duration * 1000.0,
            user_agent=done.request.headers.get("User-Agent", ""),
            bytes_out=done.bytes_out,
        )
        self.stats.record(key, entry)


def _node_name(obj: Obj) -> str | None:
    spec = obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    return node if isinstance(node, str) and node else None


def _served(registry: Registry, name: str) -> Callable[[], bool]:
    return lambda: bool(registry.crd_types(name))


def _request_meta(info: RequestInfo, req: Request) -> RequestMeta:
    return RequestMeta(
        verb=info.verb,
        group=info.group,
        resource=info.resource,
        subresource=info.subresource,
        namespace=info.namespace,
        name=info.name,
        user_agent=req.headers.get("User-Agent", ""),
    )


def _find_evict() -> Any:
    try:
        from mcm.emulator.controllers import disruption
    except ImportError:
        return None
    return getattr(disruption, "evict", None)


def _start_controllers(emulator: Emulator) -> Any:
    try:
        from mcm.emulator import controllers
    except ImportError:
        return None
    factory = getattr(controllers, "start_controllers", None)
    if factory is None:
        return None
    try:
        return factory(emulator)
    except Exception:
        log.exception("emulator_controllers_failed_to_start")
        return None
