"""Every string the manager writes or reads on MachineSets, MachineDeployments, Machines and
Nodes, with upstream v0.47.0's exact value (``pkg/controller/deployment_util.go``,
``machine_safety.go``, ``controller_utils.go``, ``machineset.go``; the Machine API strings are in
:mod:`mcm.apis.machine.constants`). Strings marked *mcm* are new: upstream has no equivalent.

Message templates use ``str.format`` placeholders named after what they hold.
"""

from __future__ import annotations

from typing import Final

# --- Annotations ---------------------------------------------------------------------------------

ANNOTATION_REVISION: Final = "deployment.kubernetes.io/revision"
ANNOTATION_REVISION_HISTORY: Final = "deployment.kubernetes.io/revision-history"
ANNOTATION_DESIRED_REPLICAS: Final = "deployment.kubernetes.io/desired-replicas"
ANNOTATION_MAX_REPLICAS: Final = "deployment.kubernetes.io/max-replicas"
ANNOTATION_PREFER_NO_SCHEDULE: Final = "deployment.machine.sapcloud.io/prefer-no-schedule"
"""On an old MachineSet whose nodes carry the PreferNoSchedule taint (also the taint key)."""
ANNOTATION_LAST_APPLIED_CONFIGURATION: Final = "kubectl.kubernetes.io/last-applied-configuration"
ANNOTATION_UNFREEZE: Final = "safety.machine.sapcloud.io/unfreeze"

ANNOTATIONS_NOT_COPIED: Final = frozenset(
    {
        ANNOTATION_LAST_APPLIED_CONFIGURATION,
        ANNOTATION_REVISION,
        ANNOTATION_REVISION_HISTORY,
        ANNOTATION_DESIRED_REPLICAS,
        ANNOTATION_MAX_REPLICAS,
        ANNOTATION_PREFER_NO_SCHEDULE,
        ANNOTATION_UNFREEZE,
    }
)
"""MachineDeployment annotations never copied to its MachineSets (``annotationsToSkip``)."""

# --- Labels, taints ------------------------------------------------------------------------------

LABEL_FREEZE: Final = "freeze"
FREEZE_VALUE: Final = "True"
TAINT_PREFER_NO_SCHEDULE_VALUE: Final = "True"
TAINT_EFFECT_PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
CA_SCALE_DOWN_DISABLED_VALUE: Final = "true"

# --- Owner references ----------------------------------------------------------------------------

API_VERSION: Final = "machine.sapcloud.io/v1alpha1"
KIND_MACHINE_SET: Final = "MachineSet"
KIND_MACHINE_DEPLOYMENT: Final = "MachineDeployment"

# --- Strategy --------------------------------------------------------------------------------------

STRATEGY_ROLLING_UPDATE: Final = "RollingUpdate"
STRATEGY_RECREATE: Final = "Recreate"
STRATEGY_IN_PLACE_UPDATE: Final = "InPlaceUpdate"

# --- Conditions ------------------------------------------------------------------------------------

TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"

CONDITION_REPLICA_FAILURE: Final = "ReplicaFailure"
CONDITION_FROZEN: Final = "Frozen"
CONDITION_AVAILABLE: Final = "Available"
CONDITION_PROGRESSING: Final = "Progressing"

REASON_FAILED_CREATE: Final = "FailedCreate"
REASON_FAILED_DELETE: Final = "FailedDelete"
REASON_OVERSHOOTING: Final = "OverShootingReplicaCount"
REASON_STATE_SYNC: Final = "MachineDeploymentStateSync"
REASON_MACHINE_SET_UPDATED: Final = "MachineSetUpdated"
REASON_FAILED_MS_CREATE: Final = "MachineSetCreateError"
REASON_NEW_MS_CREATED: Final = "NewMachineSetCreated"
REASON_FOUND_NEW_MS: Final = "FoundNewMachineSet"
REASON_NEW_MS_AVAILABLE: Final = "NewMachineSetAvailable"
REASON_TIMED_OUT: Final = "ProgressDeadlineExceeded"
REASON_PAUSED: Final = "DeploymentPaused"
REASON_RESUMED: Final = "DeploymentResumed"
REASON_MIN_AVAILABLE: Final = "MinimumReplicasAvailable"
REASON_MIN_UNAVAILABLE: Final = "MinimumReplicasUnavailable"
REASON_INVALID_SPEC: Final = "InvalidSpec"
"""*mcm*: the spec fails validation (upstream only logs it)."""

MSG_PAUSED: Final = "Deployment is paused"
MSG_RESUMED: Final = "Deployment is resumed"
MSG_FOUND_NEW_MS: Final = 'Found new machine set "{name}"'
MSG_NEW_MS_CREATED: Final = 'Created new machine set "{name}"'
MSG_FAILED_MS_CREATE: Final = 'Failed to create new machine set "{name}": {err}'
MSG_MS_AVAILABLE: Final = 'MachineSet "{name}" has successfully progressed.'
MSG_MD_AVAILABLE: Final = 'Machine Deployment "{name}" has successfully progressed.'
MSG_MS_PROGRESSING: Final = 'MachineSet "{name}" is progressing.'
MSG_MD_PROGRESSING: Final = 'Machine Deployment "{name}" is progressing.'
MSG_MS_TIMED_OUT: Final = 'MachineSet "{name}" has timed out progressing.'
MSG_MD_TIMED_OUT: Final = 'Machine Deployment "{name}" has timed out progressing.'
MSG_MIN_AVAILABLE: Final = "Deployment has minimum availability."
MSG_MIN_UNAVAILABLE: Final = "Deployment does not have minimum availability."
MSG_OVERSHOOTING: Final = (
    "The number of machines backing MachineSet: {name} is {count} >= {limit} which is the Max-ScaleUp-Limit"
)
MSG_STATE_SYNC: Final = (
    "MachineDeployment State was inconsistent, hence safety controller has fixed this and frozen it"
)
MSG_INVALID_SPEC: Final = "Validation of {kind} failed: {errors}"
"""*mcm*: the InvalidSpec condition and Event message."""

# --- Events ------------------------------------------------------------------------------------------

EVENT_NORMAL: Final = "Normal"
EVENT_WARNING: Final = "Warning"

EVENT_FAILED_CREATE: Final = "FailedCreate"
EVENT_SUCCESSFUL_CREATE: Final = "SuccessfulCreate"
EVENT_FAILED_DELETE: Final = "FailedDelete"
EVENT_SUCCESSFUL_DELETE: Final = "SuccessfulDelete"
EVENT_SELECTING_ALL: Final = "SelectingAll"
EVENT_SCALING_MACHINE_SET: Final = "ScalingMachineSet"
EVENT_ROLLBACK_NOT_FOUND: Final = "DeploymentRollbackRevisionNotFound"
EVENT_ROLLBACK_UNCHANGED: Final = "DeploymentRollbackTemplateUnchanged"
EVENT_ROLLBACK_DONE: Final = "DeploymentRollback"
EVENT_FROZE: Final = "FrozeMachineSet"
EVENT_UNFROZE: Final = "UnfrozeMachineSet"
EVENT_INVALID_SPEC: Final = "InvalidSpec"
"""*mcm*."""

MSG_EVENT_FAILED_CREATE: Final = "Error creating: {err}"
MSG_EVENT_CREATED: Final = "Created Machine: {name}"
MSG_EVENT_FAILED_DELETE: Final = "Error deleting: {err}"
MSG_EVENT_DELETED: Final = "Deleted machine: {name}"
MSG_SELECTING_ALL: Final = "This deployment is selecting all machines. A non-empty selector is required."
MSG_SCALED_UP_NEW: Final = "Scaled up machine set {name} to {replicas}"
MSG_SCALED: Final = "Scaled {operation} machine set {name} to {replicas}"
MSG_ROLLBACK_NO_LAST: Final = "Unable to find last revision."
MSG_ROLLBACK_NOT_FOUND: Final = "Unable to find the revision to rollback to."
MSG_ROLLBACK_UNCHANGED: Final = (
    'The rollback revision contains the same template as current deployment "{name}"'
)
MSG_ROLLBACK_DONE: Final = 'Rolled back deployment "{name}" to revision {revision}'
MSG_FROZE: Final = "SafetyController: Froze MachineSet {name} due to replica overshooting"
MSG_UNFROZE: Final = "SafetyController: Unfroze MachineSet {name}"

# --- Machine status written when a MachineSet deletes a machine ----------------------------------

DESC_DELETING: Final = "Deleting machine from cloud provider"

# --- Errors (observable in status messages, Events and logs) -------------------------------------

ERR_NO_LABELS: Final = "unable to create machines, no labels"
ERR_DELETE: Final = "unable to delete machines: {err}"
ERR_UNEXPECTED_STRATEGY: Final = "unexpected deployment strategy type: {type}"
ERR_OWNER_GONE: Final = "original {namespace}/{name} {kind} gone: got uid {got}, wanted {wanted}"
ERR_OWNER_DELETED: Final = "{namespace}/{name} has just been deleted at {when}"
ERR_NODE_TEMPLATE: Final = 'error in updating nodeTemplateSpec to machine "{name}": {err}'
ERR_MACHINE_CONFIG: Final = 'error in updating MachineConfig to machine "{name}": {err}'
ERR_CLASS_KIND: Final = 'error in updating classKind to machine "{name}": {err}'

# --- Sizes and periods (upstream's constants) ---------------------------------------------------

BURST_REPLICAS: Final = 100
"""Creations and deletions per MachineSet pass."""
SLOW_START_INITIAL_BATCH_SIZE: Final = 1
EXPECTATIONS_TIMEOUT: Final = 300.0
"""Seconds after which unmet expectations no longer hold a MachineSet back."""
RESYNC_PERIOD: Final = 600.0
"""Both controllers look at every object again after 10 minutes."""
HASH_BACKFILL_POLL: Final = 1.0
"""Seconds between two looks at a MachineSet whose hash label is being back-filled."""
