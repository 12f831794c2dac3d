"""DELETE semantics of kube-apiserver (``registry/generic/registry/store.go``, ``Delete``):
preconditions, propagation finalizers, graceful deletion.

Guarantees:

- Preconditions (``uid``, ``resourceVersion``) are checked first and answer 409 with upstream text.
- ``propagationPolicy: Orphan`` (or ``orphanDependents: true``) adds finalizer ``orphan``;
  ``Foreground`` adds ``foregroundDeletion``.
- Kinds with a ``graceful_delete`` strategy (pods) get ``deletionTimestamp = now + grace`` when the
  grace is positive; a later DELETE may only shorten it. Grace 0 behaves like non-graceful kinds.
- Objects with finalizers are only marked (``deletionTimestamp``, ``deletionGracePeriodSeconds: 0``,
  generation +1 where tracked); others are removed at once and watchers see one DELETED event.
- Namespaces are marked ``Terminating`` while ``spec.finalizers`` is non-empty.

:class:`Deletion` works on the :class:`~mcm.emulator.store.VersionedStore` directly;
:class:`~mcm.emulator.storage.Storage` calls it, and deletion does not import storage back.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcm.emulator import errors
from mcm.emulator.store import Obj, StaleObjectError, Stored, VersionedStore
from mcm.emulator.timefmt import format_time, parse_time

if TYPE_CHECKING:
    from mcm.emulator.registry import ResourceType

__all__ = ["Deletion"]

MAX_RETRIES = 5


class Deletion:
    """DELETE on one store; ``now`` gives the time for deletion timestamps."""

    def __init__(self, store: VersionedStore, now: Callable[[], _dt.datetime]) -> None:
        self.store = store
        self.now = now

    def delete(
        self, rt: ResourceType, namespace: str, name: str, options: Obj, *, dry_run: bool
    ) -> tuple[Obj, bool]:
        """Delete one object; return ``(response body, removed)``."""
        for _ in range(MAX_RETRIES):
            current = self.store.get(rt.storage_key, namespace if rt.namespaced else "", name)
            if current is None:
                raise errors.not_found(rt.group, rt.resource, name)
            _check_preconditions(rt, current, options)
            try:
                return self._delete_once(rt, current, options, dry_run)
            except StaleObjectError:
                if (options.get("preconditions") or {}).get("resourceVersion"):
                    raise errors.conflict(rt.group, rt.resource, name) from None
        raise errors.conflict(rt.group, rt.resource, name)

    def _delete_once(
        self, rt: ResourceType, current: Stored, options: Obj, dry_run: bool
    ) -> tuple[Obj, bool]:
        obj = current.obj
        meta = obj["metadata"]
        finalizers = _propagation_finalizers(options, list(meta.get("finalizers") or []))
        if rt.kind == "Namespace":
            return self._delete_namespace(rt, current, finalizers, dry_run)
        grace = _grace_for(rt, obj, options)
        if meta.get("deletionTimestamp"):
            return self._delete_terminating(rt, current, finalizers, grace=grace, dry_run=dry_run)
        if grace > 0:
            deadline = self.now() + _dt.timedelta(seconds=grace)
            return self._mark(rt, current, finalizers, deadline=deadline, grace=grace, dry_run=dry_run)
        if finalizers:
            return self._mark(rt, current, finalizers, deadline=self.now(), grace=0, dry_run=dry_run)
        return self._remove(rt, current, dry_run)

    def _delete_terminating(
        self, rt: ResourceType, current: Stored, finalizers: list[str], *, grace: int, dry_run: bool
    ) -> tuple[Obj, bool]:
        meta = current.obj["metadata"]
        old_grace = meta.get("deletionGracePeriodSeconds")
        if old_grace and rt.strategy.graceful_delete is not None and grace < int(old_grace):
            old_deadline = parse_time(str(meta["deletionTimestamp"]))
            deadline = old_deadline - _dt.timedelta(seconds=int(old_grace)) + _dt.timedelta(seconds=grace)
            if grace == 0 and not finalizers:
                return self._remove(rt, current, dry_run)
            return self._mark(
                rt, current, finalizers, deadline=deadline, grace=grace, dry_run=dry_run, force=True
            )
        if not old_grace and not finalizers:
            return self._remove(rt, current, dry_run)
        if finalizers != list(meta.get("finalizers") or []):
            new = {**current.obj, "metadata": {**meta, "finalizers": finalizers}}
            return self._commit(rt, current, new, dry_run)
        return current.obj, False

    def _mark(
        self,
        rt: ResourceType,
        current: Stored,
        finalizers: list[str],
        *,
        deadline: _dt.datetime,
        grace: int,
        dry_run: bool,
        force: bool = False,
    ) -> tuple[Obj, bool]:
        meta = dict(current.obj["metadata"])
        existing = meta.get("deletionTimestamp")
        if force or not existing or parse_time(str(existing)) > deadline:
            meta["deletionTimestamp"] = format_time(deadline)
        meta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            meta["finalizers"] = finalizers
        if rt.strategy.tracks_generation != "none" and not existing:
            meta["generation"] = int(meta.get("generation") or 0) + 1
        return self._commit(rt, current, {**current.obj, "metadata": meta}, dry_run)

    def _commit(self, rt: ResourceType, current: Stored, new: Obj, dry_run: bool) -> tuple[Obj, bool]:
        if new == current.obj or dry_run:
            return new, False
        change = self.store.commit(rt.storage_key, "MODIFIED", new, current)
        return change.new.obj, False

    def _remove(self, rt: ResourceType, current: Stored, dry_run: bool) -> tuple[Obj, bool]:
        if dry_run:
            final = current.obj
        else:
            final = self.store.commit(rt.storage_key, "DELETED", current.obj, current).new.obj
        if rt.strategy.return_deleted_object:
            return final, True
        meta = final["metadata"]
        return errors.status_success(meta["name"], rt.group, rt.resource, str(meta.get("uid", ""))), True

    def _delete_namespace(
        self, rt: ResourceType, current: Stored, finalizers: list[str], dry_run: bool
    ) -> tuple[Obj, bool]:
        obj = current.obj
        spec_finalizers = (obj.get("spec") or {}).get("finalizers") or []
        if not spec_finalizers and not finalizers:
            return self._remove(rt, current, dry_run)
        meta = dict(obj["metadata"])
        meta.setdefault("deletionTimestamp", format_time(self.now()))
        meta.setdefault("deletionGracePeriodSeconds", 0)
        if finalizers:
            meta["finalizers"] = finalizers
        status = {**(obj.get("status") or {}), "phase": "Terminating"}
        return self._commit(rt, current, {**obj, "metadata": meta, "status": status}, dry_run)


def _check_preconditions(rt: ResourceType, current: Stored, options: Obj) -> None:
    preconditions = options.get("preconditions") or {}
    meta = current.obj["metadata"]
    want_uid = preconditions.get("uid")
    if want_uid and want_uid != meta.get("uid"):
        text = (
            f"the UID in the precondition ({want_uid}) does not match the UID in record ({meta.get('uid')}). "
            "The object might have been deleted and then recreated"
        )
        raise errors.conflict(rt.group, rt.resource, meta["name"], text)
    want_rv = preconditions.get("resourceVersion")
    if want_rv and str(want_rv) != str(current.rv):
        text = (
            f"the ResourceVersion in the precondition ({want_rv}) does not match the ResourceVersion "
            "in record "
            f"({current.rv}). The object might have been modified"
        )
        raise errors.conflict(rt.group, rt.resource, meta["name"], text)


def _propagation_finalizers(options: Obj, finalizers: list[str]) -> list[str]:
    policy = options.get("propagationPolicy")
    if policy is None and options.get("orphanDependents") is True:
        policy = "Orphan"
    result = list(finalizers)
    wanted = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}.get(str(policy))
    if wanted and wanted not in result:
        result.append(wanted)
    return result


def _grace_for(rt: ResourceType, obj: Obj, options: Obj) -> int:
    graceful = rt.strategy.graceful_delete
    if graceful is None:
        return 0
    grace = graceful(obj, options)
    return max(0, int(grace or 0))
