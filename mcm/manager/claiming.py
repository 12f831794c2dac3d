"""Claiming: which Machines a MachineSet owns, which MachineSets a MachineDeployment owns
(upstream v0.47.0 ``pkg/controller/controller_ref_manager.go``, the port of Kubernetes'
``ControllerRefManager``).

For each candidate:

- controlled by someone else: ignored;
- controlled by the owner: claimed while the selector matches, else released (unless the owner
  is being deleted); a release of an object that is gone or invalid counts as done;
- an orphan: adopted when the owner is not being deleted, the selector matches and the object
  is not being deleted. Before the first adoption of a pass the owner is read again from the
  API server: a different UID (``original ns/name Kind gone: got uid …, wanted …``) or a
  deletion in progress (``ns/name has just been deleted at …``) stops every adoption.

Adoption and release are JSON merge patches of ``metadata.ownerReferences`` like upstream's,
with two fixes: the patch carries the *whole* list (other owners' references kept; upstream's
release put a strategic-merge ``$patch: delete`` into a merge patch, which replaced the list
with that one entry, and its adoption replaced the list too), and it carries the object's
``resourceVersion`` and ``uid``, so a list changed by another writer in between is refused
with a conflict instead of overwritten. A conflict ends the claim at once (the caller looks again
shortly); other errors but NotFound are collected and raised together after every candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import structlog

from mcm.manager import constants as k
from mcm.manager.owners import controller_of, controller_ref, matches, owner_references
from mcm.runtime import labels
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, is_conflict, is_invalid, is_not_found
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.errors import TransientError

__all__ = ["ClaimError", "Claimer", "adopt_patch", "release_patch"]

log = structlog.get_logger(__name__)


class ClaimError(TransientError):
    """Adopting or releasing failed for at least one object; the key is retried."""


def adopt_patch(obj: Mapping[str, Any], owner: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The merge patch that makes ``owner`` the controller of ``obj``, keeping other owners."""
    refs = [r for r in owner_references(obj) if r.get("uid") != o.meta(owner).get("uid")]
    refs.append(controller_ref(owner, kind))
    return _patch(obj, refs)


def release_patch(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that removes ``owner``'s reference from ``obj``, keeping the others."""
    refs = [r for r in owner_references(obj) if r.get("uid") != o.meta(owner).get("uid")]
    return _patch(obj, refs or None)


def _patch(obj: Mapping[str, Any], refs: list[dict[str, Any]] | None) -> dict[str, Any]:
    meta = o.meta(obj)
    return {
        "metadata": {
            "ownerReferences": refs,
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
    }


class Claimer:
    """Claims objects of one kind for one owner in one pass (see the module docstring).

    ``fresh_owner`` reads the owner from the API server (``None`` if it is gone); it is called
    at most once, before the first adoption.
    """

    def __init__(
        self,
        owner: Mapping[str, Any],
        owner_kind: str,
        selector: labels.Selector,
        client: RESTClient,
        fresh_owner: Callable[[], Mapping[str, Any] | None],
    ) -> None:
        self.owner = owner
        self.owner_kind = owner_kind
        self.selector = selector
        self.client = client
        self._fresh_owner = fresh_owner
        self._can_adopt: str | bool | None = False  # False: not checked yet; None: yes; str: why not

    def claim(self, candidates: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The claimed objects (adoptions applied); :class:`ClaimError` after trying all."""
        claimed: list[Mapping[str, Any]] = []
        errors: list[str] = []
        for obj in candidates:
            try:
                kept = self._claim_one(obj)
            except ApiError as err:
                if is_conflict(err):
                    raise
                errors.append(str(err))
                continue
            except ClaimError as err:
                errors.append(str(err))
                continue
            if kept is not None:
                claimed.append(kept)
        if errors:
            raise ClaimError("; ".join(errors))
        return claimed

    def _claim_one(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = controller_of(obj)
        owner_deleting = o.deletion_timestamp(self.owner) is not None
        if ref is not None:
            if ref.get("uid") != o.meta(self.owner).get("uid"):
                return None
            if matches(self.selector, obj):
                return obj
            if not owner_deleting:
                self._release(obj)
            return None
        if owner_deleting or not matches(self.selector, obj) or o.deletion_timestamp(obj):
            return None
        return self._adopt(obj)

    def _adopt(self, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
        reason = self._adoption_refused()
        if reason is not None:
            raise ClaimError(f"can't adopt {self.owner_kind} child {o.name_of(obj)}: {reason}")
        try:
            adopted = self.client.patch(
                o.name_of(obj), adopt_patch(obj, self.owner, self.owner_kind), namespace=o.namespace_of(obj)
            )
        except ApiError as err:
            if is_not_found(err):
                return None
            raise
        log.info("adopted", owner=o.name_of(self.owner), kind=self.owner_kind, object=o.name_of(obj))
        return adopted

    def _release(self, obj: Mapping[str, Any]) -> None:
        try:
            self.client.patch(o.name_of(obj), release_patch(obj, self.owner), namespace=o.namespace_of(obj))
        except ApiError as err:
            if is_not_found(err) or is_invalid(err):
                return
            raise
        log.info("released", owner=o.name_of(self.owner), kind=self.owner_kind, object=o.name_of(obj))

    def _adoption_refused(self) -> str | None:
        """Why adoption is not allowed now (``None``: it is); asks the API server once."""
        if self._can_adopt is False:
            self._can_adopt = self._check_owner()
        return self._can_adopt if isinstance(self._can_adopt, str) else None

    def _check_owner(self) -> str | None:
        meta = o.meta(self.owner)
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        try:
            fresh = self._fresh_owner()
        except ApiError as err:
            return f"can't recheck DeletionTimestamp: {err}"
        if fresh is None:
            return f"can't recheck DeletionTimestamp: {self.owner_kind} {namespace}/{name} not found"
        if o.meta(fresh).get("uid") != meta.get("uid"):
            return k.ERR_OWNER_GONE.format(
                namespace=namespace,
                name=name,
                kind=self.owner_kind,
                got=o.meta(fresh).get("uid"),
                wanted=meta.get("uid"),
            )
        if o.deletion_timestamp(fresh):
            return k.ERR_OWNER_DELETED.format(
                namespace=namespace, name=name, when=o.deletion_timestamp(fresh)
            )
        return None
