"""MachineClass and Secret finalizer loops (upstream v0.47.0 ``machineclass.go`` and ``secret.go``
in ``pkg/util/provider/machinecontroller``, with HEAD's changes).

MachineClass (queue ``machineclass``, key ``ns/name``): the MCM finalizer is on a class exactly
while some Machine references it; a deleting class that is still referenced is retried after
ShortRetry. A class in use gets its non-deleting machines enqueued when its finalizer was just
added (machines waiting for it go on at once) or when the class changed since the last time
(HEAD enqueues them on every reconcile; mcm skips unchanged classes, because every machine
event reconciles the class and N machines would cost N² machine passes). Success → LongRetry.

Secret (queue ``secret``, key ``ns/name``): the MC finalizer is on a Secret exactly while some
MachineClass references it by name (``secretRef`` or ``credentialsSecretRef``). Every Secret of
the namespace is looked at again every 10 minutes.

Finalizer writes GET the live object, add or remove the one finalizer on *its* list (another
controller's finalizers, added after the cache was filled, are kept) and PUT it with the live
``resourceVersion``; a conflict is retried with a fresh GET, a failed request (an error answer
or none) ends the pass with a ShortRetry, never an exception to the worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.controller.context import Deps
from mcm.controller.indexes import count_of_class, machines_of_class
from mcm.runtime import objects as o
from mcm.runtime.cache import object_key
from mcm.runtime.cache.keys import split_meta_namespace_key
from mcm.runtime.client.errors import RequestError, is_not_found
from mcm.runtime.client.rest import RESTClient
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.errors import TransientError
from mcm.runtime.retry import DEFAULT_RETRY, retry_on_conflict
from mcm.runtime.worker import DONE, Result

__all__ = [
    "SECRET_RESYNC",
    "reconcile_machine_class",
    "reconcile_machine_class_key",
    "reconcile_secret",
    "reconcile_secret_key",
    "update_finalizers",
]

log = structlog.get_logger(__name__)

SECRET_RESYNC = 600.0
"""Every Secret is reconciled again after 10 minutes (upstream)."""


class FinalizerUpdateError(TransientError):
    """A finalizer write failed (message safe to log)."""


def _with_finalizer_change(finalizers: list[str], add: str | None, remove: str | None) -> list[str] | None:
    """The sorted finalizer set after the change, or ``None`` when nothing changes."""
    if (add is None or add in finalizers) and (remove is None or remove not in finalizers):
        return None
    changed = set(finalizers) - ({remove} if remove else set())
    return sorted(changed | ({add} if add else set()))


def update_finalizers(
    client: RESTClient,
    namespace: str,
    name: str,
    *,
    add: str | None = None,
    remove: str | None = None,
    clock: Clock = REAL_CLOCK,
) -> None:
    """Add ``add`` to / remove ``remove`` from the live object's finalizers (see the module
    docstring); a missing object is fine. Each try reads the object live; a conflict is retried as
    client-go's ``retry.RetryOnConflict(retry.DefaultRetry, …)``. Raises
    :class:`FinalizerUpdateError`."""

    def write_once() -> None:
        live = client.get(name, namespace=namespace)
        finalizers = _with_finalizer_change(o.finalizers(live), add, remove)
        if finalizers is None:
            return
        new = o.clone(live)
        new.setdefault("metadata", {})["finalizers"] = finalizers
        client.update(new)

    try:
        retry_on_conflict(DEFAULT_RETRY, write_once, clock=clock)
    except RequestError as err:
        if not is_not_found(err):
            raise FinalizerUpdateError(err.message) from err


# --- MachineClass ---------------------------------------------------------------------------


def reconcile_machine_class_key(deps: Deps, key: str) -> Result:
    _, name = split_meta_namespace_key(key)
    machine_class = o.cached(deps.listers.classes, name)
    if machine_class is None:
        return DONE
    try:
        reconcile_machine_class(deps, machine_class)
    except (FinalizerUpdateError, ClassInUse) as err:
        log.info("machine_class_retry", key=key, reason=str(err))
        return Result.after(c.SHORT_RETRY)
    return Result.after(c.LONG_RETRY)


class ClassInUse(TransientError):
    """The class is being deleted while machines still reference it."""


def reconcile_machine_class(deps: Deps, machine_class: Mapping[str, Any]) -> None:
    """Upstream's decision table; raises :class:`ClassInUse` or :class:`FinalizerUpdateError` to retry."""
    name = o.name_of(machine_class)
    count = count_of_class(deps, name)  # the list only when its machines are enqueued
    has_finalizer = c.MCM_FINALIZER in o.finalizers(machine_class)
    if count and o.deletion_timestamp(machine_class):
        log.info("machine_class_still_referenced", machine_class=name, machines=count)
        raise ClassInUse(c.ERR_CLASS_IN_USE)
    if count:
        if not has_finalizer:
            update_finalizers(
                deps.writers.classes, deps.namespace, name, add=c.MCM_FINALIZER, clock=deps.clock
            )
        version = str(o.meta(machine_class).get("resourceVersion") or "")
        if not has_finalizer or deps.seen_class_versions.get(name) != version:
            deps.seen_class_versions[name] = version
            _enqueue_machines(deps, machines_of_class(deps, name))
        return
    if has_finalizer:
        update_finalizers(
            deps.writers.classes, deps.namespace, name, remove=c.MCM_FINALIZER, clock=deps.clock
        )


def _enqueue_machines(deps: Deps, machines: list[Mapping[str, Any]]) -> None:
    for machine in machines:
        if not o.deletion_timestamp(machine):
            deps.enqueue_machine(object_key(machine), 0.0)


# --- Secret ---------------------------------------------------------------------------------


def reconcile_secret_key(deps: Deps, key: str) -> Result:
    namespace, name = split_meta_namespace_key(key)
    if namespace != deps.namespace:
        return DONE
    secret = o.cached(deps.listers.secrets, name)
    if secret is None:
        return DONE
    try:
        reconcile_secret(deps, secret)
    except FinalizerUpdateError as err:
        log.warning("secret_finalizer_update_failed", key=key, error=str(err))
        return Result.after(c.SHORT_RETRY)
    return Result.after(SECRET_RESYNC)


def _referenced(deps: Deps, secret_name: str) -> bool:
    for machine_class in deps.listers.classes.list():
        for ref in ("secretRef", "credentialsSecretRef"):
            if o.text(machine_class, ref, "name") == secret_name:
                return True
    return False


def reconcile_secret(deps: Deps, secret: Mapping[str, Any]) -> None:
    """Add the MC finalizer while a class references the secret; remove it otherwise."""
    name = o.name_of(secret)
    current = o.finalizers(secret)
    if _referenced(deps, name):
        if c.MC_FINALIZER not in current:
            update_finalizers(
                deps.writers.secrets, deps.namespace, name, add=c.MC_FINALIZER, clock=deps.clock
            )
    elif c.MC_FINALIZER in current:
        update_finalizers(deps.writers.secrets, deps.namespace, name, remove=c.MC_FINALIZER, clock=deps.clock)
