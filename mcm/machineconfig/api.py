"""The ``machineconfiguration.openshift.io/v1`` API of the MachineConfigController: resources,
names, annotations, labels, condition types and event reasons, defined once.

The node annotations are those of the design (machine-config-operator's
``docs/MachineConfigController.md``: ``machine-config-daemon.v1.openshift.com/…``); the
role label, the generated-by annotation and the condition types are OpenShift's
machine-config-operator's. CRDs: ``mcm/machineconfig/crds/`` (:func:`mcm.packaged.machineconfig_crds`).
"""

from __future__ import annotations

from typing import Any, Final

from mcm.runtime.client import Object, Resource

GROUP: Final = "machineconfiguration.openshift.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

MACHINE_CONFIGS = Resource(GROUP, VERSION, "machineconfigs", "MachineConfig", namespaced=False)
MACHINE_POOLS = Resource(GROUP, VERSION, "machinepools", "MachinePool", namespaced=False)
CONTROLLER_CONFIGS = Resource(GROUP, VERSION, "controllerconfigs", "ControllerConfig", namespaced=False)
KUBELET_CONFIGS = Resource(GROUP, VERSION, "kubeletconfigs", "KubeletConfig", namespaced=False)
RESOURCES: Final = (MACHINE_CONFIGS, MACHINE_POOLS, CONTROLLER_CONFIGS, KUBELET_CONFIGS)

# --- names ---------------------------------------------------------------------------------------
CONTROLLER_CONFIG_NAME: Final = "machine-config-controller"
"""The one ControllerConfig the TemplateController reads."""
LEASE_NAME: Final = "machine-config-controller"
"""The leader-election Lease of the ``machine-config-controller`` command."""
ROLES: Final = ("master", "worker")
"""The roles the shipped templates exist for."""
RENDERED_PREFIX: Final = "rendered-"
KUBELET_CONF_PATH: Final = "/etc/kubernetes/kubelet.conf"
"""The file of a rendered config the KubeletConfigController reads and writes."""


def rendered_name(pool: str, digest: str) -> str:
    """``rendered-<pool>-<digest>``: the content-addressed name of a pool's rendered config."""
    return f"{RENDERED_PREFIX}{pool}-{digest}"


def kubelet_managed_name(pool: str) -> str:
    """``99-<pool>-kubelet-managed``: the MachineConfig a KubeletConfig becomes (the design's name)."""
    return f"99-{pool}-kubelet-managed"


# --- node annotations (the UpdateController ↔ daemon interface of the design) -------------------
CURRENT_CONFIG_ANNOTATION: Final = "machine-config-daemon.v1.openshift.com/currentConfig"
DESIRED_CONFIG_ANNOTATION: Final = "machine-config-daemon.v1.openshift.com/desiredConfig"
STATE_ANNOTATION: Final = "machine-config-daemon.v1.openshift.com/state"
REASON_ANNOTATION: Final = "machine-config-daemon.v1.openshift.com/reason"
"""Why the daemon is degraded (OpenShift's ``machineconfiguration.openshift.io/reason``, under the
design's prefix)."""
STATE_DONE: Final = "done"
STATE_WORKING: Final = "working"
STATE_DEGRADED: Final = "degraded"

# --- labels and annotations on MachineConfigs ---------------------------------------------------
ROLE_LABEL: Final = "machineconfiguration.openshift.io/role"
GENERATED_BY_ANNOTATION: Final = "machineconfiguration.openshift.io/generated-by-controller-version"
CONTROLLER_VERSION: Final = "mcm-0.1.0"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
KUBELET_CONFIG_FINALIZER: Final = "machineconfiguration.openshift.io/kubelet-managed"
"""Keeps a KubeletConfig until its contribution to the managed MachineConfigs is removed."""

# --- conditions ---------------------------------------------------------------------------------
POOL_UPDATED: Final = "Updated"
POOL_UPDATING: Final = "Updating"
POOL_DEGRADED: Final = "Degraded"
POOL_NODE_DEGRADED: Final = "NodeDegraded"
POOL_RENDER_DEGRADED: Final = "RenderDegraded"
POOL_NODES_CONFLICT: Final = "NodesInMultiplePools"
"""True while nodes the pool selects belong to no pool because several pools select them."""
TEMPLATE_RUNNING: Final = "TemplateControllerRunning"
TEMPLATE_COMPLETED: Final = "TemplateControllerCompleted"
TEMPLATE_FAILING: Final = "TemplateControllerFailing"
KUBELET_SUCCESS: Final = "Success"
KUBELET_FAILURE: Final = "Failure"


class Reason:
    """Event reasons (and condition reasons), one spelling each."""

    # RenderController
    RENDERED_CONFIG_GENERATED: Final = "RenderedConfigGenerated"
    RENDERED_CONFIG_RESTORED: Final = "RenderedConfigRestored"
    SELECTING_ALL: Final = "SelectingAll"
    INVALID_SELECTOR: Final = "InvalidSelector"
    INVALID_MACHINE_CONFIG: Final = "InvalidMachineConfig"
    NO_MACHINE_CONFIGS: Final = "NoMachineConfigs"
    RENDER_FAILED: Final = "RenderFailed"
    # UpdateController
    UPDATING: Final = "Updating"
    SET_DESIRED_CONFIG: Final = "SetDesiredConfig"
    COMPLETED: Final = "Completed"
    NODE_DEGRADED: Final = "NodeDegraded"
    INVALID_MAX_UNAVAILABLE: Final = "InvalidMaxUnavailable"
    NODE_IN_MULTIPLE_POOLS: Final = "NodeInMultiplePools"
    PAUSED: Final = "Paused"
    # TemplateController
    TEMPLATES_RENDERED: Final = "TemplatesRendered"
    TEMPLATE_FAILED: Final = "TemplateFailed"
    OVERWROTE_USER_CHANGE: Final = "OverwroteUserChange"
    IGNORED: Final = "Ignored"
    # KubeletConfigController
    KUBELET_CONFIG_APPLIED: Final = "KubeletConfigApplied"
    KUBELET_CONFIG_INVALID: Final = "KubeletConfigInvalid"
    KUBELET_CONFIG_FAILED: Final = "KubeletConfigFailed"
    KUBELET_CONFIG_REMOVED: Final = "KubeletConfigRemoved"


# --- component names (event sources and work-queue names; OpenShift's, but "update" for the
# controller the design calls the UpdateController and OpenShift the node controller) ----------
TEMPLATE_CONTROLLER: Final = "machineconfigcontroller-templatecontroller"
RENDER_CONTROLLER: Final = "machineconfigcontroller-rendercontroller"
UPDATE_CONTROLLER: Final = "machineconfigcontroller-updatecontroller"
KUBELET_CONFIG_CONTROLLER: Final = "machineconfigcontroller-kubeletconfigcontroller"


# --- small accessors on decoded objects ---------------------------------------------------------
def meta(obj: Object) -> dict[str, Any]:
    """``metadata``, or ``{}`` when missing or malformed."""
    value = obj.get("metadata") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def name_of(obj: Object) -> str:
    return str(meta(obj).get("name") or "")


def labels_of(obj: Object) -> dict[str, str]:
    value = meta(obj).get("labels")
    return value if isinstance(value, dict) else {}


def annotations_of(obj: Object) -> dict[str, str]:
    value = meta(obj).get("annotations")
    return value if isinstance(value, dict) else {}


def spec_of(obj: Object) -> dict[str, Any]:
    value = obj.get("spec") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def status_of(obj: Object) -> dict[str, Any]:
    value = obj.get("status") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def controller_ref(obj: Object) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true`` (``metav1.GetControllerOf``)."""
    refs = meta(obj).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    return next((r for r in refs if isinstance(r, dict) and r.get("controller") is True), None)


def owner_reference(owner: Object, kind: str, *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to ``owner`` (``metav1.NewControllerRef`` when ``controller``)."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name_of(owner),
        "uid": str(meta(owner).get("uid") or ""),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def is_controlled_by(obj: Object, owner: Object) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == meta(owner).get("uid")
