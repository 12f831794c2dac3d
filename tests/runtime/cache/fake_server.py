"""An in-memory ListerWatcher with resourceVersions, history, compaction and scripted failures."""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Iterator
from typing import Any

from mcm.runtime.client.errors import ApiError, Gone
from mcm.runtime.client.types import ListOptions, Object, WatchEvent

_CLOSE = object()


def make_obj(name: str, namespace: str | None = "ns", rv: str = "1", **labels: str) -> Object:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Thing", "metadata": meta}


def gone(message: str = "too old resource version") -> Gone:
    return Gone({"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": message})


class FakeWatch:
    """A watch stream fed by the server (or a test) through a queue."""

    def __init__(self, options: ListOptions) -> None:
        self.options = options
        self._queue: queue.Queue[Any] = queue.Queue()
        self.stopped = threading.Event()

    def send(self, event: WatchEvent) -> None:
        self._queue.put(event)

    def close(self) -> None:
        self._queue.put(_CLOSE)

    def fail(self, exc: BaseException) -> None:
        self._queue.put(exc)

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            item = self._queue.get()
            if item is _CLOSE or self.stopped.is_set():
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def stop(self) -> None:
        self.stopped.set()
        self._queue.put(_CLOSE)


class FakeServer:
    """Objects by key with a global RV counter; list and watch follow the API server's rules.

    ``list_errors`` / ``watch_errors`` are consumed one per call (``None`` = no error).
    """

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.objects: dict[str, Object] = {}
        self.rv = 100
        self.floor = 100
        self.history: list[tuple[int, str, Object]] = []
        self.list_calls: list[ListOptions] = []
        self.watch_calls: list[ListOptions] = []
        self.watches: list[FakeWatch] = []
        self.list_errors: list[BaseException | None] = []
        self.watch_errors: list[BaseException | None] = []
        self.page_size_honoured = True

    # -- writes ---------------------------------------------------------------------------------
    def _commit(self, event_type: str, obj: Object) -> Object:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.history.append((self.rv, event_type, obj))
        for watch in self.watches:
            if not watch.stopped.is_set():
                watch.send(WatchEvent(event_type, obj))  # type: ignore[arg-type]
        self.lock.notify_all()
        return obj

    @staticmethod
    def key(obj: Object) -> str:
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]

    def create(self, obj: Object) -> Object:
        with self.lock:
            stored = self._commit("ADDED", obj)
            self.objects[self.key(stored)] = stored
            return stored

    def update(self, obj: Object) -> Object:
        with self.lock:
            stored = self._commit("MODIFIED", obj)
            self.objects[self.key(stored)] = stored
            return stored

    def delete(self, key: str) -> None:
        with self.lock:
            obj = self.objects.pop(key)
            self._commit("DELETED", obj)

    def delete_silently(self, key: str) -> None:
        """Delete without telling open watches (as if the watch were down), compacting history."""
        with self.lock:
            self.objects.pop(key)
            self.rv += 1
            self.floor = self.rv

    def compact(self) -> None:
        with self.lock:
            self.floor = self.rv

    def close_watches(self) -> None:
        with self.lock:
            for watch in self.watches:
                watch.close()

    def bookmark(self) -> None:
        with self.lock:
            mark = {"kind": "Thing", "metadata": {"resourceVersion": str(self.rv)}}
            for watch in self.watches:
                watch.send(WatchEvent("BOOKMARK", mark))

    # -- ListerWatcher --------------------------------------------------------------------------
    def list(self, options: ListOptions) -> Object:
        with self.lock:
            self.list_calls.append(options)
            self.lock.notify_all()
            if self.list_errors:
                err = self.list_errors.pop(0)
                if err is not None:
                    raise err
            items = sorted(self.objects.values(), key=self.key)
            start = int(options.continue_) if options.continue_ else 0
            limit = options.limit if (options.limit and self.page_size_honoured) else len(items) or 1
            page = items[start : start + limit]
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if start + limit < len(items):
                meta["continue"] = str(start + limit)
            return {"kind": "ThingList", "metadata": meta, "items": page}

    def watch(self, options: ListOptions) -> FakeWatch:
        with self.lock:
            self.watch_calls.append(options)
            self.lock.notify_all()
            if self.watch_errors:
                err = self.watch_errors.pop(0)
                if err is not None:
                    raise err
            watch = FakeWatch(options)
            start = int(options.resource_version or 0)
            if start < self.floor:
                watch.send(WatchEvent("ERROR", gone().status))
                watch.close()
            else:
                for rv, event_type, obj in self.history:
                    if rv > start:
                        watch.send(WatchEvent(event_type, obj))  # type: ignore[arg-type]
                self.watches.append(watch)
            return watch

    def wait_for_watches(self, count: int, timeout: float = 5.0) -> FakeWatch:
        """Block until at least ``count`` watches were opened; return the newest."""
        with self.lock:
            if not self.lock.wait_for(lambda: len(self.watch_calls) >= count, timeout):
                raise TimeoutError(f"only {len(self.watch_calls)} watches opened")
            return self.watches[-1] if self.watches else FakeWatch(ListOptions())

    def wait_for_lists(self, count: int, timeout: float = 5.0) -> None:
        with self.lock:
            if not self.lock.wait_for(lambda: len(self.list_calls) >= count, timeout):
                raise TimeoutError(f"only {len(self.list_calls)} lists made")


def api_error(code: int, reason: str) -> ApiError:
    from mcm.runtime.client.errors import error_from_status

    return error_from_status({"reason": reason, "code": code, "message": reason}, code)
