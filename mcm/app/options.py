"""The options of the ``machine-controller`` command: one table of flags, one dataclass, Validate().

:data:`FLAGS` lists every flag with its exact upstream name, pflag type, default and help
(upstream v0.47.0 ``pkg/util/provider/app/options/options.go``, ``MCServer.AddFlags``, plus HEAD's
additions): the click command and ``docs/flags.md`` are generated from it. Defaults are upstream
v0.47.0 except where mcm adopts HEAD (``--machine-safety-orphan-vms-period`` 15m). :class:`Options`
holds the parsed values (durations in seconds; field = flag name in snake_case);
:meth:`Options.validate` applies HEAD's ``Validate()`` rules plus the leader-election library's
and returns one message per problem, each naming its flag.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Literal

from mcm.controller.options import DEFAULT_NODE_CONDITIONS
from mcm.drain import DEFAULT_MACHINE_DRAIN_TIMEOUT
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

FlagType = Literal["int32", "uint64", "float32", "string", "bool", "duration", "ip", "severity"]

NO_TARGET = "none"
"""``--target-kubeconfig=none``: no target cluster (HEAD)."""
IN_CLUSTER_CONFIG = "inClusterConfig"

_M = 60.0
_H = 3600.0


@dataclass(frozen=True)
class Flag:
    """One command-line flag."""

    name: str
    type: FlagType
    default: Any
    help: str
    group: str = "Controller"
    shorthand: str = ""
    """A one-letter alias (``-v``), as pflag gives the single-letter flags of Go's flag set."""

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")


FLAGS: tuple[Flag, ...] = (
    # --- server and clients ---
    Flag("port", "int32", 10259, "The port for running the server (metrics, healthz, readyz).", "Server"),
    Flag(
        "address",
        "ip",
        "0.0.0.0",
        "The IP address to serve on (set to 0.0.0.0 for all interfaces).",
        "Server",
    ),
    Flag(
        "profiling",
        "bool",
        True,
        "Enable profiling (accepted for compatibility; Python serves no pprof).",
        "Server",
    ),
    Flag(
        "contention-profiling",
        "bool",
        False,
        "Enable lock contention profiling, if profiling is enabled.",
        "Server",
    ),
    Flag(
        "target-kubeconfig",
        "string",
        "",
        "Path to the kubeconfig of the target cluster (where the Nodes are). Empty: in-cluster config. "
        "'none': no target cluster (machines become Available right after VM creation).",
        "Clusters",
    ),
    Flag(
        "control-kubeconfig",
        "string",
        "",
        "Path to the kubeconfig of the control cluster (Machines, MachineClasses, Secrets). "
        "Empty: the target cluster's config; 'inClusterConfig': the pod's service account.",
        "Clusters",
    ),
    Flag(
        "namespace",
        "string",
        "default",
        "Namespace of the control cluster holding Machines, MachineClasses and Secrets, "
        "and of the leader-election Lease.",
        "Clusters",
    ),
    Flag("cloud-provider", "string", "", "Cloud provider name (not used).", "Clusters"),
    Flag(
        "kube-api-content-type",
        "string",
        "application/vnd.kubernetes.protobuf",
        "Content type of requests sent to the API servers (not used: JSON is sent).",
        "Clusters",
    ),
    Flag("kube-api-qps", "float32", 20.0, "QPS to use while talking with the API servers.", "Clusters"),
    Flag("kube-api-burst", "int32", 30, "Burst to use while talking with the API servers.", "Clusters"),
    # --- controller ---
    Flag("concurrent-syncs", "int32", 50, "The number of workers started per work queue."),
    Flag("min-resync-period", "duration", 12 * _H, "The resync period of the informers."),
    Flag(
        "controller-start-interval",
        "duration",
        0.0,
        "Interval between starting controller managers (not used).",
    ),
    Flag(
        "machine-creation-timeout",
        "duration",
        20 * _M,
        "Timeout after which a Pending machine is marked Failed.",
    ),
    Flag(
        "machine-health-timeout",
        "duration",
        10 * _M,
        "Timeout after which an Unknown (unhealthy) machine is marked Failed.",
    ),
    Flag(
        "machine-drain-timeout",
        "duration",
        DEFAULT_MACHINE_DRAIN_TIMEOUT,
        "Timeout after which the drain of a deleted machine turns into a forced deletion.",
    ),
    Flag(
        "machine-max-evict-retries",
        "int32",
        360,
        "Maximum eviction attempts per pod before it is force deleted.",
    ),
    Flag(
        "machine-pv-detach-timeout",
        "duration",
        2 * _M,
        "Timeout to wait for volumes to detach from a drained node.",
    ),
    Flag(
        "machine-pv-reattach-timeout",
        "duration",
        90.0,
        "Timeout to wait for a volume to attach to another node.",
    ),
    Flag(
        "machine-safety-apiserver-statuscheck-timeout",
        "duration",
        30.0,
        "Time the API server may be unreachable before the controller freezes.",
    ),
    Flag(
        "machine-safety-orphan-vms-period",
        "duration",
        15 * _M,
        "Period of the safety loop that deletes orphan VMs and tags unmanaged nodes.",
    ),
    Flag(
        "machine-safety-apiserver-statuscheck-period",
        "duration",
        _M,
        "Period of the API server reachability check.",
    ),
    Flag(
        "node-conditions",
        "string",
        DEFAULT_NODE_CONDITIONS,
        "Comma-separated node condition types that make a machine unhealthy when their status is not False.",
    ),
    Flag(
        "bootstrap-token-auth-extra-groups",
        "string",
        "",
        "Comma-separated groups written to the auth-extra-groups of bootstrap-token Secrets.",
    ),
    Flag(
        "machine-inplace-update-timeout",
        "duration",
        20 * _M,
        "Timeout of an in-place update before the machine is marked Failed (accepted for "
        "compatibility; no effect: mcm does not implement in-place updates).",
    ),
    Flag(
        "machine-preserve-timeout",
        "duration",
        96 * _H,
        "How long a Failed machine annotated for preservation is kept (accepted for compatibility; "
        "no effect: mcm does not implement machine preservation).",
    ),
    Flag(
        "resource-exhausted-retry",
        "duration",
        10 * _M,
        "Retry period after a ResourceExhausted create error (0: the long retry period, 10m).",
    ),
    Flag(
        "max-failed-machines-per-deployment",
        "int32",
        1,
        "How many machines of one MachineDeployment may be marked Failed at once (meltdown protection).",
    ),
    Flag("driver-call-timeout", "duration", 5 * _M, "Deadline of one driver call."),
    # --- leader election ---
    Flag(
        "leader-elect",
        "bool",
        True,
        "Elect a leader before running the controllers (needed with several replicas).",
        "Leader election",
    ),
    Flag(
        "leader-elect-lease-duration",
        "duration",
        15.0,
        "How long non-leaders wait after the last observed renewal before trying to take the lease.",
        "Leader election",
    ),
    Flag(
        "leader-elect-renew-deadline",
        "duration",
        10.0,
        "How long the leader keeps retrying to renew before it gives up leading.",
        "Leader election",
    ),
    Flag(
        "leader-elect-retry-period",
        "duration",
        2.0,
        "Wait between two attempts to acquire or renew.",
        "Leader election",
    ),
    Flag(
        "leader-elect-resource-lock",
        "string",
        "leases",
        "The lock object kind (only 'leases' is supported).",
        "Leader election",
    ),
    # --- driver ---
    Flag(
        "driver",
        "string",
        "",
        "In-process driver: 'local', 'fake' or MODULE:ATTR (a Driver, or a callable "
        "taking no arguments that returns one).",
        "Driver",
    ),
    Flag(
        "driver-endpoint",
        "string",
        "",
        "gRPC driver sidecar: unix:///path/to/socket or host:port.",
        "Driver",
    ),
    Flag(
        "driver-ca-file",
        "string",
        "",
        "PEM CA bundle the gRPC sidecar's certificate must be signed by: talk TLS to --driver-endpoint.",
        "Driver",
    ),
    Flag(
        "driver-cert-file",
        "string",
        "",
        "PEM client certificate presented to the gRPC sidecar (mutual TLS; with --driver-key-file).",
        "Driver",
    ),
    Flag("driver-key-file", "string", "", "PEM private key of --driver-cert-file.", "Driver"),
    Flag(
        "driver-server-name",
        "string",
        "",
        "Name the sidecar's certificate is checked against (default: the host of --driver-endpoint).",
        "Driver",
    ),
    Flag(
        "driver-insecure",
        "bool",
        False,
        "Allow plaintext to a --driver-endpoint that is not a unix socket or loopback address "
        "(every call carries cloud credentials and userData).",
        "Driver",
    ),
    Flag(
        "local-vm-namespace",
        "string",
        "mcm-local-vms",
        "Control-cluster namespace of the local provider's VM records.",
        "Driver",
    ),
    # --- process ---
    Flag(
        "shutdown-grace-period",
        "duration",
        30.0,
        "How long running reconciles get after SIGTERM/SIGINT.",
        "Process",
    ),
    Flag("v", "int32", 0, "Log verbosity: 0-3 info, 4 and above debug.", "Logging", shorthand="v"),
    Flag("log-format", "string", "json", "Log format: json (Kubernetes component style) or text.", "Logging"),
    # --- klog's flags, which upstream manifests pass (see mcm.app.logs for what each does here) ---
    Flag(
        "logtostderr",
        "bool",
        True,
        "Log to stderr. false: log to --log-file, else to machine-controller.log in --log-dir.",
        "Logging",
    ),
    Flag(
        "alsologtostderr",
        "bool",
        False,
        "With --logtostderr=false, also write every line to stderr.",
        "Logging",
    ),
    Flag(
        "log-dir",
        "string",
        "",
        "With --logtostderr=false and no --log-file: directory of machine-controller.log "
        "(empty: the temporary directory, as klog).",
        "Logging",
    ),
    Flag("log-file", "string", "", "With --logtostderr=false: the log file (appended to).", "Logging"),
    Flag(
        "log-file-max-size",
        "uint64",
        1800,
        "With a log file: megabytes after which the file is started afresh, as klog does (0: no limit).",
        "Logging",
    ),
    Flag(
        "stderrthreshold",
        "severity",
        2,
        "With --logtostderr=false: lines at or above this severity (INFO, WARNING, ERROR, FATAL "
        "or 0-3) also go to stderr.",
        "Logging",
    ),
    Flag(
        "vmodule",
        "string",
        "",
        "klog's per-file verbosity (pattern=N,...): accepted, no effect (one --v for all).",
        "Logging",
    ),
    Flag(
        "add-dir-header",
        "bool",
        False,
        "klog header option: accepted, no effect (mcm's lines have no klog header).",
        "Logging",
    ),
    Flag(
        "skip-headers",
        "bool",
        False,
        "klog header option: accepted, no effect (mcm's lines have no klog header).",
        "Logging",
    ),
    Flag(
        "skip-log-headers",
        "bool",
        False,
        "klog log-file header option: accepted, no effect (mcm writes no file header).",
        "Logging",
    ),
    Flag(
        "one-output",
        "bool",
        False,
        "klog's per-severity files: accepted, no effect (mcm writes one log file).",
        "Logging",
    ),
    Flag(
        "log-backtrace-at",
        "string",
        "",
        "klog's file:N stack-trace location: accepted, no effect.",
        "Logging",
    ),
    Flag(
        "log-flush-frequency",
        "duration",
        5.0,
        "Maximum time between log flushes: accepted, no effect (every line is flushed).",
        "Logging",
    ),
)


_DEFAULTS: dict[str, Any] = {flag.field: flag.default for flag in FLAGS}


@dataclass
class Options:
    """Parsed flag values (durations in seconds); one field per flag of :data:`FLAGS`."""

    port: int = _DEFAULTS["port"]
    address: str = _DEFAULTS["address"]
    profiling: bool = _DEFAULTS["profiling"]
    contention_profiling: bool = _DEFAULTS["contention_profiling"]
    target_kubeconfig: str = _DEFAULTS["target_kubeconfig"]
    control_kubeconfig: str = _DEFAULTS["control_kubeconfig"]
    namespace: str = _DEFAULTS["namespace"]
    cloud_provider: str = _DEFAULTS["cloud_provider"]
    kube_api_content_type: str = _DEFAULTS["kube_api_content_type"]
    kube_api_qps: float = _DEFAULTS["kube_api_qps"]
    kube_api_burst: int = _DEFAULTS["kube_api_burst"]
    concurrent_syncs: int = _DEFAULTS["concurrent_syncs"]
    min_resync_period: float = _DEFAULTS["min_resync_period"]
    controller_start_interval: float = _DEFAULTS["controller_start_interval"]
    machine_creation_timeout: float = _DEFAULTS["machine_creation_timeout"]
    machine_health_timeout: float = _DEFAULTS["machine_health_timeout"]
    machine_drain_timeout: float = _DEFAULTS["machine_drain_timeout"]
    machine_max_evict_retries: int = _DEFAULTS["machine_max_evict_retries"]
    machine_pv_detach_timeout: float = _DEFAULTS["machine_pv_detach_timeout"]
    machine_pv_reattach_timeout: float = _DEFAULTS["machine_pv_reattach_timeout"]
    machine_safety_apiserver_statuscheck_timeout: float = _DEFAULTS[
        "machine_safety_apiserver_statuscheck_timeout"
    ]
    machine_safety_orphan_vms_period: float = _DEFAULTS["machine_safety_orphan_vms_period"]
    machine_safety_apiserver_statuscheck_period: float = _DEFAULTS[
        "machine_safety_apiserver_statuscheck_period"
    ]
    node_conditions: str = _DEFAULTS["node_conditions"]
    bootstrap_token_auth_extra_groups: str = _DEFAULTS["bootstrap_token_auth_extra_groups"]
    machine_inplace_update_timeout: float = _DEFAULTS["machine_inplace_update_timeout"]
    machine_preserve_timeout: float = _DEFAULTS["machine_preserve_timeout"]
    resource_exhausted_retry: float = _DEFAULTS["resource_exhausted_retry"]
    max_failed_machines_per_deployment: int = _DEFAULTS["max_failed_machines_per_deployment"]
    driver_call_timeout: float = _DEFAULTS["driver_call_timeout"]
    leader_elect: bool = _DEFAULTS["leader_elect"]
    leader_elect_lease_duration: float = _DEFAULTS["leader_elect_lease_duration"]
    leader_elect_renew_deadline: float = _DEFAULTS["leader_elect_renew_deadline"]
    leader_elect_retry_period: float = _DEFAULTS["leader_elect_retry_period"]
    leader_elect_resource_lock: str = _DEFAULTS["leader_elect_resource_lock"]
    driver: str = _DEFAULTS["driver"]
    driver_endpoint: str = _DEFAULTS["driver_endpoint"]
    driver_ca_file: str = _DEFAULTS["driver_ca_file"]
    driver_cert_file: str = _DEFAULTS["driver_cert_file"]
    driver_key_file: str = _DEFAULTS["driver_key_file"]
    driver_server_name: str = _DEFAULTS["driver_server_name"]
    driver_insecure: bool = _DEFAULTS["driver_insecure"]
    local_vm_namespace: str = _DEFAULTS["local_vm_namespace"]
    shutdown_grace_period: float = _DEFAULTS["shutdown_grace_period"]
    v: int = _DEFAULTS["v"]
    log_format: str = _DEFAULTS["log_format"]
    logtostderr: bool = _DEFAULTS["logtostderr"]
    alsologtostderr: bool = _DEFAULTS["alsologtostderr"]
    log_dir: str = _DEFAULTS["log_dir"]
    log_file: str = _DEFAULTS["log_file"]
    log_file_max_size: int = _DEFAULTS["log_file_max_size"]
    stderrthreshold: int = _DEFAULTS["stderrthreshold"]
    vmodule: str = _DEFAULTS["vmodule"]
    add_dir_header: bool = _DEFAULTS["add_dir_header"]
    skip_headers: bool = _DEFAULTS["skip_headers"]
    skip_log_headers: bool = _DEFAULTS["skip_log_headers"]
    one_output: bool = _DEFAULTS["one_output"]
    log_backtrace_at: str = _DEFAULTS["log_backtrace_at"]
    log_flush_frequency: float = _DEFAULTS["log_flush_frequency"]

    @classmethod
    def defaults(cls, **changes: Any) -> Options:
        """The defaults, with ``changes`` (snake_case flag names) applied."""
        unknown = sorted(set(changes) - set(_DEFAULTS))
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
        found = [(field, reason) for field, reason in _NO_EFFECT.items() if field in changed]
        if self.logtostderr:
            found += [
                (field, "--logtostderr is true (as in klog)") for field in _FILE_FLAGS if field in changed
            ]
        elif self.log_file and "log_dir" in changed:
            found.append(("log_dir", "--log-file is set"))
        if not self.logtostderr and self.alsologtostderr and "stderrthreshold" in changed:
            found.append(("stderrthreshold", "--alsologtostderr copies every line to stderr"))
        return [(f"--{field.replace('_', '-')}", reason) for field, reason in found]


_NO_EFFECT: dict[str, str] = {
    "machine_inplace_update_timeout": "mcm does not implement in-place updates",
    "machine_preserve_timeout": "mcm does not implement machine preservation",
    "vmodule": "one verbosity (--v) applies to all code",
    "add_dir_header": "mcm's log lines have no klog header",
    "skip_headers": "mcm's log lines have no klog header",
    "skip_log_headers": "mcm writes no log file header",
    "one_output": "mcm writes one log file",
    "log_backtrace_at": "mcm emits no klog stack traces",
    "log_flush_frequency": "every log line is flushed at once",
}
"""Flags accepted for compatibility (upstream manifests pass them) that do nothing in mcm."""
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
