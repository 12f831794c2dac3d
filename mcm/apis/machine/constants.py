"""Every observable string of the machine API, with its exact upstream value.

Users, providers, autoscalers and upstream MCM itself read and write these strings, so they must
match upstream byte for byte: phases, operation types and states,
condition types and reasons, label / annotation / finalizer / taint keys, and the
``status.lastOperation.description`` texts including the deletion-step markers. Values follow
upstream HEAD where mcm adopts HEAD behaviour (docs/controller.md), otherwise v0.47.0.

Description templates use ``str.format`` placeholders: ``{machine}`` machine name, ``{node}``
node name, ``{err}`` error text, ``{duration}`` a Go duration string (``20m0s``), ``{conditions}``
the rendered node conditions. Render with ``TEMPLATE.format(...)``.

Retry periods are seconds (``float``), ready for the work queue's ``add_after``.

A few texts changed between v0.47.0 and HEAD; those below marked *HEAD* are HEAD's
(``pkg/util/provider/machinecontroller/machine_util.go``).
"""

from __future__ import annotations

from typing import Final

# --- Retry periods (HEAD values, machineutils/utils.go) ---------------------------------------

SHORT_RETRY: Final = 5.0
"""ShortRetry: 5 s (15 s at v0.47.0)."""
MEDIUM_RETRY: Final = 180.0
"""MediumRetry: 3 min."""
LONG_RETRY: Final = 600.0
"""LongRetry: 10 min."""
CONFLICT_RETRY: Final = 0.2
"""ConflictRetry: 200 ms, after a write rejected with 409 Conflict."""

# --- Phases (status.currentStatus.phase) ------------------------------------------------------

PHASE_PENDING: Final = "Pending"
PHASE_AVAILABLE: Final = "Available"
PHASE_RUNNING: Final = "Running"
PHASE_TERMINATING: Final = "Terminating"
PHASE_UNKNOWN: Final = "Unknown"
PHASE_FAILED: Final = "Failed"
PHASE_CRASH_LOOP_BACK_OFF: Final = "CrashLoopBackOff"
PHASE_IN_PLACE_UPDATING: Final = "InPlaceUpdating"
PHASE_IN_PLACE_UPDATE_SUCCESSFUL: Final = "InPlaceUpdateSuccessful"
PHASE_IN_PLACE_UPDATE_FAILED: Final = "InPlaceUpdateFailed"
MACHINE_PHASES: Final = frozenset(
    {
        PHASE_PENDING,
        PHASE_AVAILABLE,
        PHASE_RUNNING,
        PHASE_TERMINATING,
        PHASE_UNKNOWN,
        PHASE_FAILED,
        PHASE_CRASH_LOOP_BACK_OFF,
        PHASE_IN_PLACE_UPDATING,
        PHASE_IN_PLACE_UPDATE_SUCCESSFUL,
        PHASE_IN_PLACE_UPDATE_FAILED,
    }
)
"""All phases; the empty phase of a brand-new Machine is not among them."""

# --- Operation states and types (status.lastOperation.state / .type) ---------------------------

STATE_PROCESSING: Final = "Processing"
STATE_FAILED: Final = "Failed"
STATE_SUCCESSFUL: Final = "Successful"
MACHINE_STATES: Final = frozenset({STATE_PROCESSING, STATE_FAILED, STATE_SUCCESSFUL})

OPERATION_CREATE: Final = "Create"
OPERATION_UPDATE: Final = "Update"
OPERATION_HEALTH_CHECK: Final = "HealthCheck"
OPERATION_DELETE: Final = "Delete"
OPERATION_IN_PLACE_UPDATE: Final = "InPlaceUpdate"
OPERATION_DRAIN_NODE: Final = "DrainNode"
MACHINE_OPERATION_TYPES: Final = frozenset(
    {
        OPERATION_CREATE,
        OPERATION_UPDATE,
        OPERATION_HEALTH_CHECK,
        OPERATION_DELETE,
        OPERATION_IN_PLACE_UPDATE,
        OPERATION_DRAIN_NODE,
    }
)

# --- Condition statuses, types and reasons ---------------------------------------------------

CONDITION_TRUE: Final = "True"
CONDITION_FALSE: Final = "False"
CONDITION_UNKNOWN: Final = "Unknown"

NODE_TERMINATION_CONDITION: Final = "Terminating"
"""Node condition (status ``True``) set when draining starts."""
NODE_UNHEALTHY_REASON: Final = "Unhealthy"
"""Reason of the ``Terminating`` condition for ``Failed`` machines."""
NODE_UNHEALTHY_MESSAGE: Final = "Machine Controller is terminating failed machine"
NODE_SCALED_DOWN_REASON: Final = "ScaleDown"
"""Reason of the ``Terminating`` condition for every other machine."""
NODE_SCALED_DOWN_MESSAGE: Final = "Machine Controller is scaling down machine"
NODE_READY_CONDITION: Final = "Ready"
NODE_READONLY_FILESYSTEM_CONDITION: Final = "ReadonlyFilesystem"
"""Node condition that, like NotReady, forces the drain after 5 minutes."""

NODE_IN_PLACE_UPDATE_CONDITION: Final = "InPlaceUpdate"
REASON_CANDIDATE_FOR_UPDATE: Final = "CandidateForUpdate"
REASON_SELECTED_FOR_UPDATE: Final = "SelectedForUpdate"
REASON_READY_FOR_UPDATE: Final = "ReadyForUpdate"
REASON_DRAIN_SUCCESSFUL: Final = "DrainSuccessful"
REASON_UPDATE_SUCCESSFUL: Final = "UpdateSuccessful"
REASON_UPDATE_FAILED: Final = "UpdateFailed"

MACHINE_SET_REPLICA_FAILURE: Final = "ReplicaFailure"
MACHINE_SET_FROZEN: Final = "Frozen"
MACHINE_DEPLOYMENT_AVAILABLE: Final = "Available"
MACHINE_DEPLOYMENT_PROGRESSING: Final = "Progressing"
MACHINE_DEPLOYMENT_REPLICA_FAILURE: Final = "ReplicaFailure"
MACHINE_DEPLOYMENT_FROZEN: Final = "Frozen"

STRATEGY_RECREATE: Final = "Recreate"
STRATEGY_ROLLING_UPDATE: Final = "RollingUpdate"
STRATEGY_IN_PLACE_UPDATE: Final = "InPlaceUpdate"
ORCHESTRATION_AUTO: Final = "Auto"
ORCHESTRATION_MANUAL: Final = "Manual"

# --- Finalizers ---------------------------------------------------------------------------------

MCM_FINALIZER: Final = "machine.sapcloud.io/machine-controller-manager"
"""On Machines and MachineClasses."""
MC_FINALIZER: Final = "machine.sapcloud.io/machine-controller"
"""On Secrets referenced by MachineClasses."""
NODE_FINALIZER: Final = "node.machine.sapcloud.io/machine-controller"
"""On Nodes of non-deleting machines (HEAD node loop)."""

# --- Labels -------------------------------------------------------------------------------------

LABEL_NODE: Final = "node"
"""Machine label naming the backing Node (HEAD has no ``status.node``)."""
LABEL_DEPLOYMENT_NAME: Final = "name"
"""Machine label naming the owning MachineDeployment (the permit / failure-marking key)."""
LABEL_FORCE_DELETION: Final = "force-deletion"
"""Machine label; a true boolean value (``true``, ``True``, ``1``, ``t`` ...) forces the drain."""
LABEL_FORCE_DRAIN: Final = "force-drain"
"""Machine label forcing the drain of a preserved node."""
LABEL_MACHINE_TEMPLATE_HASH: Final = "machine-template-hash"
"""Unique label a MachineDeployment adds to its sets and machines."""
LABEL_NODE_MACHINE_NAME: Final = "node.gardener.cloud/machine-name"
"""Node label holding the machine name (synced by the controller)."""
LABEL_SCALE_UP_DISABLED: Final = "node.machine.sapcloud.io/scale-up-disabled"
LABEL_CANDIDATE_FOR_UPDATE: Final = "node.machine.sapcloud.io/candidate-for-update"
LABEL_SELECTED_FOR_UPDATE: Final = "node.machine.sapcloud.io/selected-for-update"
LABEL_UPDATE_RESULT: Final = "node.machine.sapcloud.io/update-result"
UPDATE_RESULT_SUCCESSFUL: Final = "successful"
UPDATE_RESULT_FAILED: Final = "failed"
LABEL_TOPOLOGY_ZONE: Final = "topology.kubernetes.io/zone"
"""Node-template label read for the ``zone`` metric label."""

# --- Annotations --------------------------------------------------------------------------------

ANNOTATION_MACHINE_PRIORITY: Final = "machinepriority.machine.sapcloud.io"
"""Machine deletion priority for scale-down; the controller sets it when absent."""
DEFAULT_MACHINE_PRIORITY: Final = "3"
ANNOTATION_LAST_APPLIED_ALT: Final = "node.machine.sapcloud.io/last-applied-anno-labels-taints"
"""Node: JSON of the last applied node template (annotations, labels, taints)."""
ANNOTATION_LAST_APPLIED_VIRTUAL_CAPACITY: Final = "node.machine.sapcloud.io/last-applied-virtual-capacity"
ANNOTATION_NOT_MANAGED_BY_MCM: Final = "node.machine.sapcloud.io/not-managed-by-mcm"
"""Node: set (to ``"1"``) on nodes no machine backs; its presence makes the node loop skip them."""
NOT_MANAGED_BY_MCM_VALUE: Final = "1"
ANNOTATION_TRIGGER_DELETION_BY_MCM: Final = "node.machine.sapcloud.io/trigger-deletion-by-mcm"
"""MachineDeployment (HEAD; was a Node annotation at v0.47.0)."""
ANNOTATION_UNFREEZE: Final = "safety.machine.sapcloud.io/unfreeze"
ANNOTATION_MIGRATED_MACHINE_CLASS: Final = "machine.sapcloud.io/migrated"
"""Legacy provider class, value ``machine-controller-<Kind>`` (v0.47.0 only)."""
ANNOTATION_CLASS: Final = "machine.sapcloud.io/class"
ANNOTATION_MACHINE_ID: Final = "machine.sapcloud.io/id"
ANNOTATION_MARKED_FOR_DELETION_TIME: Final = "machine.sapcloud.io/marked-for-deletion-time"
ANNOTATION_LAST_REPLICA_CHANGE_BY_SCALER_TIME: Final = (
    "machine.sapcloud.io/last-deployment-replica-change-by-scaler-time"
)
ANNOTATION_UPDATE_FAILED_REASON: Final = "node.machine.sapcloud.io/update-failed-reason"
ANNOTATION_EFFECTIVE_CREATION_TIMEOUT: Final = "node.machine.sapcloud.io/effective-creation-timeout"
ANNOTATION_MACHINE_JOIN_DURATION: Final = "node.machine.sapcloud.io/machine-join-duration"
ANNOTATION_PRESERVE: Final = "node.machine.sapcloud.io/preserve"
"""Machine or Node; values below. The Node's value wins."""
PRESERVE_NOW: Final = "now"
PRESERVE_WHEN_FAILED: Final = "when-failed"
PRESERVE_AUTO_PRESERVED: Final = "auto-preserved"
PRESERVE_FALSE: Final = "false"
ANNOTATION_LAST_APPLIED_NODE_PRESERVE_VALUE: Final = (
    "node.machine.sapcloud.io/last-applied-node-preserve-value"
)
ANNOTATION_CA_SCALE_DOWN_DISABLED: Final = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
ANNOTATION_CA_SCALE_DOWN_DISABLED_BY_MCM: Final = (
    "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm"
)

# --- Taint keys ---------------------------------------------------------------------------------

TAINT_CRITICAL_COMPONENTS_NOT_READY: Final = "node.gardener.cloud/critical-components-not-ready"
"""With effect ``NoSchedule`` it keeps a healthy Pending machine from becoming Running."""
TAINT_NODE_PRESERVED: Final = "node.machine.sapcloud.io/preserved"
TAINT_EFFECT_NO_SCHEDULE: Final = "NoSchedule"

# --- Class kinds, secrets, bootstrap ---------------------------------------------------------

MACHINE_CLASS_KIND: Final = "MachineClass"
"""The only class kind reconciled."""
USER_DATA_KEY: Final = "userData"
"""Secret data key the creation flow requires."""
BOOTSTRAP_TOKEN_PLACEHOLDER: Final = "<<BOOTSTRAP_TOKEN>>"
BOOTSTRAP_TOKEN_PLACEHOLDER_URL_ENCODED: Final = "%3C%3CBOOTSTRAP_TOKEN%3E%3E"
MACHINE_NAME_PLACEHOLDER: Final = "<<MACHINE_NAME>>"
MACHINE_NAME_PLACEHOLDER_URL_ENCODED: Final = "%3C%3CMACHINE_NAME%3E%3E"
BOOTSTRAP_TOKEN_SECRET_TYPE: Final = "bootstrap.kubernetes.io/token"
BOOTSTRAP_TOKEN_DESCRIPTION: Final = (
    'A bootstrap token for machine "{machine}" generated by MachineControllerManager.'
)

# --- Deletion-flow markers (substring-matched in lastOperation.description, in this order) ----

MARKER_GET_VM_STATUS: Final = "Set machine status to termination. Now, getting VM Status"
MARKER_INITIATE_DRAIN: Final = "Initiate node drain"
MARKER_DELETE_VOLUME_ATTACHMENTS: Final = "Delete Volume Attachments"
MARKER_INITIATE_VM_DELETION: Final = "Initiate VM deletion"
MARKER_INITIATE_NODE_DELETION: Final = "Initiate node object deletion"
MARKER_INITIATE_FINALIZER_REMOVAL: Final = "Initiate machine object finalizer removal"
MARKER_INSTANCE_INITIALIZATION: Final = "Initialize VM Instance"
MARKER_NODE_READY_FOR_UPDATE: Final = "Node drain successful. Node is ready for update"
DELETION_MARKERS: Final = (
    MARKER_GET_VM_STATUS,
    MARKER_INITIATE_DRAIN,
    MARKER_DELETE_VOLUME_ATTACHMENTS,
    MARKER_INITIATE_VM_DELETION,
    MARKER_INITIATE_NODE_DELETION,
    MARKER_INITIATE_FINALIZER_REMOVAL,
)
"""The deletion-step markers in dispatch order (first substring match wins)."""

# --- lastOperation descriptions: deletion flow ------------------------------------------------

DESC_VM_FOUND: Final = MARKER_INITIATE_DRAIN
DESC_VM_NOT_FOUND: Final = (
    "VM was not found at provider. Moving forward to node drain. " + MARKER_INITIATE_DRAIN
)
DESC_VM_UNINITIALIZED: Final = (
    "VM instance was not initialized. Moving forward to node drain. " + MARKER_INITIATE_DRAIN
)
DESC_GET_VM_RETRYABLE: Final = (
    "Error occurred with decoding machine error status while getting VM status, aborting with retry. "
    + MARKER_GET_VM_STATUS
)
DESC_GET_VM_FAILED: Final = (
    "Error occurred with decoding machine error status while getting VM status, aborting without retry. "
    "machine code: {err} " + MARKER_GET_VM_STATUS
)
DESC_GET_VM_UNDECODABLE: Final = (
    "Error occurred with decoding machine error status while getting VM status, aborting without retry. "
    "{err} " + MARKER_GET_VM_STATUS
)
DESC_DRAIN_SKIPPED_NO_NODE: Final = (
    "Skipping drain as nodeName is not a valid one for machine. " + MARKER_INITIATE_VM_DELETION
)
DESC_NO_TARGET_SKIP_DRAIN: Final = (
    "Running without target cluster, skipping node drain and volume attachment deletion. "
    + MARKER_INITIATE_VM_DELETION
)
"""HEAD (``updateMachineStatusAndNodeLabel``): the get-VM-status step without a target cluster."""
DESC_DRAIN_CONDITION_UPDATE_FAILED: Final = (
    "Drain failed due to failure in update of node conditions - {err}. Will retry in next sync. "
    + MARKER_INITIATE_DRAIN
)
DESC_DRAIN_SUCCESSFUL: Final = "Drain successful. " + MARKER_INITIATE_VM_DELETION
DESC_FORCE_DRAIN_SUCCESSFUL: Final = "Force Drain successful. " + MARKER_DELETE_VOLUME_ATTACHMENTS
DESC_DRAIN_FAILED_FORCED: Final = (
    "Drain failed due to - {err}. However, since it's a force deletion shall continue deletion of VM. "
    + MARKER_DELETE_VOLUME_ATTACHMENTS
)
"""HEAD: the v0.47.0 text with the HEAD next step (volume attachments after a forced drain)."""
DESC_DRAIN_FAILED: Final = "Drain failed due to - {err}. Will retry in next sync. " + MARKER_INITIATE_DRAIN
DESC_VM_DELETED: Final = "VM deletion was successful. " + MARKER_INITIATE_NODE_DELETION
DESC_VM_DELETE_NOT_FOUND: Final = "VM not found. Continuing deletion flow. " + MARKER_INITIATE_NODE_DELETION
DESC_VM_DELETE_RETRYABLE: Final = (
    "VM deletion failed due to - {err}. However, will re-try in the next resync. "
    + MARKER_INITIATE_VM_DELETION
)
DESC_VM_DELETE_FAILED: Final = (
    "VM deletion failed due to - {err}. Aborting operation. " + MARKER_INITIATE_VM_DELETION
)
DESC_VM_DELETE_UNDECODABLE: Final = (
    "Error occurred while decoding machine error: {err}. " + MARKER_INITIATE_VM_DELETION
)
DESC_NODE_DELETED: Final = (
    'Deletion of Node Object "{node}" is successful. ' + MARKER_INITIATE_FINALIZER_REMOVAL
)
DESC_NODE_NOT_FOUND: Final = (
    'No node object found for "{node}", continuing deletion flow. ' + MARKER_INITIATE_FINALIZER_REMOVAL
)
DESC_NODE_LABEL_MISSING: Final = (
    'Label "node" not present on machine "{machine}", continuing deletion flow. '
    + MARKER_INITIATE_FINALIZER_REMOVAL
)
DESC_DRAIN_SKIPPED_FOREIGN_NODE: Final = (
    'Skipping drain as node "{node}" has providerID "{node_provider_id}", not the machine\'s '
    '"{provider_id}". ' + MARKER_INITIATE_VM_DELETION
)
"""mcm: the ``node`` label names a Node of another VM; it is not cordoned or drained."""
DESC_NODE_DELETION_SKIPPED_FOREIGN_NODE: Final = (
    'Skipping deletion of Node object "{node}" as its providerID "{node_provider_id}" is not the '
    'machine\'s "{provider_id}", continuing deletion flow. ' + MARKER_INITIATE_FINALIZER_REMOVAL
)
"""mcm: the ``node`` label names a Node of another VM; it is not deleted."""
MSG_NODE_PROVIDER_ID_MISMATCH: Final = (
    'Node "{node}" has providerID "{node_provider_id}" but the machine has "{provider_id}": '
    "the Node is left alone ({left_alone})"
)
"""mcm: Warning Event when a machine's ``node`` label names a Node of another VM."""
DESC_NODE_DELETE_FAILED: Final = (
    'Deletion of Node Object "{node}" failed due to error: {err}. ' + MARKER_INITIATE_NODE_DELETION
)

# --- lastOperation descriptions: creation and health ------------------------------------------

DESC_CREATING: Final = "Creating machine on cloud provider"
DESC_CREATED_NO_TARGET: Final = "Created machine on cloud provider"
"""Without a target cluster the machine becomes ``Available`` with this description."""
DESC_PROVIDER_ERROR: Final = "Cloud provider message - {err}"
DESC_INITIALIZE_FAILED: Final = "Provider error: {err}. " + MARKER_INSTANCE_INITIALIZATION
DESC_OLD_NODE_OBJECT: Final = "VM using old node obj"
DESC_JOINED: Final = "Machine {machine} successfully joined the cluster"
DESC_JOINED_IN: Final = "Machine {machine} successfully joined the cluster in {duration}"
"""HEAD: the join description with the join duration appended."""
DESC_REJOINED: Final = "Machine {machine} successfully re-joined the cluster"
DESC_UNHEALTHY: Final = (
    "Machine {machine} is unhealthy - changing MachinePhase to Unknown. Node conditions: {conditions}"
)
"""HEAD: ``MachinePhase`` where v0.47.0 said ``MachineState``."""
DESC_NODE_MISSING: Final = (
    "Node object went missing. Machine {machine} is unhealthy - changing MachinePhase to Unknown"
)
"""HEAD: ``MachinePhase`` where v0.47.0 said ``MachineState``."""
DESC_CREATION_TIMEOUT: Final = "Machine {machine} failed to join the cluster in {duration} minutes."
DESC_HEALTH_TIMEOUT: Final = (
    "Machine {machine} health checks failing since last {duration} minutes. "
    "Updating machine phase to Failed. Node Conditions: {conditions}"
)
DESC_HEALTH_TIMEOUT_RESET: Final = "Machine Health Timeout was reset due to APIServer being unreachable"

# --- Error texts the controller reports (observable in logs and events) -----------------------

ERR_MISSING_FINALIZERS: Final = 'Machine "{machine}" is missing finalizers. Deletion cannot proceed'
ERR_IN_CREATION_FLOW: Final = 'machine "{machine}" is in creation flow. Deletion cannot proceed'
ERR_USER_DATA_MISSING: Final = 'Userdata field not found in secret for machine "{machine}"'
ERR_MACHINE_NAME_NOT_LABEL_VALUE: Final = (
    'Machine name "{machine}" cannot be used as a label value ({err}): the Node carries it in '
    'the label "node.gardener.cloud/machine-name" and drivers name Nodes after it. '
    "No VM is created; recreate the machine with a shorter name"
)
"""mcm: a machine whose name is not a valid label value is refused before CreateMachine."""
ERR_CLASS_WITHOUT_FINALIZER: Final = (
    "The machine class {machine_class} has no finalizers set. So not reconciling the machine."
)
ERR_UNDECODABLE_DELETION_STATE: Final = (
    'Unable to decode deletion flow state for machine "{machine}". Re-initiate termination'
)

# --- Node template validation messages (validation.py) ----------------------------------------

MSG_NODE_TEMPLATE_CAPACITY: Final = (
    "MachineClass NodeTemplate Capacity should mandatorily have CPU, GPU and Memory configured"
)
MSG_NODE_TEMPLATE_PLACEMENT: Final = (
    "MachineClass NodeTemplate Instance Type, region and zone cannot be empty"
)
MSG_CLASS_KIND_REQUIRED: Final = "Kind is required"
MSG_CLASS_NAME_REQUIRED: Final = "Name is required"

# --- Deletion-flow and class-loop messages (controller deletion.py / classes.py / machine.py) --

DESC_VA_NODE_MISSING: Final = (
    "Skipping deleteNodeVolAttachments due to - {err}. Moving to VM Deletion. " + MARKER_INITIATE_VM_DELETION
)
DESC_VA_DETACHED: Final = (
    "Node Volumes for node: {node} are already detached. Moving to VM Deletion. "
    + MARKER_INITIATE_VM_DELETION
)
DESC_VA_NONE_LIVE: Final = (
    "No Live VolumeAttachments for node: {node}. Moving to VM Deletion. " + MARKER_INITIATE_VM_DELETION
)
DESC_NODE_GET_FAILED: Final = (
    'Retrieval of Node Object "{node}" failed due to error: {err}, Retrying. ' + MARKER_INITIATE_NODE_DELETION
)
DESC_NODE_FINALIZER_FAILED: Final = (
    'Removal of finalizers from Node Object "{node}" failed due to error: {err}, Retrying. '
    + MARKER_INITIATE_NODE_DELETION
)
ERR_CLASS_IN_USE: Final = "Retry as machine objects are still referring the machineclass"
ERR_MACHINE_VALIDATION: Final = "Validation of Machine failed {err}"
