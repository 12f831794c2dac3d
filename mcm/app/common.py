"""What the commands' flags share: one table of the common flags, their checks, and the flags
without effect.

:class:`CommonFlags` declares, once, the flags every controller process of mcm takes: the HTTP
server (``--port``, ``--address``, upstream's profiling flags), the clusters and their clients,
the workers, leader election, the shutdown grace period, and logging (``--v``, ``--log-format``
and klog's flags, which upstream's components take and upstream manifests pass). A command's
options dataclass declares each of its fields in the order its ``--help`` shows them; a common
flag with :func:`common` (the same type, help and group, with the command's own default or help
where it differs), so ``machine-controller`` and ``machine-controller-manager`` cannot drift
apart on the flags they share.

The checks are small functions over any options object with the fields they read, one message
per problem, each naming its flag; a command's ``validate`` calls those of its flags in its own
order. :class:`TableOptions` gives any options dataclass ``defaults``, ``as_dict``, ``replace``
and ``without_effect``; :class:`OptionsMixin` adds, for a command with the cluster and klog flags,
``no_target`` and klog's rules on the file flags.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Self, cast

from mcm.app.flags import Flag, flag, flags_of, same_flag, set_without_effect
from mcm.runtime.leaderelection import DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD

__all__ = [
    "IN_CLUSTER_CONFIG",
    "NO_TARGET",
    "CommonFlags",
    "OptionsMixin",
    "TableOptions",
    "client_errors",
    "common",
    "concurrent_syncs_errors",
    "klog_errors",
    "leader_election_duration_errors",
    "leader_election_errors",
    "log_format_errors",
    "logging_errors",
    "negative_duration_errors",
    "port_errors",
    "profiling_errors",
    "target_errors",
]

NO_TARGET = "none"
"""``--target-kubeconfig=none``: no target cluster (HEAD)."""
IN_CLUSTER_CONFIG = "inClusterConfig"

_KLOG_HEADER = "mcm's log lines have no klog header"
_PPROF = "Python serves no pprof"


@dataclass
class CommonFlags:
    """The common flags, each with the help and default most commands use (see the module
    docstring); a command takes each through :func:`common`."""

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
        no_effect=_PPROF,
    )
    contention_profiling: bool = flag(
        False,
        "bool",
        "Enable lock contention profiling, if profiling is enabled.",
        group="Server",
        no_effect=_PPROF,
    )
    # --- clusters and clients ---
    target_kubeconfig: str = flag(
        "",
        "string",
        "Path to the kubeconfig of the target cluster (where the Nodes are). Empty: in-cluster config. "
        "'none': no target cluster.",
        group="Clusters",
    )
    control_kubeconfig: str = flag(
        "",
        "string",
        "Path to the kubeconfig of the control cluster (the machine objects). Empty: the target "
        "cluster's config; 'inClusterConfig': the pod's service account.",
        group="Clusters",
    )
    namespace: str = flag(
        "default",
        "string",
        "Namespace of the control cluster holding the machine objects, and of the leader-election Lease.",
        group="Clusters",
    )
    cloud_provider: str = flag("", "string", "The provider for cloud services.", group="Clusters")
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
    # --- workers ---
    concurrent_syncs: int = flag(10, "int32", "The number of workers started per work queue.")
    min_resync_period: float = flag(12 * 3600.0, "duration", "The resync period of the informers.")
    controller_start_interval: float = flag(
        0.0,
        "duration",
        "Interval between starting controller managers.",
        no_effect="the controllers start together",
    )
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
    # --- process ---
    shutdown_grace_period: float = flag(
        30.0, "duration", "How long running reconciles get after SIGTERM/SIGINT.", group="Process"
    )
    # --- logging ---
    v: int = flag(0, "int32", "Log verbosity: 0-3 info, 4 and above debug.", group="Logging", shorthand="v")
    log_format: str = flag(
        "json", "string", "Log format: json (Kubernetes component style) or text.", group="Logging"
    )
    # klog's flags, which upstream manifests pass (mcm.app.logs says what each does here).
    logtostderr: bool = flag(
        True,
        "bool",
        "Log to stderr. false: log to --log-file, else to a file named after the command in --log-dir.",
        group="Logging",
    )
    alsologtostderr: bool = flag(
        False, "bool", "With --logtostderr=false, also write every line to stderr.", group="Logging"
    )
    log_dir: str = flag(
        "",
        "string",
        "With --logtostderr=false and no --log-file: directory of the command's log file "
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


def common(name: str, **changes: Any) -> Any:
    """The common flag ``name`` (a field of :class:`CommonFlags`) declared for a command's options
    dataclass, with ``changes`` (``default``, ``help``, ``no_effect``) where the command differs."""
    return same_flag(CommonFlags, name, **changes)


KLOG_FILE_FLAGS = ("alsologtostderr", "log_dir", "log_file", "log_file_max_size", "stderrthreshold")
"""klog flags that only matter with --logtostderr=false."""


class TableOptions:
    """``defaults``, ``as_dict``, ``replace`` and ``without_effect`` for an options dataclass whose
    fields are :func:`~mcm.app.flags.flag` fields."""

    @classmethod
    def defaults(cls, **changes: Any) -> Self:
        """The defaults, with ``changes`` (snake_case flag names) applied."""
        unknown = sorted(set(changes) - {f.field for f in flags_of(cls)})
        if unknown:
            raise KeyError(f"no flag --{unknown[0].replace('_', '-')}")
        return cls(**changes)

    def as_dict(self) -> dict[str, Any]:
        """Field name → value."""
        return dict(vars(self))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (snake_case flag names) applied."""
        return cast(Self, dataclasses.replace(cast(Any, self), **changes))

    def without_effect(self) -> list[tuple[str, str]]:
        """The flags accepted for compatibility only that are set to something other than their
        default, each as ``("--flag", reason)``; the command logs a warning for each."""
        return [(f"--{flag.name}", reason) for flag, reason in set_without_effect(self, flags_of(type(self)))]


class OptionsMixin(TableOptions):
    """:class:`TableOptions` and ``no_target`` for an options dataclass with the cluster and klog
    flags of :class:`CommonFlags`; ``without_effect`` also names klog's file flags set where klog
    ignores them."""

    target_kubeconfig: str
    logtostderr: bool
    alsologtostderr: bool
    log_file: str

    @property
    def no_target(self) -> bool:
        return self.target_kubeconfig == NO_TARGET

    def without_effect(self) -> list[tuple[str, str]]:
        """Flags set to something other than their default that change nothing here, each as
        ``("--flag", reason)``; the command logs a warning for each. Besides the flags accepted
        for compatibility only, klog's file flags do nothing while ``--logtostderr`` is true."""
        flags = flags_of(type(self))
        changed = {flag.field for flag in flags if getattr(self, flag.field) != flag.default}
        found = [(flag.field, reason) for flag, reason in set_without_effect(self, flags)]
        if self.logtostderr:
            found += [
                (field, "--logtostderr is true (as in klog)") for field in KLOG_FILE_FLAGS if field in changed
            ]
        elif self.log_file and "log_dir" in changed:
            found.append(("log_dir", "--log-file is set"))
        if not self.logtostderr and self.alsologtostderr and "stderrthreshold" in changed:
            found.append(("stderrthreshold", "--alsologtostderr copies every line to stderr"))
        return [(f"--{field.replace('_', '-')}", reason) for field, reason in found]


# --- checks -------------------------------------------------------------------------------------


def port_errors(options: Any) -> list[str]:
    if not 1 <= options.port <= 65535:
        return [f"--port must be between 1 and 65535, got {options.port}"]
    return []


def concurrent_syncs_errors(options: Any) -> list[str]:
    if options.concurrent_syncs <= 0:
        return [f"--concurrent-syncs must be greater than 0, got {options.concurrent_syncs}"]
    return []


def profiling_errors(options: Any) -> list[str]:
    if options.contention_profiling and not options.profiling:
        return ["--contention-profiling requires --profiling"]
    return []


def client_errors(options: Any) -> list[str]:
    """``--kube-api-content-type`` a media type, ``--kube-api-qps`` above 0, ``--kube-api-burst``
    not negative."""
    errors = []
    if not re.fullmatch(r"[\w.+-]+/[\w.+-]+(\s*;.*)?", options.kube_api_content_type):
        errors.append(f"--kube-api-content-type is not a valid media type: {options.kube_api_content_type!r}")
    if options.kube_api_qps <= 0:
        errors.append(f"--kube-api-qps must be greater than 0, got {options.kube_api_qps:g}")
    if options.kube_api_burst < 0:
        errors.append(f"--kube-api-burst must not be negative, got {options.kube_api_burst}")
    return errors


def negative_duration_errors(options: Any, flags: tuple[Flag, ...]) -> list[str]:
    return [
        f"--{flag.name} must not be negative"
        for flag in flags
        if flag.type == "duration" and getattr(options, flag.field) < 0
    ]


def target_errors(options: Any) -> list[str]:
    if options.target_kubeconfig == NO_TARGET and not options.control_kubeconfig:
        return ["--control-kubeconfig is required with --target-kubeconfig=none"]
    return []


def leader_election_errors(options: Any) -> list[str]:
    """Only Lease locks; with election on, the leader-election library's rules on the durations."""
    if options.leader_elect_resource_lock != "leases":
        return [
            "--leader-elect-resource-lock: invalid lock-type "
            f"{options.leader_elect_resource_lock!r} (use leases)"
        ]
    if not options.leader_elect:
        return []
    return leader_election_duration_errors(
        options.leader_elect_lease_duration,
        options.leader_elect_renew_deadline,
        options.leader_elect_retry_period,
    )


def leader_election_duration_errors(lease: float, renew: float, retry: float) -> list[str]:
    """The leader-election library's rules on the three ``--leader-elect-*`` durations."""
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


def log_format_errors(options: Any) -> list[str]:
    if options.log_format not in ("json", "text"):
        return [f"--log-format must be json or text, got {options.log_format!r}"]
    return []


def logging_errors(options: Any) -> list[str]:
    """``--log-format``, ``--v``, and klog's own checks."""
    errors = log_format_errors(options)
    if options.v < 0:
        errors.append(f"--v must not be negative, got {options.v}")
    return errors + klog_errors(options)


def klog_errors(options: Any) -> list[str]:
    """klog's own checks of ``--vmodule`` and ``--log-backtrace-at``."""
    errors = []
    for item in filter(None, options.vmodule.split(",")):
        pattern, sep, level = item.partition("=")
        if not sep or not pattern or not re.fullmatch(r"\d+", level):
            errors.append(f"--vmodule: syntax error: expect comma-separated list of filename=N, got {item!r}")
            break
    backtrace = options.log_backtrace_at
    if backtrace and not re.fullmatch(r"[^:]*\.[^:]*:[1-9]\d*", backtrace):
        errors.append(f"--log-backtrace-at: syntax error: expect file.go:234, got {backtrace!r}")
    return errors
