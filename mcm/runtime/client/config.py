"""Build a :class:`ClusterClient` from a kubeconfig file or the pod's service account.

Guarantees:

- Each call builds its own ``kubernetes`` ``Configuration`` and ``ApiClient``; the package's
  process-wide default configuration is never read or written, so a control and a target
  cluster can be used side by side.
- ``kubeconfig`` is a path (several joined by ``:`` are merged, as with ``$KUBECONFIG``), or
  ``None``, ``""`` or ``"inClusterConfig"`` for the in-cluster service account
  (``KUBERNETES_SERVICE_HOST``/``_PORT``, token and CA under :data:`SERVICE_ACCOUNT_DIR`; the
  token is re-read every minute so rotated tokens are used).
- A kubeconfig is checked first (:func:`~mcm.runtime.client.kubeconfig.check_kubeconfig`): bad
  YAML, or a missing cluster, user or context, raises :class:`ConfigError` naming the file and
  what is wrong, never a raw YAML error.
- Whatever the kubeconfig can express (tokens, client certificates, CA data, insecure TLS,
  exec plugins) is handled by the ``kubernetes`` package's loaders; failures raise
  :class:`ConfigError` with the reason.
- No key material is written to disk: the CA and the client certificate and key of the selected
  context are taken out of the kubeconfig before the ``kubernetes`` loader (which would write
  them to temp files) sees them, and kept in memory (:mod:`mcm.runtime.client.identity`). (A
  certificate an exec plugin returns is still written by the ``kubernetes`` package.)
- TCP keep-alive is on (client-go's probe timing), and the pool keeps enough connections for
  the informers' long-running watches.
"""

from __future__ import annotations

import os

from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.identity import TlsMaterial, apply_ca, take_tls_material, use_identity
from mcm.runtime.client.kubeconfig import ConfigError, check_kubeconfig
from mcm.runtime.client.transport import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, default_user_agent
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.tokenbucket import MACHINE_CONTROLLER_BURST, MACHINE_CONTROLLER_QPS

__all__ = [
    "IN_CLUSTER_CONFIG",
    "SERVICE_ACCOUNT_DIR",
    "ConfigError",
    "load_config",
    "new_api_client",
]

IN_CLUSTER_CONFIG = "inClusterConfig"
"""The kubeconfig value that selects the in-cluster service account (MCM's flag convention)."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the pod's service account token, CA and namespace are mounted."""

CONNECTION_POOL_SIZE = 64
"""Connections kept per host: every informer holds one for its watch."""


def _is_in_cluster(kubeconfig: str | None) -> bool:
    return not kubeconfig or kubeconfig == IN_CLUSTER_CONFIG


def _in_cluster_configuration(configuration: Configuration) -> str | None:
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
        cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        raise ConfigError(f"unable to load in-cluster configuration: {exc}") from exc
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace"), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _context_namespace(loader: KubeConfigLoader, context: str | None) -> str | None:
    wanted = context or loader.current_context.get("name")
    for entry in loader.list_contexts() or []:  # type: ignore[no-untyped-call]
        if entry.get("name") == wanted:
            ns = (entry.get("context") or {}).get("namespace")
            return ns if isinstance(ns, str) and ns else None
    return None


def _kubeconfig_configuration(
    configuration: Configuration, kubeconfig: str, context: str | None
) -> tuple[str | None, TlsMaterial]:
    paths = [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ConfigError(f"kubeconfig {missing[0]!r} does not exist")
    check_kubeconfig(paths, context)
    kubeconfig = os.pathsep.join(paths)
    try:
        merged = KubeConfigMerger(kubeconfig)  # type: ignore[no-untyped-call]
        material = take_tls_material(merged.config, context)
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged.config, config_base_path=None, active_context=context
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        apply_ca(configuration, material)
        return _context_namespace(loader, context), material
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unable to load kubeconfig {kubeconfig!r}: {exc}") from exc


def new_api_client(kubeconfig: str | None, *, context: str | None = None) -> tuple[ApiClient, str | None]:
    """A fresh ``ApiClient`` for ``kubeconfig`` (its key material in memory) and the default
    namespace it names (if any). Change ``api_client.configuration.host`` before first use to
    talk to another server with the same credentials."""
    configuration = Configuration()
    material = TlsMaterial()
    if _is_in_cluster(kubeconfig):
        namespace = _in_cluster_configuration(configuration)
    else:
        assert kubeconfig is not None
        namespace, material = _kubeconfig_configuration(configuration, kubeconfig, context)
    configuration.keep_alive = True
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE
    )
    api_client = ApiClient(configuration=configuration)
    if material.identity is not None:
        try:
            use_identity(api_client, material.identity)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"kubeconfig {kubeconfig!r}: client certificate or key: {exc}") from exc
    return api_client, namespace


def load_config(
    kubeconfig: str | None,
    *,
    qps: float = MACHINE_CONTROLLER_QPS,
    burst: int = MACHINE_CONTROLLER_BURST,
    context: str | None = None,
    user_agent_suffix: str | None = None,
    clock: Clock = REAL_CLOCK,
    max_retries: int = DEFAULT_MAX_RETRIES,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> ClusterClient:
    """A :class:`ClusterClient` with its own ``ApiClient`` for the cluster ``kubeconfig`` names.

    ``qps``/``burst`` set the client's token bucket: by default the machine-controller's flag
    defaults 20 / 30; ``qps`` 0 → 5 and ``burst`` 0 → 10 (client-go rest's defaults), negative
    ``qps`` → unthrottled, as client-go. ``timeout`` bounds the wait for each non-watch answer.
    """
    api_client, namespace = new_api_client(kubeconfig, context=context)
    return ClusterClient(
        api_client,
        qps=qps,
        burst=burst,
        namespace=namespace,
        user_agent=default_user_agent(user_agent_suffix),
        clock=clock,
        max_retries=max_retries,
        timeout=timeout,
    )
