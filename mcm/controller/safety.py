"""The orphan-VM safety loop (queue ``machinesafetyorphanvms``): orphan VMs and unmanaged Nodes.

Upstream: v0.47.0 ``pkg/util/provider/machinecontroller/machine_safety.go``,
``reconcileClusterMachineSafetyOrphanVMs`` and ``AnnotateNodesUnmanagedByMCM``, with HEAD's changes
(15 min period, node finalizer and annotation removal) and without false deletions.
:class:`OrphanCollector` runs every ``--machine-safety-orphan-vms-period`` (default 15 min)
and whenever a machine's lastOperation turns ``OutOfRange`` or a machine is deleted (the
handlers add ``""``). Guarantees:

- **No false deletions.** Nothing is listed before the Machine cache has synced. A VM is
  deleted only when upstream's rule calls it an orphan (no Machine of that name, or a Machine
  whose ``spec.providerID`` differs and whose phase is neither empty nor ``CrashLoopBackOff``;
  unlike upstream, not a VM of a Machine being deleted that never got a provider ID: its
  deletion deletes the VM, and needs it to find the VM's Node)
  **twice**: once from the cache and once from a live GET of the Machine (so a lagging or
  empty cache can never cause a deletion; a failing GET keeps the VM). A VM whose Machine is
  inside the creation flow (:class:`~mcm.controller.context.CreationTracker`) is kept, and
  no creation flow of that Machine can start between the live GET and the deletion.
- **One bad class never blocks the others** (upstream's ``checkMachineClasses`` stops at the first
  failing class, and a Secret cache error panics in ``getSecretData``): a class that does not decode
  (or has fields of the wrong type), whose Secret lookup fails or whose ``ListMachines`` fails
  is skipped with a log line and a Warning Event on the class; the run goes on with the next
  class and comes back after LongRetry at the latest.
- A listed entry without a provider ID or machine name is logged and kept (never guessed at).
- Every orphan deletion is logged (class, provider ID, machine, reason), counted in
  ``mcm_machine_orphan_vms_deleted_total{machine_class, reason}`` and recorded as an Event on
  the MachineClass. A failed deletion is logged, recorded and retried in the next run.
- Unmanaged Nodes (HEAD): a Node no Machine claims and older than the creation timeout loses
  the node finalizer (merge patch) and then gets ``not-managed-by-mcm: "1"`` (Update); a Node
  claimed by exactly one Machine loses that annotation again. The first failed write ends the
  pass with MediumRetry. Skipped entirely without a target cluster.
- The loop ignores the frozen flag (as upstream) and never raises: the next run is always
  scheduled (the earliest of the period and any retry).
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.apis.machine import constants as c
from mcm.apis.machine.v1alpha1 import API_VERSION, Machine, MachineClass
from mcm.apis.machine.validation import format_error_list, type_errors
from mcm.controller.common import now
from mcm.controller.context import Deps
from mcm.driver import DeleteMachineRequest, ListMachinesRequest, MachineError
from mcm.runtime import objects as o
from mcm.runtime.client.errors import ApiError, ConnectionFailed, is_not_found
from mcm.runtime.record import EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING
from mcm.runtime.worker import Result

__all__ = [
    "REASON_MACHINE_NOT_FOUND",
    "REASON_PROVIDER_ID_MISMATCH",
    "ClassSkipped",
    "OrphanCollector",
    "class_secret_data",
    "orphan_reason",
    "update_node_annotations",
]

log = structlog.get_logger(__name__)

REASON_MACHINE_NOT_FOUND = "MachineNotFound"
"""Orphan reason: no Machine of the VM's machine name exists."""
REASON_PROVIDER_ID_MISMATCH = "ProviderIDMismatch"
"""Orphan reason: the Machine exists but is backed by another VM and is past creation."""

_REQUEST_ERRORS = (ApiError, ConnectionFailed)
"""What a request may raise: an API error or no answer at all."""
_STILL_CREATING = ("", c.PHASE_CRASH_LOOP_BACK_OFF)


class ClassSkipped(Exception):
    """A class could not be scanned in this run (message safe to log; never secret data)."""


class _Unreadable(Exception):
    """A Machine lookup failed with something other than NotFound: keep the VM."""


# --- pure rules -------------------------------------------------------------------------------


def orphan_reason(machine: Mapping[str, Any] | None, provider_id: str) -> str | None:
    """Upstream's classification of a listed VM: the orphan reason, or ``None`` to keep it."""
    if machine is None:
        return REASON_MACHINE_NOT_FOUND
    if o.text(machine, "spec", "providerID") == provider_id:
        return None
    if o.text(machine, "status", "currentStatus", "phase") in _STILL_CREATING:
        return None
    if not o.text(machine, "spec", "providerID") and o.meta(machine).get("deletionTimestamp"):
        return None  # its deletion deletes the VM, after finding the VM's Node by its provider ID
    return REASON_PROVIDER_ID_MISMATCH


def class_secret_data(deps: Deps, machine_class: MachineClass) -> dict[str, bytes]:
    """Merged data of ``secretRef`` then ``credentialsSecretRef`` (a missing Secret adds nothing).

    Raises :class:`ClassSkipped` when a lookup fails otherwise or the data is not base64.
    """
    merged: dict[str, bytes] = {}
    for ref in (machine_class.secret_ref, machine_class.credentials_secret_ref):
        if ref is None or not ref.name or (ref.namespace and ref.namespace != deps.namespace):
            continue
        try:
            secret = o.cached(deps.listers.secrets, ref.name)
        except ApiError as err:
            raise ClassSkipped(f"Secret {ref.name!r} could not be read: {err.message}") from err
        if secret is None:
            continue
        merged.update(_decoded(secret, ref.name))
    return merged


def _decoded(secret: Mapping[str, Any], name: str) -> dict[str, bytes]:
    data = secret.get("data")
    if not isinstance(data, Mapping):
        return {}
    try:
        return {str(k): base64.b64decode(v or "", validate=True) for k, v in data.items()}
    except (binascii.Error, TypeError, ValueError) as err:
        raise ClassSkipped(f"Secret {name!r} holds data that is not valid base64") from err


# --- the loop ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Deletion:
    provider_id: str
    machine_name: str
    reason: str


class OrphanCollector:
    """The ``machinesafetyorphanvms`` reconciler; ``machines_synced`` is the Machine informer's."""

    def __init__(self, deps: Deps, machines_synced: Callable[[], bool] = lambda: True) -> None:
        self.deps = deps
        self.machines_synced = machines_synced

    def reconcile(self, _key: str) -> Result:
        """One run: every class, then the Nodes; returns when to run next (never raises)."""
        period = self.deps.options.machine_safety_orphan_vms_period
        if not self.machines_synced():
            log.info("orphan_collection_waiting_for_cache")
            return Result.after(min(period, c.SHORT_RETRY))
        log.debug("orphan_collection_started")
        retries = [period, self.check_machine_classes(), self.annotate_unmanaged_nodes()]
        next_run = min(r for r in retries if r is not None)
        log.debug("orphan_collection_finished", next_run=next_run)
        return Result.after(next_run)

    # --- classes ------------------------------------------------------------------------------

    def check_machine_classes(self) -> float | None:
        """Scan every cached class; ``None`` when all were scanned, else LongRetry."""
        try:
            classes = sorted(self.deps.listers.classes.list(), key=o.name_of)
        except ApiError as err:
            log.error("orphan_collection_class_list_failed", error=err.message)
            return c.LONG_RETRY
        retry = None
        for raw in classes:
            if self.deps.stop.is_set():
                return None
            try:
                self.check_machine_class(raw)
            except ClassSkipped as err:
                retry = c.LONG_RETRY
                self._class_event(raw, EVENT_TYPE_WARNING, "OrphanCollectionFailed", str(err))
                log.error("orphan_collection_class_skipped", machine_class=o.name_of(raw), error=str(err))
        return retry

    def check_machine_class(self, raw: Mapping[str, Any]) -> list[str]:
        """Collect the orphans of one class; the provider IDs deleted. Raises :class:`ClassSkipped`."""
        try:
            machine_class = MachineClass.from_dict(raw)
        except Exception as err:  # bad input must not stop the other classes
            raise ClassSkipped(f"MachineClass does not decode: {type(err).__name__}") from err
        invalid = type_errors(machine_class)
        if invalid:
            raise ClassSkipped(f"MachineClass is invalid: {format_error_list(invalid)}")
        secret_data = class_secret_data(self.deps, machine_class)
        request = ListMachinesRequest(machine_class, secret_data)
        try:
            listed = self.deps.calls.call(
                "list_machines",
                lambda ctx: self.deps.driver.list_machines(ctx, request),
                provider=machine_class.provider,
            )
        except MachineError as err:
            raise ClassSkipped(f"Failed to LIST VMs at provider. Error: {err}") from err
        deleted: list[str] = []
        for provider_id, machine_name in _well_formed(o.name_of(raw), listed.machine_list):
            if self.collect_if_orphan(raw, machine_class, secret_data, provider_id, machine_name):
                deleted.append(provider_id)
        return deleted

    def collect_if_orphan(
        self,
        raw_class: Mapping[str, Any],
        machine_class: MachineClass,
        secret_data: Mapping[str, bytes],
        provider_id: str,
        machine_name: str,
    ) -> bool:
        """Delete the VM if it is a confirmed orphan; no creation flow of its machine runs meanwhile."""
        key = f"{self.deps.namespace}/{machine_name}"
        if not self._cache_says_orphan(provider_id, machine_name):
            if key in self.deps.creation:
                log.info("orphan_check_vm_in_creation", provider_id=provider_id, machine=machine_name)
            return False
        with self.deps.creation.hold_off(key) as clear:
            if not clear:
                log.info("orphan_check_vm_in_creation", provider_id=provider_id, machine=machine_name)
                return False
            reason = self.confirmed_orphan(provider_id, machine_name)
            if reason is None:
                return False
            orphan = _Deletion(provider_id, machine_name, reason)
            return self.delete_orphan(raw_class, machine_class, secret_data, orphan)

    def _cache_says_orphan(self, provider_id: str, machine_name: str) -> bool:
        """The cheap first look (cache only) that lets most VMs skip the creation hold-off."""
        try:
            return orphan_reason(self._machine(machine_name, live=False), provider_id) is not None
        except _Unreadable:
            return False

    def confirmed_orphan(self, provider_id: str, machine_name: str) -> str | None:
        """The orphan reason when both the cache and the API say orphan; ``None`` keeps the VM."""
        try:
            if orphan_reason(self._machine(machine_name, live=False), provider_id) is None:
                return None
            live = self._machine(machine_name, live=True)
        except _Unreadable:
            return None
        return orphan_reason(live, provider_id)

    def _machine(self, name: str, *, live: bool) -> Mapping[str, Any] | None:
        """The Machine (cache or API), ``None`` when not found; raises ``_Unreadable`` otherwise."""
        try:
            if live:
                found: Mapping[str, Any] = self.deps.writers.machines.get(name, namespace=self.deps.namespace)
            else:
                found = self.deps.listers.machines.get(name)
        except _REQUEST_ERRORS as err:
            if is_not_found(err):
                return None
            log.error("orphan_check_machine_unreadable", machine=name, live=live, error=str(err))
            raise _Unreadable from err
        return found

    def delete_orphan(
        self,
        raw_class: Mapping[str, Any],
        machine_class: MachineClass,
        secret_data: Mapping[str, bytes],
        orphan: _Deletion,
    ) -> bool:
        """``DeleteMachine`` with a synthetic Machine (name, class namespace, providerID)."""
        synthetic = Machine.from_dict(
            {
                "metadata": {"name": orphan.machine_name, "namespace": o.namespace_of(raw_class)},
                "spec": {"providerID": orphan.provider_id},
            }
        )
        request = DeleteMachineRequest(synthetic, machine_class, secret_data)
        class_name = o.name_of(raw_class)
        try:
            self.deps.calls.call(
                "delete_machine",
                lambda ctx: self.deps.driver.delete_machine(ctx, request),
                provider=machine_class.provider,
            )
        except MachineError as err:
            log.error(
                "orphan_vm_delete_failed",
                machine_class=class_name,
                provider_id=orphan.provider_id,
                machine=orphan.machine_name,
                error=str(err),
            )
            message = f"Deleting orphan VM {orphan.provider_id} failed, retried next run: {err}"
            self._class_event(raw_class, EVENT_TYPE_WARNING, "OrphanVMDeleteFailed", message)
            return False
        log.warning(
            "orphan_vm_deleted",
            machine_class=class_name,
            provider_id=orphan.provider_id,
            machine=orphan.machine_name,
            reason=orphan.reason,
        )
        self.deps.metrics.orphan_vms_deleted.labels(class_name, orphan.reason).inc()
        message = f"Orphan VM {orphan.provider_id} (machine {orphan.machine_name!r}) deleted: {orphan.reason}"
        self._class_event(raw_class, EVENT_TYPE_NORMAL, "OrphanVMDeleted", message)
        return True

    def _class_event(self, raw_class: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        if self.deps.recorder is None:
            return
        kind = c.MACHINE_CLASS_KIND
        reference = {"apiVersion": API_VERSION, "kind": kind, "metadata": o.meta(raw_class)}
        self.deps.recorder.event(reference, event_type, reason, message)

    # --- nodes --------------------------------------------------------------------------------

    def annotate_unmanaged_nodes(self) -> float | None:
        """HEAD ``AnnotateNodesUnmanagedByMCM``: ``None`` when every Node was handled, else the retry."""
        nodes = self.deps.listers.nodes
        if nodes is None or self.deps.writers.nodes is None:
            return None
        try:
            all_nodes = nodes.list()
            machines = list(self.deps.listers.machines.list())
        except ApiError as err:
            log.error("unmanaged_nodes_list_failed", error=err.message)
            return c.LONG_RETRY
        claimed = Counter(name for name in (o.label(m, c.LABEL_NODE) for m in machines) if name)
        for count, node in sorted(_needing_attention(all_nodes, claimed), key=_name_of_pair):
            if not self.tag_node(node, count):
                return c.MEDIUM_RETRY
        return None

    def tag_node(self, node: Mapping[str, Any], machine_count: int) -> bool:
        """Bring one Node's tagging in line with its ``machine_count``; ``False`` on a failed write."""
        name = o.name_of(node)
        annotated = o.annotation(node, c.ANNOTATION_NOT_MANAGED_BY_MCM) is not None
        if machine_count > 1:
            log.error("node_claimed_by_several_machines", node=name, machines=machine_count)
            return True
        if machine_count == 1:
            if not annotated:
                return True
            return self._write_annotations(node, remove=(c.ANNOTATION_NOT_MANAGED_BY_MCM,)) is not None
        if self._too_young(node):
            log.debug("node_too_young_to_tag", node=name)
            return True
        current = self._remove_node_finalizer(node)
        if current is None:
            return False
        if annotated:
            return True
        added = {c.ANNOTATION_NOT_MANAGED_BY_MCM: c.NOT_MANAGED_BY_MCM_VALUE}
        return self._write_annotations(current, add=added) is not None

    def _too_young(self, node: Mapping[str, Any]) -> bool:
        created = o.parse_time(o.meta(node).get("creationTimestamp"))
        if created is None:
            return False
        age = (now(self.deps) - created).total_seconds()
        return age < self.deps.options.machine_creation_timeout

    def _remove_node_finalizer(self, node: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The Node without the node finalizer (merge patch when needed); ``None`` on failure."""
        finalizers = o.finalizers(node)
        if c.NODE_FINALIZER not in finalizers:
            return node
        remaining = [f for f in finalizers if f != c.NODE_FINALIZER]
        writer = self.deps.writers.nodes
        assert writer is not None
        try:
            body = {
                "metadata": {"finalizers": remaining, "resourceVersion": o.meta(node).get("resourceVersion")}
            }
            patched: Mapping[str, Any] = writer.patch(o.name_of(node), body)
        except _REQUEST_ERRORS as err:
            log.error("unmanaged_node_finalizer_removal_failed", node=o.name_of(node), error=str(err))
            return None
        return patched

    def _write_annotations(
        self,
        node: Mapping[str, Any],
        *,
        add: Mapping[str, str] | None = None,
        remove: tuple[str, ...] = (),
    ) -> Mapping[str, Any] | None:
        writer = self.deps.writers.nodes
        assert writer is not None
        result = update_node_annotations(writer, node, add=add, remove=remove)
        if isinstance(result, Exception):
            log.error("unmanaged_node_annotation_failed", node=o.name_of(node), error=str(result))
            return None
        log.info(
            "unmanaged_node_annotation_updated", node=o.name_of(node), added=sorted(add or {}), removed=remove
        )
        return result


def update_node_annotations(
    writer: Any,
    node: Mapping[str, Any],
    *,
    add: Mapping[str, str] | None = None,
    remove: tuple[str, ...] = (),
) -> Mapping[str, Any] | ApiError | ConnectionFailed:
    """Update a copy of ``node`` with ``add`` merged into and ``remove`` taken out of its annotations.

    ``node`` itself is never changed (HEAD ``updateNodeWithAnnotations``, minus the mutation of
    the caller's object). Returns the stored Node, or the request's error unchanged.
    """
    new = o.clone(node)
    annotations = {k: v for k, v in o.annotations_of(node).items() if k not in remove}
    annotations.update(add or {})
    new.setdefault("metadata", {})["annotations"] = annotations
    try:
        stored: Mapping[str, Any] = writer.update(new)
    except _REQUEST_ERRORS as err:
        return err
    return stored


def _name_of_pair(pair: tuple[int, Mapping[str, Any]]) -> str:
    return o.name_of(pair[1])


def _needing_attention(
    nodes: Iterable[Mapping[str, Any]], claimed: Mapping[str, int]
) -> list[tuple[int, Mapping[str, Any]]]:
    """``(claim count, node)`` of every node :meth:`OrphanCollector.tag_node` may act or log on.

    A node claimed by exactly one machine and not annotated is left out: ``tag_node`` returns
    ``True`` for it without a write or a log line, so skipping it (and sorting only the rest by
    name) changes nothing but the cost of a pass over thousands of healthy nodes.
    """
    pairs: list[tuple[int, Mapping[str, Any]]] = []
    for node in nodes:
        count = claimed.get(o.name_of(node), 0)
        if count != 1 or o.annotation(node, c.ANNOTATION_NOT_MANAGED_BY_MCM) is not None:
            pairs.append((count, node))
    return pairs


def _well_formed(class_name: str, machine_list: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """The listed ``(providerID, machine name)`` pairs, sorted; malformed entries are logged, kept."""
    pairs: list[tuple[str, str]] = []
    for provider_id, machine_name in machine_list.items():
        if isinstance(provider_id, str) and provider_id and isinstance(machine_name, str) and machine_name:
            pairs.append((provider_id, machine_name))
        else:
            log.warning(
                "orphan_check_malformed_vm_entry",
                machine_class=class_name,
                provider_id=repr(provider_id)[:100],
                machine=repr(machine_name)[:100],
            )
    return sorted(pairs)
