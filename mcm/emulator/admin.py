"""The admin listener and :class:`RemoteEmulator`: emulator controls over JSON, for an emulator
running in another process (docs/emulator.md).

The admin listener is a separate loopback HTTP server, never counted in stats and unaffected by
``pause("refuse")``. Every endpoint is ``POST /<control>`` with a JSON object of keyword
arguments, answering ``{"result": ...}`` or ``{"error": ...}`` (status 400). ``RemoteEmulator``
offers the same method names as :class:`~mcm.emulator.emulator.Emulator` for these controls.

It has no TLS and no token, so it guards itself against the ways a browser could reach it:

- Only ``Content-Type: application/json`` is accepted (415 otherwise): a cross-site page can
  send ``text/plain`` or form posts without asking, but not JSON (that needs a CORS preflight,
  which the listener never grants).
- On loopback, the ``Host`` header must name loopback too (403 otherwise), so a DNS-rebinding
  page cannot talk to it under its own name.
- A non-loopback address is refused unless ``insecure=True`` (``--insecure``).
"""

from __future__ import annotations

import builtins
import email.message
import json
import threading
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from mcm.emulator.exposure import check_listen, is_loopback_host
from mcm.emulator.patch import merge_patch

if TYPE_CHECKING:
    from mcm.emulator.emulator import Emulator

__all__ = ["AdminServer", "RemoteEmulator"]

Control = Callable[..., Any]
_SETTABLE = {"kubelet", "pdb", "gc", "podgc", "eventttl", "attachdetach", "namespaces", "crds"}


def _controls(emulator: Emulator) -> dict[str, Control]:
    """Every admin control by name."""
    return {
        **_lifecycle_controls(emulator),
        **_watch_controls(emulator),
        **_fault_controls(emulator),
        **_stats_controls(emulator),
        **_data_controls(emulator),
        **_controller_controls(emulator),
    }


def _lifecycle_controls(emulator: Emulator) -> dict[str, Control]:
    """State, start/stop/restart, pause/resume and compaction."""
    return {
        "state": lambda: {"url": emulator.url, "rv": emulator.store.rv, "paused": emulator.faults.mode},
        "stop": emulator.stop,
        "start": lambda: emulator.start() and None,
        "restart": emulator.restart,
        "pause": emulator.pause,
        "resume": emulator.resume,
        "compact": emulator.compact,
    }


def _watch_controls(emulator: Emulator) -> dict[str, Control]:
    """Watch delivery: delay, drop, bookmarks."""
    return {
        "watch_delay": emulator.watch_delay,
        "drop_watches": lambda mode="close", resource=None: emulator.watches.drop(mode, resource),
        "bookmark_now": emulator.watches.bookmark_now,
    }


def _fault_controls(emulator: Emulator) -> dict[str, Control]:
    """Fault and latency rules, addressed by integer handles that stay valid until removed."""
    faults: dict[int, Any] = {}

    def add_fault(**rule: Any) -> int:
        handle = emulator.faults.add(**rule)
        faults[id(handle)] = handle
        return id(handle)

    def fault_hits(handle: int) -> int:
        return int(faults[handle].hits)

    def remove_fault(handle: int) -> None:
        faults.pop(handle).remove()

    return {
        "add_fault": add_fault,
        "fault_hits": fault_hits,
        "remove_fault": remove_fault,
        "clear_faults": emulator.faults.clear,
        "latency": lambda seconds, jitter=0.0, **match: add_fault_latency(
            emulator, faults, seconds, jitter, match
        ),
    }


def _stats_controls(emulator: Emulator) -> dict[str, Control]:
    """Request statistics."""

    def stats_count(**match: Any) -> int:
        return emulator.stats.count(**match)

    return {
        "stats_count": stats_count,
        "stats": emulator.stats.as_dict,
        "stats_reset": emulator.stats.reset,
    }


def _data_controls(emulator: Emulator) -> dict[str, Control]:
    """Direct reads and writes of stored objects, and CRD installation."""

    def merge_patch_all(gvr: str, namespace: str, names: builtins.list[str], patch: dict[str, Any]) -> int:
        rt = emulator.resource_type(gvr)
        for name in names:
            emulator.storage.guaranteed_update(rt, namespace, name, lambda obj: merge_patch(obj, patch))
        return len(names)

    return {
        "get": emulator.get,
        "list": lambda gvr, namespace=None: emulator.list(gvr, namespace),
        "seed": lambda objects, bypass_strategy=False: emulator.seed(objects, bypass_strategy),
        "merge_patch_all": merge_patch_all,
        "install_crds": lambda paths: emulator.install_crds(paths) and None,
    }


def _controller_controls(emulator: Emulator) -> dict[str, Control]:
    """Settings and public methods of the built-in controllers named in ``_SETTABLE``."""

    def set_controller(controller: str, **values: Any) -> None:
        if controller not in _SETTABLE:
            raise ValueError(f"unknown controller {controller!r}")
        target = emulator._controller(controller)
        for key, value in values.items():
            if not hasattr(target, key) or key.startswith("_"):
                raise ValueError(f"{controller} has no setting {key!r}")
            setattr(target, key, value)

    def call_controller(controller: str, method: str, **kwargs: Any) -> Any:
        if controller not in _SETTABLE or method.startswith("_"):
            raise ValueError(f"unknown control {controller}.{method}")
        return getattr(emulator._controller(controller), method)(**kwargs)

    return {"set_controller": set_controller, "call_controller": call_controller}


def add_fault_latency(
    emulator: Emulator, faults: dict[int, Any], seconds: float, jitter: float, match: Any
) -> int:
    """Register a latency rule; returns a handle usable with ``remove_fault``."""
    handle = emulator.faults.latency(seconds, jitter, **match)
    faults[id(handle)] = handle
    return id(handle)


class _AdminHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _AdminHttp

    def log_message(self, format: str, *args: Any) -> None:
        del format, args

    def do_POST(self) -> None:
        refused = self._refusal()
        if refused is not None:
            self.close_connection = True
            self._answer(*refused)
            return
        length = int(self.headers.get("Content-Length") or 0)
        name = self.path.strip("/")
        try:
            kwargs = json.loads(self.rfile.read(length) or b"{}")
            control = self.server.controls.get(name)
            if control is None:
                raise ValueError(f"unknown control {name!r}")
            body, code = {"result": control(**kwargs)}, 200
        except Exception as exc:  # every failure is reported to the caller
            body, code = {"error": f"{type(exc).__name__}: {exc}"}, 400
        self._answer(body, code)

    def _refusal(self) -> tuple[dict[str, str], int] | None:
        """Why this request is refused (a body and a status), or ``None``."""
        message = email.message.Message()
        message["content-type"] = self.headers.get("Content-Type") or ""
        if message.get_content_type() != "application/json":
            return {"error": "the admin listener accepts only Content-Type: application/json"}, 415
        if self.server.loopback_only and not _loopback_host_header(self.headers.get("Host") or ""):
            return {"error": "the admin listener answers only requests addressed to loopback"}, 403
        return None

    def _answer(self, body: dict[str, Any], code: int) -> None:
        data = json.dumps(body, default=str).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _AdminHttp(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], controls: dict[str, Control]) -> None:
        self.controls = controls
        self.loopback_only = is_loopback_host(address[0])
        super().__init__(address, _AdminHandler)


def _loopback_host_header(host: str) -> bool:
    """Whether a ``Host`` header (``name``, ``name:port``, ``[v6]:port``) names loopback."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    return is_loopback_host(name)


class AdminServer:
    """Serves an emulator's controls on their own port (loopback unless ``insecure``)."""

    def __init__(
        self, emulator: Emulator, host: str = "127.0.0.1", port: int = 0, *, insecure: bool = False
    ) -> None:
        check_listen(host, tls=False, insecure=insecure, what="the admin listener")
        self._http = _AdminHttp((host, port), _controls(emulator))
        self.url = f"http://{host}:{self._http.server_address[1]}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the admin listener."""
        self._http.shutdown()
        self._http.server_close()


class RemoteFault:
    """A fault rule in another process."""

    def __init__(self, remote: RemoteEmulator, handle: int) -> None:
        self._remote = remote
        self._handle = handle

    @property
    def hits(self) -> int:
        """How often the rule fired."""
        return int(self._remote.call("fault_hits", handle=self._handle))

    def remove(self) -> None:
        """Stop applying the rule."""
        self._remote.call("remove_fault", handle=self._handle)


class _RemoteFaults:
    """``remote.faults``: the same calls as ``Emulator.faults``."""

    def __init__(self, remote: RemoteEmulator) -> None:
        self._remote = remote

    def add(self, **rule: Any) -> RemoteFault:
        return self._remote.add_fault(**rule)

    def latency(self, seconds: float, jitter: float = 0.0, **match: Any) -> RemoteFault:
        return self._remote.latency(seconds, jitter, **match)

    def clear(self) -> None:
        self._remote.clear_faults()


class _RemoteWatches:
    """``remote.watches``: the same calls as ``Emulator.watches``."""

    def __init__(self, remote: RemoteEmulator) -> None:
        self._remote = remote

    def drop(self, mode: str = "close", resource: str | None = None) -> int:
        return self._remote.drop_watches(mode, resource)

    def bookmark_now(self) -> None:
        self._remote.bookmark_now()


class _RemoteStats:
    """``remote.stats``: counters of the remote emulator."""

    def __init__(self, remote: RemoteEmulator) -> None:
        self._remote = remote

    def count(self, verb: str | None = None, resource: str | None = None, **match: Any) -> int:
        return self._remote.count(verb, resource, **match)

    def reset(self) -> None:
        self._remote.call("stats_reset")

    def as_dict(self) -> dict[str, Any]:
        return dict(self._remote.call("stats"))


class RemoteEmulator:
    """The controls of an emulator in another process, through its admin listener.

    ``faults``, ``watches`` and ``stats`` mirror the in-process attributes for the common calls.
    """

    def __init__(self, admin_url: str, url: str = "") -> None:
        self.admin_url = admin_url.rstrip("/")
        self.url = url or str(self.call("state")["url"])
        self.faults = _RemoteFaults(self)
        self.watches = _RemoteWatches(self)
        self.stats = _RemoteStats(self)

    def call(self, control: str, **kwargs: Any) -> Any:
        """Invoke one control; raises ``RuntimeError`` with the remote error."""
        request = urllib.request.Request(
            f"{self.admin_url}/{control}",
            data=json.dumps(kwargs).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return json.loads(resp.read())["result"]
        except urllib.error.HTTPError as err:
            raise RuntimeError(json.loads(err.read()).get("error", str(err))) from None

    def stop(self) -> None:
        self.call("stop")

    def start(self) -> None:
        self.call("start")

    def restart(self, downtime: float = 0.5, reset_history: bool = False) -> None:
        self.call("restart", downtime=downtime, reset_history=reset_history)

    def pause(self, mode: str, drop_on_resume: bool = False) -> None:
        self.call("pause", mode=mode, drop_on_resume=drop_on_resume)

    def resume(self) -> None:
        self.call("resume")

    def compact(self, rv: int | None = None) -> None:
        self.call("compact", rv=rv)

    def watch_delay(self, seconds: float) -> None:
        self.call("watch_delay", seconds=seconds)

    def drop_watches(self, mode: str = "close", resource: str | None = None) -> int:
        return int(self.call("drop_watches", mode=mode, resource=resource))

    def bookmark_now(self) -> None:
        self.call("bookmark_now")

    def add_fault(self, **rule: Any) -> RemoteFault:
        return RemoteFault(self, int(self.call("add_fault", **rule)))

    def latency(self, seconds: float, jitter: float = 0.0, **match: Any) -> RemoteFault:
        return RemoteFault(self, int(self.call("latency", seconds=seconds, jitter=jitter, **match)))

    def clear_faults(self) -> None:
        self.call("clear_faults")

    def count(self, verb: str | None = None, resource: str | None = None, **match: Any) -> int:
        return int(self.call("stats_count", verb=verb, resource=resource, **match))

    def get(self, gvr: str, namespace: str, name: str) -> dict[str, Any] | None:
        result = self.call("get", gvr=gvr, namespace=namespace, name=name)
        return None if result is None else dict(result)

    def list(self, gvr: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.call("list", gvr=gvr, namespace=namespace))

    def seed(
        self, objects: builtins.list[dict[str, Any]], bypass_strategy: bool = False
    ) -> builtins.list[dict[str, Any]]:
        return builtins.list(self.call("seed", objects=objects, bypass_strategy=bypass_strategy))

    def merge_patch_all(
        self, gvr: str, namespace: str, names: builtins.list[str], patch: dict[str, Any]
    ) -> int:
        """Apply one JSON merge patch to each named object, in the server process (not counted
        in stats, committed like any update, unaffected by pauses)."""
        return int(self.call("merge_patch_all", gvr=gvr, namespace=namespace, names=names, patch=patch))

    def set_controller(self, controller: str, **values: Any) -> None:
        self.call("set_controller", controller=controller, **values)
