"""Storage: the generic REST semantics of every resource on top of :class:`VersionedStore`.

This is the transactional API used by the HTTP handlers *and* the simulated controllers
(``emulator.storage``). It applies the real server's rules for create, update (and status), patch and
delete (via :mod:`mcm.emulator.deletion`), using the per-kind ``Strategy``.

Guarantees:

- Methods raise :class:`~mcm.emulator.errors.ApiStatusError` with the real server's Status.
- Candidates are computed from immutable stored versions outside the lock; the commit is a
  compare-and-swap. Updates without a resourceVersion and patches retry up to 5 times when the
  object changed meanwhile (guaranteed update); updates carrying a resourceVersion get 409.
- No-op writes do not commit: the stored object is returned with its RV unchanged.
- ``dry_run=True`` runs every check and returns the would-be result without committing.
- Controllers may wrap several calls in ``with storage.transaction():`` to make them atomic.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as _dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from mcm.emulator import builtinfields, errors, objectmeta
from mcm.emulator.deletion import Deletion
from mcm.emulator.errors import ApiStatusError, Raw
from mcm.emulator.kinds import FieldError
from mcm.emulator.registry import Registry, ResourceType
from mcm.emulator.store import Obj, StaleObjectError, Stored, VersionedStore
from mcm.emulator.timefmt import format_time

__all__ = ["Storage", "WriteResult"]

MAX_RETRIES = 5
NAMESPACES = "namespaces"


@dataclass
class WriteResult:
    """The outcome of a write: the object to answer with, whether it was created, warnings."""

    obj: Obj
    created: bool = False
    warnings: builtins.list[str] = field(default_factory=list)
    committed: bool = True


def _utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class Storage:
    """Create/read/update/patch/delete with Kubernetes semantics for any registered type."""

    def __init__(
        self, store: VersionedStore, registry: Registry, *, now: Callable[[], _dt.datetime] = _utcnow
    ) -> None:
        self.store = store
        self.registry = registry
        self.now = now
        self.evictions_enabled = True
        self._deletion = Deletion(store, now)

    # ------------------------------------------------------------------ helpers

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store lock so that several operations commit atomically."""
        with self.store.lock:
            yield

    def type(self, group: str, resource: str) -> ResourceType:
        """The served type of ``group``/``resource`` (e.g. ``("", "pods")``); 404 if not served."""
        rt = self.registry.resource(group, resource)
        if rt is None:
            raise errors.resource_not_found()
        return rt

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        """The stored object (read-only) or None."""
        stored = self.store.get(rt.storage_key, namespace if rt.namespaced else "", name)
        return None if stored is None else stored.obj

    def get_stored(self, rt: ResourceType, namespace: str, name: str) -> Stored:
        """The stored version, or 404."""
        stored = self.store.get(rt.storage_key, namespace if rt.namespaced else "", name)
        if stored is None:
            raise errors.not_found(rt.group, rt.resource, name)
        return stored

    def list(self, rt: ResourceType, namespace: str | None = None) -> builtins.list[Obj]:
        """Stored objects (read-only) in key order."""
        return [s.obj for s in self.store.items(rt.storage_key, namespace if rt.namespaced else None)]

    def _check_type_meta(self, rt: ResourceType, body: Obj) -> Obj:
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if api_version not in (None, "", rt.group_version) or kind not in (None, "", rt.kind):
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"the object kind/apiVersion ({kind}/{api_version}) does not match "
                f"{rt.kind}/{rt.group_version}"
            )
        meta = body.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                "metadata must be an object"
            )
        problem = objectmeta.decode_error(meta)
        if problem is not None:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {problem}'
            )
        if rt.builtin:
            for key in ("spec", "status"):
                value = body.get(key)
                if value is not None and not isinstance(value, dict):
                    raise errors.bad_request(
                        f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: json: '
                        f"cannot unmarshal {type(value).__name__} into Go struct field {rt.kind}.{key}"
                    )
        rest = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
        return {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": dict(meta), **rest}

    def _check_namespace(self, rt: ResourceType, body: Obj, namespace: str) -> Obj:
        meta = body["metadata"]
        if not rt.namespaced:
            meta.pop("namespace", None)
            return body
        given = meta.get("namespace")
        if given and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
        return body

    def _invalid(self, rt: ResourceType, name: str, errs: builtins.list[FieldError]) -> ApiStatusError:
        return errors.invalid(rt.kind, rt.group, name, errs)

    def _prepare(self, rt: ResourceType, obj: Obj, old: Obj | None) -> tuple[Obj, builtins.list[str]]:
        """prune, normalize, defaults; one ``unknown field`` warning per pruned path (lists included)."""
        strategy = rt.strategy
        try:
            pruned, dropped = strategy.prune(obj)
            candidate = strategy.defaults(strategy.normalize(pruned))
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            # A wrongly typed field that the kind's rules trip over is a decoding error, as in Go.
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {_decode_text(exc)}'
            ) from exc
        del old
        return candidate, [f'unknown field "{path}"' for path in dropped]

    def _validate(self, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        errs = list(objectmeta.validate_metadata(new["metadata"]))
        try:
            errs += rt.strategy.validate(new, old)
        except (TypeError, AttributeError, KeyError) as exc:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {_decode_text(exc)}'
            ) from exc
        if errs:
            raise self._invalid(rt, str(new["metadata"].get("name", "")), errs)

    @staticmethod
    def _apply_field_validation(
        rt: ResourceType, sent: Obj, warnings: builtins.list[str], mode: str
    ) -> builtins.list[str]:
        """Strict: 400 listing every unknown field (built-in kinds checked against their model's
        fields); Warn: the warnings; Ignore: none. Unknown fields of built-in kinds are kept."""
        if mode == "Strict" and rt.builtin:
            unknown = builtinfields.unknown_paths(rt.group, rt.kind, sent)
            warnings = [*warnings, *(f'unknown field "{path}"' for path in unknown)]
        if mode == "Strict" and warnings:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {', '.join(warnings)}"
            )
        return [] if mode == "Ignore" else warnings

    # ------------------------------------------------------------------ create

    def create(
        self,
        rt: ResourceType,
        body: Obj,
        namespace: str = "",
        *,
        dry_run: bool = False,
        field_validation: str = "Warn",
        bypass_strategy: bool = False,
    ) -> WriteResult:
        """Create an object. Answer code 201 on success."""
        obj = self._decode_new(rt, body, namespace)
        name = obj["metadata"].get("name")
        generate = obj["metadata"].get("generateName")
        self._stamp_creation(rt, obj["metadata"])
        warnings: builtins.list[str] = []
        if not bypass_strategy:
            obj, warnings = self._prepare_new(rt, obj, field_validation)
        attempts = MAX_RETRIES if generate and not name else 1
        for attempt in range(attempts):
            candidate = obj if name else self._with_generated_name(obj, str(generate))
            cname = str(candidate["metadata"]["name"])
            self._validate_new(rt, candidate, cname, bypass_strategy)
            if dry_run:
                return self._dry_run_create(rt, namespace, candidate, warnings)
            try:
                change = self.store.commit(rt.storage_key, "ADDED", candidate, None)
            except StaleObjectError:
                if attempt + 1 < attempts:
                    continue
                raise errors.already_exists(rt.group, rt.resource, cname) from None
            return WriteResult(change.new.obj, True, warnings)
        raise errors.already_exists(rt.group, rt.resource, str(generate))  # pragma: no cover

    def _decode_new(self, rt: ResourceType, body: Obj, namespace: str) -> Obj:
        """The request body as an object to create: type meta, namespace and name checked."""
        if not isinstance(body, dict):
            raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}')
        obj = self._check_type_meta(rt, objectmeta.drop_nulls(body))
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise errors.storage_error("resourceVersion should not be set on objects to be created")
        obj = self._check_namespace(rt, obj, namespace)
        if rt.namespaced:
            self._check_namespace_usable(
                rt, namespace, str(meta.get("name") or meta.get("generateName") or "")
            )
        if not meta.get("name") and not meta.get("generateName"):
            raise self._invalid(
                rt,
                "",
                [FieldError("FieldValueRequired", "metadata.name", "name or generateName is required")],
            )
        return obj

    def _stamp_creation(self, rt: ResourceType, meta: Obj) -> None:
        """Drop client-set server fields; set uid, creationTimestamp and the first generation."""
        for key in ("deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "resourceVersion"):
            meta.pop(key, None)
        meta["uid"] = objectmeta.new_uid()
        meta["creationTimestamp"] = format_time(self.now())
        if rt.strategy.tracks_generation != "none":
            meta["generation"] = 1
        else:
            meta.pop("generation", None)

    def _prepare_new(
        self, rt: ResourceType, obj: Obj, field_validation: str
    ) -> tuple[Obj, builtins.list[str]]:
        """The kind's create strategy (status reset, prune, defaults) and field validation."""
        if rt.strategy.reset_status_on_create:
            obj.pop("status", None)
        prepared, warnings = self._prepare(rt, obj, None)
        prepared = rt.strategy.admit_create(prepared)
        return prepared, self._apply_field_validation(rt, obj, warnings, field_validation)

    @staticmethod
    def _with_generated_name(obj: Obj, generate_name: str) -> Obj:
        """A shallow copy of ``obj`` named from ``generateName`` plus a random suffix."""
        return {**obj, "metadata": {**obj["metadata"], "name": objectmeta.generate_name(generate_name)}}

    def _validate_new(self, rt: ResourceType, candidate: Obj, name: str, bypass_strategy: bool) -> None:
        """422 for an invalid name, or (unless bypassed) for what the kind's validation rejects."""
        name_errors = objectmeta.validate_name(name, dns_label=rt.kind == "Namespace")
        if name_errors:
            raise self._invalid(rt, name, name_errors)
        if not bypass_strategy:
            self._validate(rt, candidate, None)

    def _dry_run_create(
        self, rt: ResourceType, namespace: str, candidate: Obj, warnings: builtins.list[str]
    ) -> WriteResult:
        """The would-be result of a create, after the existence check; nothing is stored."""
        name = str(candidate["metadata"]["name"])
        if self.get(rt, namespace, name) is not None:
            raise errors.already_exists(rt.group, rt.resource, name)
        return WriteResult(candidate, True, warnings, committed=False)

    def _check_namespace_usable(self, rt: ResourceType, namespace: str, name: str) -> None:
        stored = self.store.get(NAMESPACES, "", namespace)
        if stored is None:
            raise errors.not_found("", "namespaces", namespace)
        if (
            stored.obj["metadata"].get("deletionTimestamp")
            or (stored.obj.get("status") or {}).get("phase") == "Terminating"
        ):
            raise errors.namespace_terminating(rt.group, rt.resource, name, namespace)

    # ------------------------------------------------------------------ update

    def update(
        self,
        rt: ResourceType,
        body: Obj,
        namespace: str,
        name: str,
        *,
        subresource: str = "",
        dry_run: bool = False,
        field_validation: str = "Warn",
    ) -> WriteResult:
        """PUT: optimistic concurrency, status rules, generation, finalizer release."""
        obj = self._decode_replacement(rt, body, namespace, name)
        body_rv = str(obj["metadata"].get("resourceVersion") or "")
        for _ in range(MAX_RETRIES):
            current = self.store.get(rt.storage_key, namespace if rt.namespaced else "", name)
            if current is None:
                if rt.strategy.create_on_update and not subresource:
                    return self._create_on_update(rt, obj, namespace, dry_run, field_validation)
                raise errors.not_found(rt.group, rt.resource, name)
            self._check_update_precondition(rt, name, body_rv, current.rv)
            try:
                return self._write_update(
                    rt,
                    current,
                    obj,
                    subresource=subresource,
                    dry_run=dry_run,
                    field_validation=field_validation,
                )
            except StaleObjectError:
                if body_rv:
                    raise errors.conflict(rt.group, rt.resource, name) from None
        raise errors.conflict(rt.group, rt.resource, name)

    def _decode_replacement(self, rt: ResourceType, body: Obj, namespace: str, name: str) -> Obj:
        """The PUT body as a replacement: type meta checked, name matching the URL, namespace set."""
        if not isinstance(body, dict):
            raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}')
        obj = self._check_type_meta(rt, objectmeta.drop_nulls(body))
        body_name = obj["metadata"].get("name")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name or ''}) does not match the name on the URL ({name})"
            )
        return self._check_namespace(rt, obj, namespace)

    def _create_on_update(
        self, rt: ResourceType, obj: Obj, namespace: str, dry_run: bool, field_validation: str
    ) -> WriteResult:
        """PUT of a missing object of a create-on-update kind: a create without the resourceVersion."""
        created = dict(obj)
        created["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        return self.create(rt, created, namespace, dry_run=dry_run, field_validation=field_validation)

    def _check_update_precondition(self, rt: ResourceType, name: str, body_rv: str, current_rv: int) -> None:
        """409 when the sent resourceVersion is stale; 422 when it is missing and the kind needs it."""
        if body_rv and body_rv != str(current_rv):
            raise errors.conflict(rt.group, rt.resource, name)
        if not body_rv and not rt.strategy.unconditional_update:
            raise self._invalid(
                rt,
                name,
                [
                    FieldError(
                        "FieldValueInvalid",
                        "metadata.resourceVersion",
                        "must be specified for an update",
                        Raw("0"),
                    )
                ],
            )

    def guaranteed_update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        mutate: Callable[[Obj], Obj],
        *,
        subresource: str = "",
        dry_run: bool = False,
        field_validation: str = "Warn",
    ) -> WriteResult:
        """Read, ``mutate(current) -> new`` and write, retrying on concurrent changes (patch path).

        A ``metadata.resourceVersion`` in the mutated object acts as a precondition (409).
        """
        for _ in range(MAX_RETRIES):
            current = self.get_stored(rt, namespace, name)
            new = mutate(current.obj)
            if not isinstance(new, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            new = self._check_type_meta(rt, objectmeta.drop_nulls(new))
            new_meta = new["metadata"]
            if new_meta.get("name") != name:
                raise errors.bad_request(
                    f"the name of the object ({new_meta.get('name') or ''}) does not match the name "
                    f"on the URL ({name})"
                )
            if rt.namespaced and new_meta.get("namespace") not in (None, "", namespace):
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            new = self._check_namespace(rt, new, namespace)
            patched_rv = str(new_meta.get("resourceVersion") or "")
            if patched_rv and patched_rv != str(current.rv):
                raise errors.conflict(rt.group, rt.resource, name)
            try:
                return self._write_update(
                    rt,
                    current,
                    new,
                    subresource=subresource,
                    dry_run=dry_run,
                    field_validation=field_validation,
                )
            except StaleObjectError:
                continue
        raise errors.conflict(rt.group, rt.resource, name)

    def _merge_for_subresource(self, rt: ResourceType, old: Obj, new: Obj, subresource: str) -> Obj:
        if subresource == "status":
            if rt.kind == "Node":
                merged = dict(new)
                if "spec" in old:
                    merged["spec"] = old["spec"]
                else:
                    merged.pop("spec", None)
                return merged
            merged = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                merged["status"] = new["status"]
            return merged
        if subresource == "finalize":
            merged = dict(old)
            merged["spec"] = {
                **(old.get("spec") or {}),
                "finalizers": (new.get("spec") or {}).get("finalizers") or [],
            }
            return merged
        if rt.status:
            merged = {k: v for k, v in new.items() if k != "status"}
            if "status" in old:
                merged["status"] = old["status"]
            return merged
        return new

    def _write_update(
        self,
        rt: ResourceType,
        current: Stored,
        body: Obj,
        *,
        subresource: str,
        dry_run: bool,
        field_validation: str,
    ) -> WriteResult:
        old = current.obj
        old_meta = old["metadata"]
        uid = body["metadata"].get("uid")
        if uid and uid != old_meta.get("uid"):
            raise self._invalid(
                rt,
                old_meta["name"],
                [FieldError("FieldValueInvalid", "metadata.uid", "field is immutable", uid)],
            )
        merged = self._merge_for_subresource(rt, old, body, subresource)
        meta = dict(merged["metadata"])
        for key in objectmeta.SYSTEM_FIELDS:
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        merged["metadata"] = meta
        candidate, warnings = self._prepare(rt, merged, old)
        warnings = self._apply_field_validation(rt, merged, warnings, field_validation)
        self._validate(rt, candidate, old)
        candidate = self._bump_generation(rt, old, candidate)
        if candidate == old:
            return WriteResult(old, False, warnings, committed=False)
        if self._finalizers_released(candidate):
            return self._release(rt, current, candidate, warnings, dry_run)
        if dry_run:
            return WriteResult(candidate, False, warnings, committed=False)
        change = self.store.commit(rt.storage_key, "MODIFIED", candidate, current)
        return WriteResult(change.new.obj, False, warnings)

    @staticmethod
    def _bump_generation(rt: ResourceType, old: Obj, new: Obj) -> Obj:
        policy = rt.strategy.tracks_generation
        if policy == "none":
            return new
        if policy == "spec":
            changed = old.get("spec") != new.get("spec")
        else:
            skip = {"metadata", "status"} if rt.status else {"metadata"}
            keys = (set(old) | set(new)) - skip
            changed = any(old.get(k) != new.get(k) for k in keys)
        if not changed:
            return new
        generation = int(old["metadata"].get("generation") or 0) + 1
        return {**new, "metadata": {**new["metadata"], "generation": generation}}

    @staticmethod
    def _finalizers_released(obj: Obj) -> bool:
        meta = obj["metadata"]
        if not meta.get("deletionTimestamp") or meta.get("finalizers"):
            return False
        if obj.get("kind") == "Namespace":
            return False
        return not meta.get("deletionGracePeriodSeconds")

    def _release(
        self, rt: ResourceType, current: Stored, candidate: Obj, warnings: builtins.list[str], dry_run: bool
    ) -> WriteResult:
        if dry_run:
            return WriteResult(candidate, False, warnings, committed=False)
        change = self.store.commit(rt.storage_key, "DELETED", candidate, current)
        return WriteResult(change.new.obj, False, warnings)

    # ------------------------------------------------------------------ delete

    def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        """DELETE (pods: graceful deletion). Returns ``(response body, removed)``."""
        return self._deletion.delete(rt, namespace, name, options or {}, dry_run=dry_run)


def _decode_text(exc: Exception) -> str:
    """The decoder's words for a failed decode; Python's own exception text never reaches a client."""
    text = str(exc)
    python_words = ("invalid literal", "could not convert", "object has no attribute", "object is not")
    client_worded = isinstance(exc, ValueError) and not isinstance(exc, UnicodeError)
    if client_worded and not any(word in text for word in python_words):
        return text  # DecodeError and the time parsers carry messages written for clients
    return "json: cannot unmarshal a value of the wrong type into the object"
