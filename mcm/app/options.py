"""The options of the ``machine-controller`` command: one table of flags, one dataclass, Validate().

:class:`Options` is the table: each field is a flag (:func:`mcm.app.flags.flag`) with its exact
upstream name, pflag type, default and help (upstream v0.47.0
``pkg/util/provider/app/options/options.go``, ``MCServer.AddFlags``, plus HEAD's additions, klog's
flags and mcm's own); :data:`FLAGS`, the click command and ``docs/flags.md`` are generated from it.
The defaults of the flags the controller reads are :class:`~mcm.controller.ControllerOptions`'s
(upstream v0.47.0 except where mcm adopts HEAD: ``--machine-safety-orphan-vms-period`` 15m), so
each default is written once. Values are held parsed (durations in seconds). Flags accepted only
for compatibility say so in their help ("accepted, no effect") and are named by
:meth:`Options.without_effect` when set. :meth:`Options.validate` applies HEAD's ``Validate()``
rules plus the leader-election library's and klog's, one message per problem, each naming its
flag.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from mcm.app.flags import Flag, FlagType, flag, flags_of, set_without_effect
from mcm.controller.options import DEFAULT_NODE_CONDITIONS, ControllerOptions
from mcm.driver.endpoints import is_local_endpoint
from mcm.runtime.leaderelection import DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD

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

NO_TARGET = "none"
"""``--target-kubeconfig=none``: no target cluster (HEAD)."""
IN_CLUSTER_CONFIG = "inClusterConfig"

_C = ControllerOptions()
"""The controller's defaults: the flags that set its options default to them."""
_KLOG_HEADER = "mcm's log lines have no klog header"


@dataclass
class Options:
    """Parsed flag values (durations in seconds); each field is the flag of the same name."""

    # --- server ---
    port: int = flag(
        10259, "int32", "The port for running the server (metrics, healthz, readyz).", group="Server"
    )
    address: str = flag(
        "0.0.0.0", "ip", "The IP address to serve on (set to 0.0.0.0 for all interfaces).", group="Server"
    )
    profiling: bool = flag(
        True,
        "bool",
        "Enable profiling via web interface host:port/debug/pprof/.",
        group="Server",
        no_effect="Python serves no pprof",
    )
    contention_profiling: bool = flag(
        False,
        "bool",
        "Enable lock contention profiling, if profiling is enabled.",
        group="Server",
        no_effect="Python serves no pprof",
    )
    # --- clusters and clients ---
    target_kubeconfig: str = flag(
        "",
        "string",
        "Path to the kubeconfig of the target cluster (where the Nodes are). Empty: in-cluster config. "
        "'none': no target cluster (machines become Available right after VM creation).",
        group="Clusters",
    )
    control_kubeconfig: str = flag(
        "",
        "string",
        "Path to the kubeconfig of the control cluster (Machines, MachineClasses, Secrets). "
        "Empty: the target cluster's config; 'inClusterConfig': the pod's service account.",
        group="Clusters",
    )
    namespace: str = flag(
        _C.namespace,
        "string",
        "Namespace of the control cluster holding Machines, MachineClasses and Secrets, "
        "and of the leader-election Lease.",
        group="Clusters",
    )
    cloud_provider: str = flag(
        _C.cloud_provider,
        "string",
        "The provider for cloud services: the provider label of the mcm_cloud_api_* metrics of "
        "drivers that give none.",
        group="Clusters",
    )
    kube_api_content_type: str = flag(
        "application/vnd.kubernetes.protobuf",
        "string",
        "Content type of requests sent to the API servers.",
        group="Clusters",
        no_effect="requests are sent as JSON",
    )
    kube_api_qps: float = flag(
        20.0, "float32", "QPS to use while talking with the API servers.", group="Clusters"
    )
    kube_api_burst: int = flag(
        30, "int32", "Burst to use while talking with the API servers.", group="Clusters"
    )
    # --- controller ---
    concurrent_syncs: int = flag(50, "int32", "The number of workers started per work queue.")
    min_resync_period: float = flag(_C.min_resync_period, "duration", "The resync period of the informers.")
    controller_start_interval: float = flag(
        0.0,
        "duration",
        "Interval between starting controller managers.",
        no_effect="the controllers start together",
    )
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
    leader_elect: bool = flag(
        True,
        "bool",
        "Elect a leader before running the controllers (needed with several replicas).",
        group="Leader election",
    )
    leader_elect_lease_duration: float = flag(
        DEFAULT_LEASE_DURATION,
        "duration",
        "How long non-leaders wait after the last observed renewal before trying to take the lease.",
        group="Leader election",
    )
    leader_elect_renew_deadline: float = flag(
        DEFAULT_RENEW_DEADLINE,
        "duration",
        "How long the leader keeps retrying to renew before it gives up leading.",
        group="Leader election",
    )
    leader_elect_retry_period: float = flag(
        DEFAULT_RETRY_PERIOD,
        "duration",
        "Wait between two attempts to acquire or renew.",
        group="Leader election",
    )
    leader_elect_resource_lock: str = flag(
        "leases",
        "string",
        "The lock object kind; any other value than 'leases' is an error.",
        group="Leader election",
        no_effect="the lock is always a Lease",
    )
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
    shutdown_grace_period: float = flag(
        30.0, "duration", "How long running reconciles get after SIGTERM/SIGINT.", group="Process"
    )
    v: int = flag(0, "int32", "Log verbosity: 0-3 info, 4 and above debug.", group="Logging", shorthand="v")
    log_format: str = flag(
        "json", "string", "Log format: json (Kubernetes component style) or text.", group="Logging"
    )
    # --- klog's flags, which upstream manifests pass (see mcm.app.logs for what each does here) ---
    logtostderr: bool = flag(
        True,
        "bool",
        "Log to stderr. false: log to --log-file, else to machine-controller.log in --log-dir.",
        group="Logging",
    )
    alsologtostderr: bool = flag(
        False, "bool", "With --logtostderr=false, also write every line to stderr.", group="Logging"
    )
    log_dir: str = flag(
        "",
        "string",
        "With --logtostderr=false and no --log-file: directory of machine-controller.log "
        "(empty: the temporary directory, as klog).",
        group="Logging",
    )
    log_file: str = flag(
        "", "string", "With --logtostderr=false: the log file (appended to).", group="Logging"
    )
    log_file_max_size: int = flag(
        1800,
        "uint64",
        "With a log file: megabytes after which the file is started afresh, as klog does (0: no limit).",
        group="Logging",
    )
    stderrthreshold: int = flag(
        2,
        "severity",
        "With --logtostderr=false: lines at or above this severity (INFO, WARNING, ERROR, FATAL "
        "or 0-3) also go to stderr.",
        group="Logging",
    )
    vmodule: str = flag(
        "",
        "string",
        "klog's per-file verbosity (pattern=N,...).",
        group="Logging",
        no_effect="one verbosity (--v) applies to all code",
    )
    add_dir_header: bool = flag(False, "bool", "klog header option.", group="Logging", no_effect=_KLOG_HEADER)
    skip_headers: bool = flag(False, "bool", "klog header option.", group="Logging", no_effect=_KLOG_HEADER)
    skip_log_headers: bool = flag(
        False,
        "bool",
        "klog log-file header option.",
        group="Logging",
        no_effect="mcm writes no log file header",
    )
    one_output: bool = flag(
        False, "bool", "klog's per-severity files.", group="Logging", no_effect="mcm writes one log file"
    )
    log_backtrace_at: str = flag(
        "",
        "string",
        "klog's file:N stack-trace location.",
        group="Logging",
        no_effect="mcm emits no klog stack traces",
    )
    log_flush_frequency: float = flag(
        5.0,
        "duration",
        "Maximum time between log flushes.",
        group="Logging",
        no_effect="every log line is flushed at once",
    )

    @classmethod
    def defaults(cls, **changes: Any) -> Options:
        """The defaults, with ``changes`` (snake_case flag names) applied."""
        unknown = sorted(set(changes) - {f.field for f in FLAGS})
        if unknown:
            raise KeyError(f"no flag --{unknown[0].replace('_', '-')}")
        return cls(**changes)

    def as_dict(self) -> dict[str, Any]:
        """Field name → value."""
        return dataclasses.asdict(self)

    @property
    def no_target(self) -> bool:
        return self.target_kubeconfig == NO_TARGET

    def validate(self) -> list[str]:
        """HEAD ``Validate()`` plus the leader-election rules; one message per problem."""
        v = self.as_dict()
        errors: list[str] = []
        if not 1 <= v["port"] <= 65535:
            errors.append(f"--port must be between 1 and 65535, got {v['port']}")
        if v["concurrent_syncs"] <= 0:
            errors.append(f"--concurrent-syncs must be greater than 0, got {v['concurrent_syncs']}")
        if v["contention_profiling"] and not v["profiling"]:
            errors.append("--contention-profiling requires --profiling")
        if not re.fullmatch(r"[\w.+-]+/[\w.+-]+(\s*;.*)?", v["kube_api_content_type"]):
            errors.append(
                f"--kube-api-content-type is not a valid media type: {v['kube_api_content_type']!r}"
            )
        if v["kube_api_qps"] <= 0:
            errors.append(f"--kube-api-qps must be greater than 0, got {v['kube_api_qps']:g}")
        if v["kube_api_burst"] < 0:
            errors.append(f"--kube-api-burst must not be negative, got {v['kube_api_burst']}")
        if v["machine_max_evict_retries"] < 0:
            errors.append(
                f"--machine-max-evict-retries must not be negative, got {v['machine_max_evict_retries']}"
            )
        if v["max_failed_machines_per_deployment"] < 1:
            errors.append("--max-failed-machines-per-deployment must be at least 1")
        errors.extend(
            f"--{flag.name} must not be negative"
            for flag in FLAGS
            if flag.type == "duration" and v[flag.field] < 0
        )
        if (
            v["machine_safety_apiserver_statuscheck_period"]
            < v["machine_safety_apiserver_statuscheck_timeout"]
        ):
            errors.append(
                "--machine-safety-apiserver-statuscheck-period must not be shorter than "
                "--machine-safety-apiserver-statuscheck-timeout"
            )
        if self.no_target and not v["control_kubeconfig"]:
            errors.append("--control-kubeconfig is required with --target-kubeconfig=none")
        errors.extend(self._leader_election_errors())
        errors.extend(self._driver_errors())
        if v["log_format"] not in ("json", "text"):
            errors.append(f"--log-format must be json or text, got {v['log_format']!r}")
        if v["v"] < 0:
            errors.append(f"--v must not be negative, got {v['v']}")
        errors.extend(self._klog_errors())
        return errors

    def _klog_errors(self) -> list[str]:
        """klog's own checks of ``--vmodule`` and ``--log-backtrace-at``."""
        errors = []
        for item in filter(None, self.vmodule.split(",")):
            pattern, sep, level = item.partition("=")
            if not sep or not pattern or not re.fullmatch(r"\d+", level):
                errors.append(
                    f"--vmodule: syntax error: expect comma-separated list of filename=N, got {item!r}"
                )
                break
        if self.log_backtrace_at and not re.fullmatch(r"[^:]*\.[^:]*:[1-9]\d*", self.log_backtrace_at):
            errors.append(
                f"--log-backtrace-at: syntax error: expect file.go:234, got {self.log_backtrace_at!r}"
            )
        return errors

    def _leader_election_errors(self) -> list[str]:
        v = self.as_dict()
        if v["leader_elect_resource_lock"] != "leases":
            return [
                "--leader-elect-resource-lock: invalid lock-type "
                f"{v['leader_elect_resource_lock']!r} (use leases)"
            ]
        if not v["leader_elect"]:
            return []
        return leader_election_duration_errors(
            v["leader_elect_lease_duration"], v["leader_elect_renew_deadline"], v["leader_elect_retry_period"]
        )

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

    def without_effect(self) -> list[tuple[str, str]]:
        """Flags set to something other than their default that change nothing here, each as
        ``("--flag", reason)``; the command logs a warning for each."""
        changed = {flag.field for flag in FLAGS if getattr(self, flag.field) != flag.default}
        found = [(flag.field, reason) for flag, reason in set_without_effect(self, FLAGS)]
        if self.logtostderr:
            found += [
                (field, "--logtostderr is true (as in klog)") for field in _FILE_FLAGS if field in changed
            ]
        elif self.log_file and "log_dir" in changed:
            found.append(("log_dir", "--log-file is set"))
        if not self.logtostderr and self.alsologtostderr and "stderrthreshold" in changed:
            found.append(("stderrthreshold", "--alsologtostderr copies every line to stderr"))
        return [(f"--{field.replace('_', '-')}", reason) for field, reason in found]


FLAGS: tuple[Flag, ...] = flags_of(Options)
"""Every flag of the command, in :class:`Options`' order (the order of ``--help`` and the docs)."""
_FILE_FLAGS = ("alsologtostderr", "log_dir", "log_file", "log_file_max_size", "stderrthreshold")
"""klog flags that only matter with --logtostderr=false."""

_MODULE_ATTR = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[\w.-]+):\d{1,5}")
_GRPC_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix-abstract:", "vsock:")
"""Other gRPC target forms, passed through to the channel as they are."""


def leader_election_duration_errors(lease: float, renew: float, retry: float) -> list[str]:
    """The leader-election library's rules on the three ``--leader-elect-*`` durations (both
    commands use them)."""
    if min(lease, renew, retry) <= 0:
        return [
            "--leader-elect-lease-duration, --leader-elect-renew-deadline and "
            "--leader-elect-retry-period must be greater than 0"
        ]
    errors = []
    if lease <= renew:
        errors.append("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")
    if renew <= 1.2 * retry:
        errors.append("--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period")
    return errors


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
