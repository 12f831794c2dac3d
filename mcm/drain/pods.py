"""Which pods a drain removes (upstream's ``getPodsForDeletion``, from the pod cache as at HEAD) and
the PDB rules (``isMisconfiguredPdb``), both in upstream ``pkg/util/provider/drain/drain.go``.

Guarantees:

- :func:`select_pods` never raises on malformed pods. Mirror pods and DaemonSet pods are never
  drained; pods with ``emptyDir`` volumes and bare pods are drained with a warning unless the
  options forbid it, in which case the selection fails with upstream's fatal texts (groups in
  sorted order, so the message is deterministic). Finished and terminating pods are drained
  like the others, as upstream does.
- :func:`blocking_pdb` finds the policy/v1 PDB that selects a pod (the first by name when several
  do, with a warning); :func:`is_misconfigured` is the HEAD rule: observed generation current,
  expected pods > 0, healthy ≥ expected, no disruptions allowed and no disrupted pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from mcm.drain.types import DrainOptions
from mcm.runtime.cache import Lister, object_key
from mcm.runtime.labels import selector_from_label_selector
from mcm.runtime.objects import Obj

__all__ = [
    "MIRROR_ANNOTATION",
    "PodSelection",
    "blocking_pdb",
    "is_misconfigured",
    "select_pods",
]

log = structlog.get_logger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LOCAL_STORAGE_WARNING = "Deleting pods with local storage"
LOCAL_STORAGE_FATAL = "pods with local storage (use --delete-local-data to override)"
UNREPLICATED_WARNING = (
    "Deleting pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet"
)
UNREPLICATED_FATAL = (
    "pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet "
    "(use --force to override)"
)
DAEMONSET_WARNING = "Ignoring DaemonSet-managed pods"
DAEMONSET_FATAL = "DaemonSet-managed pods (use --ignore-daemonsets to ignore)"


@dataclass
class PodSelection:
    """The pods to drain, the ones skipped on purpose, and the filter messages by text."""

    pods: list[Obj] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    fatal: dict[str, list[str]] = field(default_factory=dict)

    def error(self) -> str | None:
        """Upstream's fatal error text, or None."""
        return _joined(self.fatal) or None

    def warning_lines(self) -> list[str]:
        return [f"{message}: {', '.join(names)}" for message, names in sorted(self.warnings.items())]


def _joined(groups: Mapping[str, list[str]]) -> str:
    return "; ".join(f"{message}: {', '.join(names)}" for message, names in sorted(groups.items()))


def select_pods(pods: Sequence[Obj], node: str, options: DrainOptions) -> PodSelection:
    """Apply upstream's four filters (mirror, local storage, unreplicated, DaemonSet) to ``node``'s pods."""
    selection = PodSelection()
    for pod in pods:
        if not isinstance(pod, Mapping) or not isinstance(pod.get("metadata"), Mapping):
            continue
        if (pod.get("spec") or {}).get("nodeName") != node:
            continue
        keep = True
        for check in (_mirror, _local_storage, _unreplicated, _daemonset):
            keep = check(pod, options, selection) and keep
        if keep:
            selection.pods.append(pod)
        else:
            selection.skipped.append(object_key(pod))
    return selection


def _note(groups: dict[str, list[str]], message: str, pod: Obj) -> None:
    groups.setdefault(message, []).append(str(pod["metadata"].get("name", "")))


def _mirror(pod: Obj, _options: DrainOptions, _selection: PodSelection) -> bool:
    return MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {})


def _local_storage(pod: Obj, options: DrainOptions, selection: PodSelection) -> bool:
    volumes = pod["spec"].get("volumes") or []  # select_pods only checks pods with a spec
    if not any(isinstance(v, Mapping) and v.get("emptyDir") is not None for v in volumes):
        return True
    if options.delete_local_data:
        _note(selection.warnings, LOCAL_STORAGE_WARNING, pod)
        return True
    _note(selection.fatal, LOCAL_STORAGE_FATAL, pod)
    return False


def _controller_ref(pod: Obj) -> Mapping[str, Any] | None:
    for ref in pod["metadata"].get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def _unreplicated(pod: Obj, options: DrainOptions, selection: PodSelection) -> bool:
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    if _controller_ref(pod) is not None:
        return True
    if options.ignore_pods_without_controllers:
        _note(selection.warnings, UNREPLICATED_WARNING, pod)
        return True
    _note(selection.fatal, UNREPLICATED_FATAL, pod)
    return False


def _daemonset(pod: Obj, options: DrainOptions, selection: PodSelection) -> bool:
    ref = _controller_ref(pod)
    if ref is None or ref.get("kind") != "DaemonSet":
        return True
    _note(
        selection.warnings if options.ignore_daemonsets else selection.fatal,
        DAEMONSET_WARNING if options.ignore_daemonsets else DAEMONSET_FATAL,
        pod,
    )
    return False


# --- PodDisruptionBudgets ------------------------------------------------------------------------


def blocking_pdb(pod: Obj, pdbs: Lister) -> Obj | None:
    """The PDB whose selector matches the pod (first by name if several), or None."""
    namespace = str(pod["metadata"].get("namespace", ""))
    labels = pod["metadata"].get("labels") or {}
    matching = sorted(
        (p for p in pdbs.namespaced(namespace).list() if _selects(p, labels)),
        key=lambda p: str(p["metadata"].get("name", "")),
    )
    if not matching:
        log.debug("no_pdb_for_pod", pod=object_key(pod))
        return None
    if len(matching) > 1:
        log.warning(
            "pod_matches_several_pdbs_first_chosen",
            pod=object_key(pod),
            pdb=matching[0]["metadata"].get("name"),
        )
    return matching[0]


def _selects(pdb: Obj, labels: Mapping[str, str]) -> bool:
    """Whether a policy/v1 PDB selects a pod: nil selects nothing, ``{}`` every pod of the namespace.

    A selector the parser rejects (bad operator, key or value) selects nothing, as the
    disruption controller ignores such a budget.
    """
    selector = (pdb.get("spec") or {}).get("selector")
    if not isinstance(selector, Mapping):
        return False
    try:
        return selector_from_label_selector(selector).matches(labels)
    except ValueError:
        return False


def is_misconfigured(pdb: Obj) -> bool:
    """The HEAD "misconfigured PDB" rule: it can never allow a voluntary eviction."""
    status = pdb.get("status") or {}
    generation = (pdb.get("metadata") or {}).get("generation")
    expected = int(status.get("expectedPods") or 0)
    return (
        generation == status.get("observedGeneration")
        and expected > 0
        and int(status.get("currentHealthy") or 0) >= expected
        and int(status.get("disruptionsAllowed") or 0) == 0
        and not status.get("disruptedPods")
    )
