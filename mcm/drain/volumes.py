"""Volumes of PV pods: which volumes to track, and VolumeAttachment events for waiting drains.

Guarantees:

- :func:`pod_volumes` returns, per pod, the ``(persistentVolumeName, volumeID)`` pairs the drain
  waits on (HEAD #937): PVC → PV from the caches, PVs shared by several pods dropped, one
  ``get_volume_ids`` call per PV. A missing PVC/PV, an unbound PVC, an empty driver answer
  (a provider-unrelated volume) or a driver error skips only that volume; nothing raises.
- :func:`is_attached` matches volume IDs exactly against ``node.status.volumesAttached`` names:
  the whole name, the part after ``^`` (CSI ``kubernetes.io/csi/<driver>^<id>``) or after the
  last ``/`` (in-tree plugins) — never as a regular expression, as upstream's ``waitForDetach``
  does (a false match there keeps a drain waiting).
- :class:`VolumeAttachmentHub` fans VolumeAttachment informer events out to the drains waiting
  on them (upstream's ``VolumeAttachmentHandler``, ``drain/volume_attachment.go``) without dropping
  events, under one lock, and ignores attachments without a PV name (inline volumes, on which
  upstream's ``dispatch`` panics) and malformed objects.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from mcm.driver import CallContext, Driver, GetVolumeIDsRequest
from mcm.runtime.cache import Lister, object_key
from mcm.runtime.client.errors import NotFound
from mcm.runtime.clock import Clock
from mcm.runtime.objects import Obj

__all__ = [
    "TrackedVolume",
    "VolumeAttachmentHub",
    "VolumeWatch",
    "attachment_pv_name",
    "is_attached",
    "pod_volumes",
    "uses_pvc",
]

log = structlog.get_logger(__name__)

DRIVER_CALL_TIMEOUT = 30.0
"""Bound of one ``get_volume_ids`` call (also bounded by the drain deadline)."""


@dataclass(frozen=True)
class TrackedVolume:
    """One volume of a PV pod the drain waits on."""

    pv_name: str
    volume_id: str


def uses_pvc(pod: Obj) -> bool:
    """Whether the pod mounts at least one PersistentVolumeClaim (the serial PV path)."""
    return bool(_claim_names(pod))


def _claim_names(pod: Obj) -> list[str]:
    names = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        if isinstance(claim, Mapping) and claim.get("claimName"):
            names.append(str(claim["claimName"]))
    return names


def _pv_names(pod: Obj, pvcs: Lister) -> list[str]:
    namespace = str(pod["metadata"].get("namespace", ""))
    names = []
    for claim in _claim_names(pod):
        try:
            pvc = pvcs.namespaced(namespace).get(claim)
        except NotFound:
            log.debug("drain_pvc_not_found", pvc=f"{namespace}/{claim}")
            continue
        volume_name = (pvc.get("spec") or {}).get("volumeName")
        if volume_name:
            names.append(str(volume_name))
    return names


def pod_volumes(
    pods: Sequence[Obj],
    pvcs: Lister,
    pvs: Lister,
    driver: Driver,
    *,
    clock: Clock,
    deadline: float,
) -> dict[str, list[TrackedVolume]]:
    """The tracked volumes of each pod, keyed ``<ns>/<name>`` (every pod has an entry)."""
    names = {object_key(pod): _pv_names(pod, pvcs) for pod in pods}
    counts = Counter(name for pv_names in names.values() for name in pv_names)
    shared = {name for name, count in counts.items() if count > 1}
    if shared:
        log.info("drain_shared_volumes_skipped", volumes=sorted(shared))
    result: dict[str, list[TrackedVolume]] = {}
    for key, pv_names in names.items():
        tracked = []
        for pv_name in pv_names:
            if pv_name in shared:
                continue
            volume_id = _volume_id(pv_name, key, pvs, driver, clock=clock, deadline=deadline)
            if volume_id:
                tracked.append(TrackedVolume(pv_name, volume_id))
        result[key] = tracked
    return result


def _volume_id(
    pv_name: str, pod_key: str, pvs: Lister, driver: Driver, *, clock: Clock, deadline: float
) -> str:
    try:
        pv = pvs.get(pv_name)
    except NotFound:
        log.debug("drain_pv_not_found", pv=pv_name, pod=pod_key)
        return ""
    ctx = CallContext(min(deadline, clock.monotonic() + DRIVER_CALL_TIMEOUT), clock)
    try:
        response = driver.get_volume_ids(ctx, GetVolumeIDsRequest(pv_specs=[pv.get("spec") or {}]))
    except Exception as err:
        log.error(
            "volume_id_lookup_failed_volume_skipped",
            pv=pv_name,
            pod=pod_key,
            error=str(err),
        )
        return ""
    ids = [i for i in (getattr(response, "volume_ids", None) or ()) if isinstance(i, str) and i]
    if not ids:
        log.debug("drain_volume_not_provider_related", pv=pv_name, pod=pod_key)
        return ""
    return ids[0]


def is_attached(volume_id: str, attached: Iterable[Any]) -> bool:
    """Whether ``volume_id`` names one of the node's ``status.volumesAttached`` entries."""
    for entry in attached:
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str):
            continue
        if name == volume_id or name.rsplit("^", 1)[-1] == volume_id or name.rsplit("/", 1)[-1] == volume_id:
            return True
    return False


def attachment_pv_name(attachment: Any) -> str | None:
    """``spec.source.persistentVolumeName`` of a VolumeAttachment, or None (inline or malformed)."""
    if not isinstance(attachment, Mapping):
        return None
    source = (attachment.get("spec") or {}).get("source")
    name = source.get("persistentVolumeName") if isinstance(source, Mapping) else None
    return name if isinstance(name, str) and name else None


STOP_POLL = 0.05
"""Real seconds between checks of the stop event while a watch event is awaited."""


class _StopAware(threading.Event):
    """An event that also reads as set once ``stop`` is set, so one wait covers both."""

    def __init__(self, stop: threading.Event | None) -> None:
        super().__init__()
        self._stop = stop

    def is_set(self) -> bool:
        return super().is_set() or (self._stop is not None and self._stop.is_set())

    def wait(self, timeout: float | None = None) -> bool:
        if self._stop is None:
            return super().wait(timeout)
        remaining = timeout
        while not self.is_set():
            if remaining is not None and remaining <= 0:
                break
            slice_ = STOP_POLL if remaining is None else min(STOP_POLL, remaining)
            super().wait(slice_)
            if remaining is not None:
                remaining -= slice_
        return self.is_set()


class VolumeWatch:
    """One waiting PV pod's view of VolumeAttachment events (registered before it is evicted).

    ``changed`` is set on every event about one of its PVs (so a detach wait re-checks at once);
    ``reattached`` once each of its PVs was seen attached to a node other than ``node``. Both
    also read as set once ``stop`` is, so waits on them end when the drain is stopped.
    """

    def __init__(self, node: str, pv_names: Iterable[str], stop: threading.Event | None = None) -> None:
        self.node = node
        self.pv_names = frozenset(pv_names)
        self._pending = set(self.pv_names)
        self.changed: threading.Event = _StopAware(stop)
        self.reattached: threading.Event = _StopAware(stop)
        if not self._pending:
            self.reattached.set()

    def offer(self, attachment: Obj, deleted: bool) -> None:
        pv_name = attachment_pv_name(attachment)
        if pv_name is None or pv_name not in self.pv_names:
            return
        self.changed.set()
        spec = attachment.get("spec") or {}
        attached = bool((attachment.get("status") or {}).get("attached"))
        if not deleted and attached and spec.get("nodeName") != self.node:
            self._pending.discard(pv_name)
            if not self._pending:
                self.reattached.set()


class VolumeAttachmentHub:
    """Fans VolumeAttachment informer events out to drains (upstream ``VolumeAttachmentHandler``).

    Register it (it is a ``ResourceEventHandler``) on the VolumeAttachment informer. Every watch
    hears every event; no event is dropped. The ``on_*`` methods run on the listener thread the
    informer starts for this handler, never on a drain's thread; they only set events under one
    short lock: they must not call an API, block or mutate the object.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: list[VolumeWatch] = []

    def watch(self, node: str, pv_names: Iterable[str], stop: threading.Event | None = None) -> VolumeWatch:
        """Start hearing events for ``pv_names``; call :meth:`unwatch` when done."""
        watch = VolumeWatch(node, pv_names, stop)
        with self._lock:
            self._watches.append(watch)
        return watch

    def unwatch(self, watch: VolumeWatch) -> None:
        with self._lock:
            if watch in self._watches:
                self._watches.remove(watch)

    @property
    def watch_count(self) -> int:
        with self._lock:
            return len(self._watches)

    def dispatch(self, attachment: Any, deleted: bool = False) -> None:
        """Hand one VolumeAttachment to every watch; anything without a PV name is ignored."""
        if attachment_pv_name(attachment) is None:
            return
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.offer(attachment, deleted)

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        """VolumeAttachment informer's listener thread: wake the watches of its PV; never blocks."""
        self.dispatch(obj)

    def on_update(self, old: Any, new: Any) -> None:
        """VolumeAttachment informer's listener thread: wake the watches of its PV; never blocks."""
        self.dispatch(new)

    def on_delete(self, obj: Any) -> None:
        """VolumeAttachment informer's listener thread (a tombstone is unwrapped); never blocks."""
        self.dispatch(getattr(obj, "obj", obj), deleted=True)
