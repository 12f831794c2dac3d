"""The transport-independent API: ``Api.handle(Request) -> Response | WatchStart``.

Guarantees:

- Every outcome is a :class:`Response` (JSON, one buffer, ``Content-Length`` known) or a
  registered watch; handler code never writes to sockets.
- Any :class:`~mcm.emulator.errors.ApiStatusError` becomes its Status response; any other
  exception becomes a 500 ``InternalError`` whose message never holds Python's exception text,
  and leaves the store untouched (writes are compare-and-swap commits, so a failure before the
  commit changes nothing). An object over the storage limit is 413.
- Write options are validated before the body is read (422 against ``*Options.meta.k8s.io``).
- Bodies: standard JSON (``NaN``/``Infinity`` refused), YAML on POST/PUT, and kubectl's protobuf
  for the kinds :mod:`~mcm.emulator.k8sproto` defines; undecodable bodies and built-in objects with
  wrongly typed fields are 400 in the decoder's words.
- ``application/apply-patch+yaml``: server-side apply for the common case (create, or merge the
  applied configuration); see ``docs/emulator.md`` for what it leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
import yaml

from mcm.emulator import errors, eventsv1, jsonbody, k8sproto, patch, reviews, tables
from mcm.emulator import options as write_options
from mcm.emulator.builtinfields import TypeMismatch, check_types, json_kind
from mcm.emulator.discovery import Discovery
from mcm.emulator.errors import ApiStatusError
from mcm.emulator.eviction import evict
from mcm.emulator.listing import (
    WatchStart,
    encode_list,
    list_objects,
    parse_list_options,
    parse_rv,
    start_watch,
    wait_fresh,
)
from mcm.emulator.registry import ResourceType
from mcm.emulator.routing import RequestInfo, parse_bool
from mcm.emulator.storage import Storage, WriteResult
from mcm.emulator.store import Obj, ObjectTooLarge, Stored, encode
from mcm.emulator.validation import FieldError
from mcm.emulator.watch import WatchHub
from mcm.runtime.clock import REAL_CLOCK, Clock

__all__ = ["Api", "Request", "Response"]

log = structlog.get_logger(__name__)

MAX_BODY = 3 * 1024 * 1024
APPLY_PATCH = "application/apply-patch+yaml"
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
"""NamespaceLifecycle admission refuses to delete these."""


@dataclass
class Request:
    """One decoded HTTP request."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""
    info: RequestInfo | None = None


@dataclass
class Response:
    """One complete (non-streaming) response."""

    code: int
    body: bytes
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


def status_response(err: ApiStatusError) -> Response:
    """The response for an API error."""
    return Response(err.code, encode(err.status), headers=list(err.headers.items()))


def _warnings(result: WriteResult) -> list[tuple[str, str]]:
    return [("Warning", "299 - " + json.dumps(w)) for w in result.warnings]


class Api:
    """Routes resolved requests to discovery, storage, list and watch."""

    def __init__(
        self,
        storage: Storage,
        discovery: Discovery,
        hub: WatchHub,
        *,
        server_address: Callable[[], str],
        freshness_timeout: float = 3.0,
        clock: Clock = REAL_CLOCK,
    ) -> None:
        self.storage = storage
        self.registry = storage.registry
        self.discovery = discovery
        self.hub = hub
        self.server_address = server_address
        self.freshness_timeout = freshness_timeout
        self.clock = clock

    # ------------------------------------------------------------------ entry

    def handle(self, req: Request, info: RequestInfo) -> Response | WatchStart:
        """Answer one request."""
        try:
            if not _accepts_json(req.headers.get("Accept", "")):
                raise errors.not_acceptable()
            if info.kind == "resource":
                return self._resource(req, info)
            return self._non_resource(req, info)
        except ApiStatusError as err:
            return status_response(err)
        except ObjectTooLarge:
            return status_response(errors.entity_too_large_object())
        except RecursionError:
            return status_response(errors.bad_request("the request body is nested too deeply"))
        except Exception as exc:  # a bug must not kill the connection or the server
            log.exception("request_failed", method=req.method, path=req.path, error=type(exc).__name__)
            return status_response(errors.internal_error("the server could not complete the request"))

    def _non_resource(self, req: Request, info: RequestInfo) -> Response:
        if req.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed(req.method)
        kind = info.kind
        if kind == "version":
            return Response(200, self.discovery.version())
        if kind == "api":
            return Response(200, self.discovery.api_versions(self.server_address()))
        if kind == "apis":
            return Response(200, self.discovery.group_list())
        if kind == "group":
            return _found(self.discovery.group(info.group))
        if kind == "resourcelist":
            if info.group == "" and not req.path.startswith("/api/"):
                raise errors.resource_not_found()
            return _found(self.discovery.resource_list(info.group, info.version))
        if kind == "openapi":
            parts = [p for p in req.path.split("/") if p]
            if len(parts) < 2 or parts[1] != "v3":
                raise errors.resource_not_found()
            return _found(self.discovery.openapi("/".join(parts[2:])))
        if kind in ("healthz", "livez", "readyz"):
            return health_response(kind, req.query, ok=True)
        raise errors.resource_not_found()

    # ------------------------------------------------------------------ resources

    def _type(self, info: RequestInfo) -> ResourceType:
        rt = self.registry.lookup(info.group, info.version, info.resource)
        if rt is None or info.extra_parts or (info.namespace and not rt.namespaced):
            raise errors.resource_not_found()
        if info.bad_name:
            raise errors.bad_request(
                f'invalid resource name "{info.name}": may not be "." or ".." or contain "/" or "%"'
            )
        sub = info.subresource
        allowed = {
            "": True,
            "status": rt.status,
            "scale": rt.scale is not None,
            "eviction": rt.eviction,
            "finalize": rt.finalize,
        }
        if not allowed.get(sub, False):
            raise errors.resource_not_found()
        return rt

    def _resource(self, req: Request, info: RequestInfo) -> Response | WatchStart:
        """Route a resource request to its verb's handler, after the verb/subresource checks."""
        rt = self._type(info)
        if rt.group == "events.k8s.io":
            return self._events_v1(req, rt, info)
        if rt.group in reviews.GROUPS:
            return self._review(req, rt, info)
        verb = info.verb
        if verb not in rt.verbs and not info.subresource:
            raise errors.method_not_allowed(req.method)
        if verb == "create" and info.name and info.subresource == "eviction":
            return self._evict(req, rt, info)
        if verb in ("list", "watch", "deletecollection", "create") and info.subresource:
            raise errors.method_not_allowed(req.method)
        if verb in ("create", "update", "patch"):
            write_options.validate_write(verb, req.query, apply_patch=_is_apply(req))
        if verb == "get":
            return self._get(req, rt, info)
        if verb == "list":
            return self._list(req, rt, info.namespace or None)
        if verb == "watch":
            return self._watch(req, rt, info.namespace or None)
        if verb == "create":
            return self._create(req, rt, info)
        if verb in ("update", "patch", "delete") and not info.name:
            raise errors.method_not_allowed(req.method)
        if verb == "update":
            return self._update(req, rt, info)
        if verb == "patch":
            return self._patch(req, rt, info)
        if verb == "delete":
            return self._delete(req, rt, info)
        if verb == "deletecollection":
            return self._delete_collection(req, rt, info.namespace or None)
        raise errors.method_not_allowed(req.method)

    def _review(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        """A self-subject review: create only, answered and never stored."""
        if info.verb != "create" or info.name or info.subresource:
            raise errors.method_not_allowed(req.method)
        write_options.validate_write("create", req.query)
        return Response(201, encode(reviews.answer(rt, self._decode(req, rt), req.headers)))

    def _watch(self, req: Request, rt: ResourceType, namespace: str | None) -> WatchStart:
        """Start a watch stream (as a Table stream when the client asks for tables)."""
        opts = parse_list_options(rt, req.query, watch=True)
        return start_watch(
            self.storage.store,
            rt,
            namespace,
            opts,
            min_request_timeout=self.hub.min_request_timeout,
            max_queue=self.hub.max_queue,
            convert=_table_view(rt) if tables.wants_table(req.headers.get("Accept", "")) else None,
        )

    def _create(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        """POST to a collection: 201 with the stored object and any warnings."""
        if info.name:
            raise errors.method_not_allowed(req.method)
        if rt.namespaced and not info.namespace:
            raise errors.resource_not_found()
        body = self._decode(req, rt)
        result = self.storage.create(
            rt, body, info.namespace, dry_run=_dry_run(req), field_validation=_fv(req)
        )
        return Response(201, encode(result.obj), headers=_warnings(result))

    def _delete(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        """DELETE of one object; the immortal namespaces are refused with 403."""
        if info.subresource:
            raise errors.method_not_allowed(req.method)
        options = self._delete_options(req)
        if rt.group == "" and rt.resource == "namespaces" and info.name in IMMORTAL_NAMESPACES:
            raise errors.forbidden(
                f'namespaces "{info.name}" is forbidden: this namespace may not be deleted',
                {"name": info.name, "kind": "namespaces"},
            )
        body, _ = self.storage.delete(rt, info.namespace, info.name, options, dry_run=_dry_run(req))
        return Response(200, encode(body))

    def _get(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        if info.subresource in ("eviction", "finalize"):
            raise errors.method_not_allowed(req.method)
        rv = req.query.get("resourceVersion", "")
        if rv not in ("", "0"):
            wait_fresh(self.storage.store, parse_rv(rv), self.freshness_timeout)
        stored = self.storage.get_stored(rt, info.namespace, info.name)
        if info.subresource == "scale":
            return Response(200, encode(scale_of(rt, stored.obj)))
        if tables.wants_table(req.headers.get("Accept", "")):
            return Response(200, encode(tables.table(rt, [stored.obj], {"resourceVersion": str(stored.rv)})))
        return Response(200, stored.full())

    def _list(self, req: Request, rt: ResourceType, namespace: str | None) -> Response:
        opts = parse_list_options(rt, req.query, watch=False)
        items, rv, token, remaining = list_objects(
            self.storage.store, rt, namespace, opts, self.freshness_timeout
        )
        if tables.wants_table(req.headers.get("Accept", "")):
            meta = _table_list_meta(rv, token, remaining)
            return Response(200, encode(tables.table(rt, [s.obj for s in items], meta)))
        return Response(200, encode_list(rt, items, rv, token, remaining))

    def _update(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        if info.subresource == "eviction":
            raise errors.method_not_allowed(req.method)
        if info.subresource == "scale":
            body = self._decode(req, rt, kind="Scale")
            return self._write_scale(req, rt, info, lambda _current: body)
        body = self._decode(req, rt)
        result = self.storage.update(
            rt,
            body,
            info.namespace,
            info.name,
            subresource=info.subresource,
            dry_run=_dry_run(req),
            field_validation=_fv(req),
        )
        return Response(201 if result.created else 200, encode(result.obj), headers=_warnings(result))

    def _patch(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        if info.subresource in ("eviction", "finalize"):
            raise errors.method_not_allowed(req.method)
        content_type = req.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type == APPLY_PATCH and info.subresource in ("", "status"):
            return self._server_side_apply(req, rt, info)
        apply = self._patch_function(rt, content_type, req.body)
        if info.subresource == "scale":
            return self._write_scale(req, rt, info, apply)
        result = self.storage.guaranteed_update(
            rt,
            info.namespace,
            info.name,
            apply,
            subresource=info.subresource,
            dry_run=_dry_run(req),
            field_validation=_fv(req),
        )
        return Response(200, encode(result.obj), headers=_warnings(result))

    def _server_side_apply(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        """Server-side apply, common case: create the object, or merge the applied configuration
        into it (strategic merge for built-ins, JSON merge for custom objects). Deviations: no
        ``managedFields``, no conflicts between managers, and fields dropped from a later applied
        configuration are kept."""
        if not req.query.get("fieldManager"):
            raise errors.invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                [FieldError("FieldValueRequired", "fieldManager", "is required for apply patch")],
                qualified_kind="PatchOptions.meta.k8s.io",
            )
        applied = self._decode_apply(req, rt)
        name = (applied.get("metadata") or {}).get("name")
        if name is not None and name != info.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL ({info.name})"
            )
        check = _type_check(rt)
        if info.subresource == "" and self.storage.get(rt, info.namespace, info.name) is None:
            body = check(_set_path(applied, ["metadata", "name"], info.name))
            result = self.storage.create(
                rt, body, info.namespace, dry_run=_dry_run(req), field_validation=_fv(req)
            )
            return Response(201, encode(result.obj), headers=_warnings(result))

        def merge(current: Obj) -> Obj:
            if rt.builtin:
                return check(patch.strategic_merge_patch(current, applied, rt.strategy.smp_lists))
            return patch.merge_patch(current, applied)

        result = self.storage.guaranteed_update(
            rt,
            info.namespace,
            info.name,
            merge,
            subresource=info.subresource,
            dry_run=_dry_run(req),
            field_validation=_fv(req),
        )
        return Response(200, encode(result.obj), headers=_warnings(result))

    def _decode_apply(self, req: Request, rt: ResourceType) -> Obj:
        try:
            value = jsonbody.yaml_loads(req.body)
        except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
            reason = exc if isinstance(exc, jsonbody.BodyError) else "error converting YAML to JSON"
            raise errors.bad_request(f"error decoding YAML: {reason}") from exc
        if not isinstance(value, dict):
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"json: cannot unmarshal {json_kind(value)} into Go value of type map[string]interface {{}}"
            )
        return value

    def _patch_function(self, rt: ResourceType, content_type: str, raw: bytes) -> Callable[[Obj], Obj]:
        smp_allowed = rt.strategy.smp_allowed
        if content_type not in (
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
        ) or (content_type == "application/strategic-merge-patch+json" and not smp_allowed):
            raise errors.unsupported_media_type(content_type, smp_allowed)
        try:
            document = jsonbody.loads(raw or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        check = _type_check(rt)

        def apply(current: Obj) -> Obj:
            try:
                if content_type == "application/json-patch+json":
                    return check(patch.json_patch(current, document))
                if content_type == "application/merge-patch+json":
                    return check(patch.merge_patch(current, document))
                return check(patch.strategic_merge_patch(current, document, rt.strategy.smp_lists))
            except patch.PatchError as exc:
                if exc.code == 422:
                    raise ApiStatusError(errors.status_failure(422, "Invalid", exc.message)) from exc
                raise errors.bad_request(exc.message) from exc

        return apply

    def _write_scale(
        self, req: Request, rt: ResourceType, info: RequestInfo, change: Callable[[Obj], Obj]
    ) -> Response:
        assert rt.scale is not None
        spec_path = [p for p in rt.scale.spec_path.split(".") if p]

        def mutate(current: Obj) -> Obj:
            scale = change(scale_of(rt, current))
            if not isinstance(scale, dict):
                raise errors.bad_request('Scale in version "v1" cannot be handled as a Scale')
            replicas = (scale.get("spec") or {}).get("replicas", 0)
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid("Scale", "autoscaling", info.name, [])
            want_rv = (scale.get("metadata") or {}).get("resourceVersion")
            updated = _set_path(current, spec_path, replicas)
            updated["metadata"] = {
                **current["metadata"],
                "resourceVersion": want_rv or current["metadata"].get("resourceVersion"),
            }
            return updated

        result = self.storage.guaranteed_update(rt, info.namespace, info.name, mutate, dry_run=_dry_run(req))
        return Response(200, encode(scale_of(rt, result.obj)))

    def _evict(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response:
        body = self._decode(req, rt, kind="Eviction")
        if not isinstance(body, dict):
            raise errors.bad_request("Eviction body must be an object")
        result = evict(self.storage, info.namespace, info.name, body, clock=self.clock, dry_run=_dry_run(req))
        return Response(201, encode(result))

    def _delete_options(self, req: Request) -> Obj:
        if req.body.strip():
            decoded = self._decode_json(req.body, "DeleteOptions", "v1")
            if not isinstance(decoded, dict):
                raise errors.bad_request(
                    'DeleteOptions in version "v1" cannot be handled as a DeleteOptions: '
                    "json: cannot unmarshal " + json_kind(decoded) + " into Go value of type v1.DeleteOptions"
                )
            write_options.validate_delete(decoded, req.query)
            return decoded
        result: Obj = {}
        if "gracePeriodSeconds" in req.query:
            result["gracePeriodSeconds"] = write_options.go_int(req.query["gracePeriodSeconds"])
        if "propagationPolicy" in req.query:
            result["propagationPolicy"] = req.query["propagationPolicy"]
        try:
            orphan = parse_bool(req.query.get("orphanDependents"))
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc
        if orphan is not None:
            result["orphanDependents"] = orphan
        write_options.validate_delete(result, req.query)
        return result

    def _delete_collection(self, req: Request, rt: ResourceType, namespace: str | None) -> Response:
        opts = parse_list_options(rt, req.query, watch=False)
        options = self._delete_options(req)
        with self.storage.store.lock:
            items = self.storage.store.items(rt.storage_key, namespace)
        affected: list[Stored] = []
        for stored in items:
            if not opts.predicate(stored.obj):
                continue
            meta = stored.obj["metadata"]
            try:
                obj, _ = self.storage.delete(
                    rt, meta.get("namespace", ""), meta["name"], options, dry_run=_dry_run(req)
                )
            except ApiStatusError as err:
                if err.code == 404:  # deleted concurrently
                    continue
                raise
            # Kinds that answer a Status on delete are listed with their last state.
            affected.append(Stored(stored.obj if obj.get("kind") == "Status" else obj, stored.rv))
        return Response(200, encode_list(rt, affected, self.storage.store.rv, "", None))

    def _events_v1(self, req: Request, rt: ResourceType, info: RequestInfo) -> Response | WatchStart:
        """events.k8s.io/v1: the core Event storage seen through the field mapping."""
        core = self.storage.type("", "events")
        verb, namespace, name = info.verb, info.namespace, info.name
        if info.subresource or (
            (verb == "create") == bool(name) and verb in ("create", "update", "patch", "delete")
        ):
            raise errors.method_not_allowed(req.method)
        as_table = tables.wants_table(req.headers.get("Accept", ""))
        if verb == "get":
            stored = self.storage.get_stored(core, namespace, name)
            if as_table:  # the server prints events of both APIs from the one internal type
                return Response(
                    200, encode(tables.table(core, [stored.obj], {"resourceVersion": str(stored.rv)}))
                )
            return Response(200, encode(eventsv1.from_core(stored.obj)))
        if verb == "list":
            opts = parse_list_options(core, req.query, watch=False)
            items, rv, token, remaining = list_objects(
                self.storage.store, rt, namespace or None, opts, self.freshness_timeout
            )
            if as_table:
                meta = _table_list_meta(rv, token, remaining)
                return Response(200, encode(tables.table(core, [s.obj for s in items], meta)))
            views = [Stored(eventsv1.from_core(s.obj), s.rv) for s in items]
            return Response(200, encode_list(rt, views, rv, token, remaining))
        if verb == "watch":
            opts = parse_list_options(core, req.query, watch=True)
            return start_watch(
                self.storage.store,
                rt,
                namespace or None,
                opts,
                min_request_timeout=self.hub.min_request_timeout,
                max_queue=self.hub.max_queue,
                convert=_table_view(core) if as_table else eventsv1.from_core,
            )
        if verb == "deletecollection":
            return self._delete_collection(req, core, namespace or None)
        if verb not in ("create", "update", "patch", "delete") or (verb == "create" and not namespace):
            raise errors.method_not_allowed(req.method)
        result = self._events_v1_write(req, rt, core, info)
        if result.get("kind") == "Event":
            result = eventsv1.from_core(result)
        return Response(201 if verb == "create" else 200, encode(result))

    def _events_v1_write(self, req: Request, rt: ResourceType, core: ResourceType, info: RequestInfo) -> Obj:
        verb, namespace, name, dry_run = info.verb, info.namespace, info.name, _dry_run(req)
        if verb == "create":
            body = self._decode(req, rt)
            eventsv1.validate_create(rt, body)
            return self.storage.create(core, eventsv1.to_core(body), namespace, dry_run=dry_run).obj
        if verb == "update":
            body = self._decode(req, rt)
            return self.storage.update(core, eventsv1.to_core(body), namespace, name, dry_run=dry_run).obj
        if verb == "patch":
            content_type = req.headers.get("Content-Type", "").split(";")[0].strip().lower()
            apply = self._patch_function(rt, content_type, req.body)

            def mutate(current: Obj) -> Obj:
                return eventsv1.to_core(apply(eventsv1.from_core(current)))

            return self.storage.guaranteed_update(core, namespace, name, mutate, dry_run=dry_run).obj
        body, _ = self.storage.delete(core, namespace, name, self._delete_options(req), dry_run=dry_run)
        return body

    # ------------------------------------------------------------------ bodies

    def _decode(self, req: Request, rt: ResourceType, kind: str | None = None) -> Obj:
        kind = kind or rt.kind
        content_type = req.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if content_type in ("application/yaml", "application/x-yaml", "text/yaml"):
            try:
                value = jsonbody.yaml_loads(req.body)
            except (yaml.YAMLError, UnicodeDecodeError, ValueError) as exc:
                reason = exc if isinstance(exc, jsonbody.BodyError) else "error converting YAML to JSON"
                raise errors.bad_request(
                    f'{kind} in version "{rt.version}" cannot be handled as a {kind}: {reason}'
                ) from exc
        elif content_type in ("application/json", "", "*/*"):
            value = self._decode_json(req.body, kind, rt.version)
            if _fv(req) == "Strict":
                _reject_duplicate_keys(req.body, kind, rt.version)
        elif content_type == k8sproto.PROTOBUF and k8sproto.supports(rt.group, kind):
            try:
                value = k8sproto.decode(req.body, rt.group, kind)
            except k8sproto.ProtobufError as exc:
                if exc.unsupported:
                    raise ApiStatusError(
                        errors.status_failure(415, "UnsupportedMediaType", str(exc))
                    ) from exc
                raise errors.bad_request(
                    f'{kind} in version "{rt.version}" cannot be handled as a {kind}: {exc}'
                ) from exc
        else:
            raise errors.unsupported_body_type(protobuf=rt.builtin)
        if not isinstance(value, dict):
            raise errors.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {kind}: '
                f"json: cannot unmarshal {json_kind(value)} into Go value of type map[string]interface {{}}"
            )
        if kind == rt.kind and rt.builtin:
            try:
                check_types(rt.group, rt.kind, value)
            except TypeMismatch as exc:
                raise errors.bad_request(
                    f'{kind} in version "{rt.version}" cannot be handled as a {kind}: {exc}'
                ) from exc
        return value

    @staticmethod
    def _decode_json(raw: bytes, kind: str, version: str) -> Any:
        try:
            return jsonbody.loads(raw)
        except ValueError as exc:
            raise errors.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}'
            ) from exc


def _reject_duplicate_keys(raw: bytes, kind: str, version: str) -> None:
    """``fieldValidation=Strict``: a duplicated JSON key is a strict decoding error (400)."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise errors.bad_request(
                    f'{kind} in version "{version}" cannot be handled as a {kind}: '
                    f'strict decoding error: json: duplicate field "{key}"'
                )
            seen.add(key)
        return dict(pairs)

    json.loads(raw, object_pairs_hook=hook)


def _type_check(rt: ResourceType) -> Callable[[Obj], Obj]:
    """For built-in kinds: the patched object must still decode into the kind (400 otherwise)."""

    def check(obj: Obj) -> Obj:
        if rt.builtin and isinstance(obj, dict):
            try:
                check_types(rt.group, rt.kind, obj)
            except TypeMismatch as exc:
                raise errors.bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {exc}'
                ) from exc
        return obj

    return check


def _is_apply(req: Request) -> bool:
    return (
        req.headers.get("Content-Type", "")
        .split(";")[0]
        .strip()
        .lower()
        .startswith("application/apply-patch")
    )


def _table_list_meta(rv: int, token: str, remaining: int | None) -> Obj:
    """The ``ListMeta`` of a Table answering a list."""
    meta: Obj = {"resourceVersion": str(rv)}
    if token:
        meta["continue"] = token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    return meta


def _table_view(rt: ResourceType) -> Callable[[Obj], Obj]:
    def view(obj: Obj) -> Obj:
        return tables.table(rt, [obj], {"resourceVersion": obj["metadata"].get("resourceVersion", "")})

    return view


def _found(body: bytes | None) -> Response:
    if body is None:
        raise errors.resource_not_found()
    return Response(200, body)


def _dry_run(req: Request) -> bool:
    return req.query.get("dryRun") == "All"


def _fv(req: Request) -> str:
    value = req.query.get("fieldValidation", "Warn")
    return value if value in ("Ignore", "Warn", "Strict") else "Warn"


def _accepts_json(accept: str) -> bool:
    if not accept:
        return True
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("application/json", "*/*", "application/*", "application/json-patch+json"):
            return True
    return False


def health_response(kind: str, query: Mapping[str, str], *, ok: bool) -> Response:
    """``/healthz``, ``/livez``, ``/readyz`` (plain text)."""
    if "verbose" in query:
        outcome = "passed" if ok else "failed"
        text = f"[{'+' if ok else '-'}]ping {'ok' if ok else 'failed'}\n{kind} check {outcome}\n"
    else:
        text = "ok" if ok else f"[-]ping failed: reason withheld\n{kind} check failed"
    return Response(200 if ok else 500, text.encode(), content_type="text/plain; charset=utf-8")


def _get_path(obj: Obj, path: list[str]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _set_path(obj: Obj, path: list[str], value: Any) -> Obj:
    if not path:
        return obj
    head = path[0]
    child = obj.get(head)
    new_child = (
        _set_path(child if isinstance(child, dict) else {}, path[1:], value) if len(path) > 1 else value
    )
    return {**obj, head: new_child}


def scale_of(rt: ResourceType, obj: Obj) -> Obj:
    """The ``autoscaling/v1`` Scale view of an object."""
    assert rt.scale is not None
    meta = obj["metadata"]
    spec_replicas = _get_path(obj, [p for p in rt.scale.spec_path.split(".") if p]) or 0
    status_replicas = _get_path(obj, [p for p in rt.scale.status_path.split(".") if p]) or 0
    scale_meta = {
        k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
    }
    status: Obj = {"replicas": status_replicas}
    if rt.scale.selector_path:
        selector = _get_path(obj, [p for p in rt.scale.selector_path.split(".") if p])
        if selector:
            status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": spec_replicas},
        "status": status,
    }
