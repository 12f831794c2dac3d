"""List and watch requests: option validation, selectors, snapshots, pagination, watch start.

Guarantees (as kube-apiserver's list and watch):

- List options are validated in upstream order (422 ``ListOptions.meta.k8s.io``); selectors that
  do not parse are 400.
- ``resourceVersion`` unset or ``0``: latest state (``0`` ignores ``limit``). ``N``: at least as
  new as N, waiting up to the freshness timeout and then 504. ``Exact``: the state at N (410 when
  compacted). Continue tokens carry the snapshot RV; every page is served from that snapshot.
- Lists are assembled from cached item encodings: built-in items omit ``kind``/``apiVersion``.
- Watch start is atomic with registration: no change can fall between the initial events and
  the live ones.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcm.emulator import errors
from mcm.emulator.kinds import FieldError
from mcm.emulator.options import go_int
from mcm.emulator.registry import ResourceType
from mcm.emulator.routing import parse_bool
from mcm.emulator.selectors import compile_field_selector, parse_field_selector
from mcm.emulator.store import Stored, VersionedStore, encode
from mcm.emulator.watch import Watcher, error_line, expired_status
from mcm.runtime.labels import parse_selector

__all__ = ["ListOptions", "WatchStart", "encode_list", "list_objects", "parse_list_options", "start_watch"]

Predicate = Callable[[dict[str, Any]], bool]
NODE_INDEX = "spec.nodeName"
_CONTINUE_EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent "
    "list - objects that were created, modified, or deleted between the time the first chunk was returned "
    "and now may show up in the list."
)


@dataclass(frozen=True)
class ListOptions:
    """Parsed list/watch query."""

    predicate: Predicate
    has_selector: bool
    resource_version: str
    match: str
    limit: int
    continue_token: str
    bookmarks: bool
    timeout: float | None
    node_name: str | None = None
    """The value of a ``spec.nodeName=`` requirement, if any (served from the pods-by-node index)."""


def _list_invalid(errs: list[FieldError]) -> errors.ApiStatusError:
    return errors.invalid("ListOptions", "meta.k8s.io", "", errs, qualified_kind="ListOptions.meta.k8s.io")


def _validate(query: Mapping[str, str], watch: bool) -> None:
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    cont = query.get("continue", "")
    errs: list[FieldError] = []
    if match and not rv:
        errs.append(
            FieldError(
                "FieldValueForbidden",
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            )
        )
    if match and cont:
        errs.append(
            FieldError(
                "FieldValueForbidden",
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            )
        )
    if match and match not in ("Exact", "NotOlderThan"):
        errs.append(
            FieldError(
                "FieldValueNotSupported",
                "resourceVersionMatch",
                'supported values: "Exact", "NotOlderThan", ""',
                match,
            )
        )
    if match == "Exact" and rv == "0":
        errs.append(
            FieldError(
                "FieldValueForbidden",
                "resourceVersionMatch",
                'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            )
        )
    if query.get("sendInitialEvents") and not watch:
        errs.append(
            FieldError("FieldValueForbidden", "sendInitialEvents", "sendInitialEvents is forbidden for list")
        )
    if errs:
        raise _list_invalid(errs)
    if cont and rv not in ("", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")


def parse_list_options(rt: ResourceType, query: Mapping[str, str], watch: bool) -> ListOptions:
    """Validate and parse list/watch parameters."""
    _validate(query, watch)
    label_text = query.get("labelSelector", "")
    field_text = query.get("fieldSelector", "")
    try:
        labels = parse_selector(label_text)
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from exc
    try:
        fields = compile_field_selector(field_text, rt.strategy.field_selectors, rt.namespaced)
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from exc

    def predicate(obj: dict[str, Any]) -> bool:
        return labels.matches_object(obj) and fields(obj)

    limit = go_int(query["limit"]) if query.get("limit") else 0
    timeout_text = query.get("timeoutSeconds")
    timeout = float(go_int(timeout_text)) if timeout_text else None
    if timeout is not None and timeout <= 0:
        timeout = None
    try:
        bookmarks = bool(parse_bool(query.get("allowWatchBookmarks")))
    except ValueError as exc:
        raise errors.bad_request(str(exc)) from exc
    node_name = next(
        (r.value for r in parse_field_selector(field_text) if r.field == "spec.nodeName" and r.op == "="),
        None,
    )
    return ListOptions(
        node_name=node_name,
        predicate=predicate,
        has_selector=bool(label_text.strip() or field_text.strip()),
        resource_version=query.get("resourceVersion", ""),
        match=query.get("resourceVersionMatch", ""),
        limit=max(0, limit),
        continue_token=query.get("continue", ""),
        bookmarks=bookmarks,
        timeout=timeout,
    )


def parse_rv(text: str) -> int:
    """A resourceVersion parameter as an integer; 400 if not numeric."""
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f'invalid resource version: "{text}"') from None
    if value < 0:
        raise errors.bad_request(f'invalid resource version: "{text}"')
    return value


def wait_fresh(store: VersionedStore, rv: int, timeout: float) -> None:
    """Wait until the store reaches ``rv``; 504 ResourceVersionTooLarge after ``timeout``."""
    if rv <= store.rv:
        return
    if not store.wait_for_rv(rv, timeout):
        raise errors.too_large_resource_version(rv, store.rv)


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rv = int(raw["rv"])
        namespace, _, name = str(raw["start"]).partition("/")
        if raw.get("v") != "meta.k8s.io/v1":
            raise ValueError("unknown version")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        del exc  # Python's words stay out of the answer
        raise errors.bad_request("invalid continue token: continue key is not valid") from None
    return rv, (namespace, name)


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = {"v": "meta.k8s.io/v1", "rv": rv, "start": f"{key[0]}/{key[1]}"}
    return base64.urlsafe_b64encode(encode(raw)).decode().rstrip("=")


def list_objects(
    store: VersionedStore, rt: ResourceType, namespace: str | None, opts: ListOptions, freshness: float
) -> tuple[list[Stored], int, str, int | None]:
    """Select a page: ``(items, list rv, continue token, remainingItemCount)``."""
    key = rt.storage_key
    start: tuple[str, str] | None = None
    if opts.continue_token:
        snapshot, start = _decode_continue(opts.continue_token)
        if snapshot < store.floor(key):
            raise errors.expired(_CONTINUE_EXPIRED)
        items, list_rv = store.items_at(key, snapshot, namespace), snapshot
    elif opts.match == "Exact":
        wanted = parse_rv(opts.resource_version)
        wait_fresh(store, wanted, freshness)
        try:
            items = store.items_at(key, wanted, namespace)
        except ValueError:
            raise errors.expired("The resourceVersion for the provided list is too old.") from None
        list_rv = wanted
    else:
        if opts.resource_version not in ("", "0"):
            wait_fresh(store, parse_rv(opts.resource_version), freshness)
        with store.lock:
            list_rv = store.rv
            indexed = (
                None
                if not opts.node_name
                else store.items_by_index(key, NODE_INDEX, opts.node_name, namespace)
            )
            items = indexed if indexed is not None else store.items(key, namespace)
    if start is not None:
        items = [s for s in items if s.key >= start]
    selected = [s for s in items if opts.predicate(s.obj)] if opts.has_selector else items
    limit = 0 if opts.resource_version == "0" and not opts.continue_token else opts.limit
    if not limit or len(selected) <= limit:
        return selected, list_rv, "", None
    page, rest = selected[:limit], selected[limit:]
    remaining = None if opts.has_selector else len(rest)
    return page, list_rv, _encode_continue(list_rv, rest[0].key), remaining


def encode_list(rt: ResourceType, items: list[Stored], rv: int, token: str, remaining: int | None) -> bytes:
    """The ``<Kind>List`` body from cached item encodings."""
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    head = b'{"kind":' + encode(rt.list_kind) + b',"apiVersion":' + encode(rt.group_version)
    head += b',"metadata":' + encode(meta) + b',"items":['
    parts = [s.item() for s in items] if rt.builtin else [s.full() for s in items]
    return head + b",".join(parts) + b"]}"


@dataclass
class WatchStart:
    """A registered watcher with its timeout, or a single error line (410) to send."""

    watcher: Watcher | None
    timeout: float
    error: bytes | None = None


def start_watch(
    store: VersionedStore,
    rt: ResourceType,
    namespace: str | None,
    opts: ListOptions,
    *,
    min_request_timeout: float,
    max_queue: int,
    convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> WatchStart:
    """Register a watcher and queue its initial events, atomically with respect to commits."""
    timeout = opts.timeout
    if timeout is None:
        timeout = min_request_timeout * (1 + random.random())
    from_rv = None if opts.resource_version in ("", "0") else parse_rv(opts.resource_version)
    watcher = Watcher(
        rt.storage_key,
        rt.kind,
        rt.group_version,
        namespace,
        opts.predicate,
        bookmarks=opts.bookmarks,
        max_queue=max_queue,
        convert=convert,
    )
    key = rt.storage_key
    with store.lock:
        if from_rv is not None and from_rv < store.floor(key):
            status = expired_status(from_rv, store.floor(key))
            return WatchStart(None, timeout, error_line(status))
        if from_rv is None:
            for stored in store.items(key, namespace):
                if opts.predicate(stored.obj):
                    watcher.push((stored, "ADDED"))
        else:
            for change in store.changes_since(key, from_rv):
                event_type = watcher.event_type_for(change)
                if event_type is not None:
                    watcher.push((change, event_type))
        store.add_watcher(key, watcher)
    return WatchStart(watcher, timeout)
