"""The options of the ``machine-controller`` command: one table of flags, one dataclass, Validate().

:class:`Options` is the table: each field is a flag (:func:`mcm.app.flags.flag`) with its exact
upstream name, pflag type, default and help (upstream v0.47.0
``pkg/util/provider/app/options/options.go``, ``MCServer.AddFlags``, plus HEAD's additions, klog's
flags and mcm's own); the flags every command takes are :class:`mcm.app.common.CommonFlags`'s,
declared here with :func:`~mcm.app.common.common`. :data:`FLAGS`, the click command and
``docs/flags.md`` are generated from it.
The defaults of the flags the controller reads are :class:`~mcm.controller.ControllerOptions`'s
(upstream v0.47.0 except where mcm adopts HEAD: ``--machine-safety-orphan-vms-period`` 15m), so
each default is written once. Values are held parsed (durations in seconds). Flags accepted only
for compatibility say so in their help ("accepted, no effect") and are named by
:meth:`Options.without_effect` when set. :meth:`Options.validate` applies HEAD's ``Validate()``
rules plus the leader-election library's and klog's, one message per problem, each naming its
flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcm.app.common import (
    IN_CLUSTER_CONFIG,
    NO_TARGET,
    OptionsMixin,
    client_errors,
    common,
    concurrent_syncs_errors,
    leader_election_duration_errors,
    leader_election_errors,
    logging_errors,
    negative_duration_errors,
    port_errors,
    profiling_errors,
    target_errors,
)
from mcm.app.flags import Flag, FlagType, flag, flags_of
from mcm.controller.options import DEFAULT_NODE_CONDITIONS, ControllerOptions
from mcm.driver.endpoints import is_local_endpoint

__all__ = [
    "DEFAULT_NODE_CONDITIONS",
    "FLAGS",
    "IN_CLUSTER_CONFIG",
    "NO_TARGET",
    "Flag",
    "FlagType",
    "Options",
    "leader_election_duration_errors",
]

_C = ControllerOptions()
"""The controller's defaults: the flags that set its options default to them."""


@dataclass
class Options(OptionsMixin):
    """Parsed flag values (durations in seconds); each field is the flag of the same name."""

    # --- server ---
    port: int = common("port", default=10259)
    address: str = common("address")
    profiling: bool = common("profiling")
    contention_profiling: bool = common("contention_profiling")
    # --- clusters and clients ---
    target_kubeconfig: str = common(
        "target_kubeconfig",
        help="Path to the kubeconfig of the target cluster (where the Nodes are). Empty: in-cluster config. "
        "'none': no target cluster (machines become Available right after VM creation).",
    )
    control_kubeconfig: str = common(
        "control_kubeconfig",
        help="Path to the kubeconfig of the control cluster (Machines, MachineClasses, Secrets). "
        "Empty: the target cluster's config; 'inClusterConfig': the pod's service account.",
    )
    namespace: str = common(
        "namespace",
        default=_C.namespace,
        help="Namespace of the control cluster holding Machines, MachineClasses and Secrets, "
        "and of the leader-election Lease.",
    )
    cloud_provider: str = common(
        "cloud_provider",
        default=_C.cloud_provider,
        help="The provider for cloud services: the provider label of the mcm_cloud_api_* metrics of "
        "drivers that give none.",
    )
    kube_api_content_type: str = common("kube_api_content_type")
    kube_api_qps: float = common("kube_api_qps")
    kube_api_burst: int = common("kube_api_burst")
    # --- controller ---
    concurrent_syncs: int = common("concurrent_syncs", default=50)
    min_resync_period: float = common("min_resync_period", default=_C.min_resync_period)
    controller_start_interval: float = common("controller_start_interval")
    machine_creation_timeout: float = flag(
        _C.machine_creation_timeout, "duration", "Timeout after which a Pending machine is marked Failed."
    )
    machine_health_timeout: float = flag(
        _C.machine_health_timeout,
        "duration",
        "Timeout after which an Unknown (unhealthy) machine is marked Failed.",
    )
    machine_drain_timeout: float = flag(
        _C.machine_drain_timeout,
        "duration",
        "Timeout after which the drain of a deleted machine turns into a forced deletion.",
    )
    machine_max_evict_retries: int = flag(
        _C.machine_max_evict_retries, "int32", "Maximum eviction attempts per pod before it is force deleted."
    )
    machine_pv_detach_timeout: float = flag(
        _C.machine_pv_detach_timeout, "duration", "Timeout to wait for volumes to detach from a drained node."
    )
    machine_pv_reattach_timeout: float = flag(
        _C.machine_pv_reattach_timeout, "duration", "Timeout to wait for a volume to attach to another node."
    )
    machine_safety_apiserver_statuscheck_timeout: float = flag(
        _C.machine_safety_apiserver_statuscheck_timeout,
        "duration",
        "Time the API server may be unreachable before the controller freezes.",
    )
    machine_safety_orphan_vms_period: float = flag(
        _C.machine_safety_orphan_vms_period,
        "duration",
        "Period of the safety loop that deletes orphan VMs and tags unmanaged nodes.",
    )
    machine_safety_apiserver_statuscheck_period: float = flag(
        _C.machine_safety_apiserver_statuscheck_period,
        "duration",
        "Period of the API server reachability check.",
    )
    node_conditions: str = flag(
        _C.node_conditions,
        "string",
        "Comma-separated node condition types that make a machine unhealthy when their status is not False.",
    )
    bootstrap_token_auth_extra_groups: str = flag(
        _C.bootstrap_token_auth_extra_groups,
        "string",
        "Comma-separated groups written to the auth-extra-groups of bootstrap-token Secrets.",
    )
    machine_inplace_update_timeout: float = flag(
        20 * 60.0,
        "duration",
        "Timeout of an in-place update before the machine is marked Failed.",
        no_effect="mcm does not implement in-place updates",
    )
    machine_preserve_timeout: float = flag(
        96 * 3600.0,
        "duration",
        "How long a Failed machine annotated for preservation is kept.",
        no_effect="mcm does not implement machine preservation",
    )
    resource_exhausted_retry: float = flag(
        _C.resource_exhausted_retry,
        "duration",
        "Retry period after a ResourceExhausted create error (0: the long retry period, 10m).",
    )
    max_failed_machines_per_deployment: int = flag(
        _C.max_failed_machines_per_deployment,
        "int32",
        "How many machines of one MachineDeployment may be marked Failed at once (meltdown protection).",
    )
    driver_call_timeout: float = flag(_C.driver_call_timeout, "duration", "Deadline of one driver call.")
    # --- leader election ---
    leader_elect: bool = common("leader_elect")
    leader_elect_lease_duration: float = common("leader_elect_lease_duration")
    leader_elect_renew_deadline: float = common("leader_elect_renew_deadline")
    leader_elect_retry_period: float = common("leader_elect_retry_period")
    leader_elect_resource_lock: str = common("leader_elect_resource_lock")
    # --- driver ---
    driver: str = flag(
        "",
        "string",
        "In-process driver: 'local', 'fake' or MODULE:ATTR (a Driver, or a callable "
        "taking no arguments that returns one).",
        group="Driver",
    )
    driver_endpoint: str = flag(
        "", "string", "gRPC driver sidecar: unix:///path/to/socket or host:port.", group="Driver"
    )
    driver_ca_file: str = flag(
        "",
        "string",
        "PEM CA bundle the gRPC sidecar's certificate must be signed by: talk TLS to --driver-endpoint.",
        group="Driver",
    )
    driver_cert_file: str = flag(
        "",
        "string",
        "PEM client certificate presented to the gRPC sidecar (mutual TLS; with --driver-key-file).",
        group="Driver",
    )
    driver_key_file: str = flag("", "string", "PEM private key of --driver-cert-file.", group="Driver")
    driver_server_name: str = flag(
        "",
        "string",
        "Name the sidecar's certificate is checked against (default: the host of --driver-endpoint).",
        group="Driver",
    )
    driver_insecure: bool = flag(
        False,
        "bool",
        "Allow plaintext to a --driver-endpoint that is not a unix socket or loopback address "
        "(every call carries cloud credentials and userData).",
        group="Driver",
    )
    local_vm_namespace: str = flag(
        "mcm-local-vms",
        "string",
        "Control-cluster namespace of the local provider's VM records.",
        group="Driver",
    )
    # --- process ---
    shutdown_grace_period: float = common("shutdown_grace_period")
    v: int = common("v")
    log_format: str = common("log_format")
    # --- klog's flags, which upstream manifests pass (see mcm.app.logs for what each does here) ---
    logtostderr: bool = common(
        "logtostderr",
        help="Log to stderr. false: log to --log-file, else to machine-controller.log in --log-dir.",
    )
    alsologtostderr: bool = common("alsologtostderr")
    log_dir: str = common(
        "log_dir",
        help="With --logtostderr=false and no --log-file: directory of machine-controller.log "
        "(empty: the temporary directory, as klog).",
    )
    log_file: str = common("log_file")
    log_file_max_size: int = common("log_file_max_size")
    stderrthreshold: int = common("stderrthreshold")
    vmodule: str = common("vmodule")
    add_dir_header: bool = common("add_dir_header")
    skip_headers: bool = common("skip_headers")
    skip_log_headers: bool = common("skip_log_headers")
    one_output: bool = common("one_output")
    log_backtrace_at: str = common("log_backtrace_at")
    log_flush_frequency: float = common("log_flush_frequency")

    def validate(self) -> list[str]:
        """HEAD ``Validate()`` plus the leader-election rules; one message per problem."""
        errors = port_errors(self) + concurrent_syncs_errors(self) + profiling_errors(self)
        errors += client_errors(self)
        if self.machine_max_evict_retries < 0:
            errors.append(
                f"--machine-max-evict-retries must not be negative, got {self.machine_max_evict_retries}"
            )
        if self.max_failed_machines_per_deployment < 1:
            errors.append("--max-failed-machines-per-deployment must be at least 1")
        errors += negative_duration_errors(self, FLAGS)
        statuscheck = self.machine_safety_apiserver_statuscheck_period
        if statuscheck < self.machine_safety_apiserver_statuscheck_timeout:
            errors.append(
                "--machine-safety-apiserver-statuscheck-period must not be shorter than "
                "--machine-safety-apiserver-statuscheck-timeout"
            )
        errors += target_errors(self) + leader_election_errors(self) + self._driver_errors()
        return errors + logging_errors(self)

    def _driver_errors(self) -> list[str]:
        if self.driver and self.driver_endpoint:
            return ["--driver and --driver-endpoint exclude each other"]
        if self.driver and not _is_driver_spec(self.driver):
            return [f"--driver must be local, fake or MODULE:ATTR, got {self.driver!r}"]
        if self.driver_endpoint and not _is_endpoint(self.driver_endpoint):
            return [
                f"--driver-endpoint must be unix:///absolute/path or host:port, got {self.driver_endpoint!r}"
            ]
        return self._driver_tls_errors()

    def _driver_tls_errors(self) -> list[str]:
        """The driver link's TLS flags: complete, for an endpoint, and TLS or an explicit plaintext."""
        tls_flags = [
            f"--{name}"
            for name in ("driver-ca-file", "driver-cert-file", "driver-key-file", "driver-server-name")
            if getattr(self, name.replace("-", "_"))
        ]
        if tls_flags and not self.driver_endpoint:
            return [f"{', '.join(tls_flags)} need --driver-endpoint"]
        if bool(self.driver_cert_file) != bool(self.driver_key_file):
            return ["--driver-cert-file and --driver-key-file go together"]
        if tls_flags and self.driver_insecure:
            return [f"--driver-insecure and {', '.join(tls_flags)} exclude each other"]
        plaintext = not (self.driver_ca_file or self.driver_cert_file or self.driver_insecure)
        if self.driver_endpoint and plaintext and not is_local_endpoint(self.driver_endpoint):
            return [
                f"--driver-endpoint {self.driver_endpoint} is not a unix socket or loopback address: "
                "configure TLS (--driver-ca-file, and --driver-cert-file/--driver-key-file for mutual "
                "TLS) or allow plaintext explicitly with --driver-insecure"
            ]
        return []


FLAGS: tuple[Flag, ...] = flags_of(Options)
"""Every flag of the command, in :class:`Options`' order (the order of ``--help`` and the docs)."""
_MODULE_ATTR = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[\w.-]+):\d{1,5}")
_GRPC_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix-abstract:", "vsock:")
"""Other gRPC target forms, passed through to the channel as they are."""


def _is_driver_spec(spec: str) -> bool:
    """``local``, ``fake`` or ``module.path:attr`` (whether it imports is checked at start-up)."""
    return spec in ("local", "fake") or _MODULE_ATTR.fullmatch(spec) is not None


def _is_endpoint(endpoint: str) -> bool:
    """A gRPC target the sidecar client can dial: ``unix:`` with a path, ``host:port``, or another
    gRPC scheme."""
    if endpoint.startswith("unix://"):
        return endpoint[len("unix://") :].startswith("/")
    if endpoint.startswith("unix:"):
        return len(endpoint) > len("unix:")
    return _HOST_PORT.fullmatch(endpoint) is not None or endpoint.startswith(_GRPC_SCHEMES)
