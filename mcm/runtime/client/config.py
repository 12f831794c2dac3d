"""Build a :class:`ClusterClient` from a kubeconfig file or the pod's service account.

Guarantees:

- Each call builds its own :class:`~mcm.runtime.client.connection.Connection` (pool and
  credentials), so a control and a target cluster can be used side by side. Tokens, token files,
  client certificates, basic auth, CA and proxy settings and the in-cluster service account need
  nothing else; only exec credential plugins, auth providers and SOCKS proxies go through the
  ``kubernetes`` package, imported then (its own ``Configuration`` and ``ApiClient``; the
  package's process-wide default configuration is never read or written).
- ``kubeconfig`` is a path (several joined by ``:`` are merged, as with ``$KUBECONFIG``), or
  ``None``, ``""`` or ``"inClusterConfig"`` for the in-cluster service account
  (``KUBERNETES_SERVICE_HOST``/``_PORT``, token and CA under :data:`SERVICE_ACCOUNT_DIR`; the
  token is re-read every minute so rotated tokens are used).
- A kubeconfig is checked first (:func:`~mcm.runtime.client.kubeconfig.check_kubeconfig`): bad
  YAML, or a missing cluster, user or context, raises :class:`ConfigError` naming the file and
  what is wrong, never a raw YAML error.
- Failures of either path raise :class:`ConfigError` with the reason. The files a configuration
  names (CA, client certificate and key, token file) are read and parsed here, so a missing or
  unreadable file or PEM that does not parse is a :class:`ConfigError` naming the entry and the
  file when the client is built, as client-go fails at start-up, not a request failure later.
- Requests go through the proxy client-go would use (:mod:`mcm.runtime.client.proxy`): the
  cluster's ``proxy-url``, else ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``; on the
  ``kubernetes`` package's path too (its own reading of the environment is replaced).
- No key material is written to disk by either path: inline CA, client certificate and key data
  stay in memory (:mod:`mcm.runtime.client.identity`); on the ``kubernetes`` package's path they
  are taken out of the kubeconfig before its loader (which would write them to temp files) sees
  them. (A certificate returned by an exec plugin is still written by that package.)
- TCP keep-alive is on (client-go's probe timing), and the pool keeps enough connections for
  the informers' long-running watches.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mcm.runtime.client.cluster import ClusterClient
from mcm.runtime.client.connection import (
    CONNECTION_POOL_SIZE,
    Connection,
    in_cluster_connection,
    kubeconfig_connection,
    needs_kubernetes_package,
)
from mcm.runtime.client.identity import (
    TlsMaterial,
    apply_ca,
    check_ca,
    check_identity,
    take_tls_material,
    use_identity,
)
from mcm.runtime.client.kubeconfig import ConfigError, select_context
from mcm.runtime.client.proxy import cluster_proxy, proxy_from_environment
from mcm.runtime.client.transport import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, default_user_agent
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.tokenbucket import MACHINE_CONTROLLER_BURST, MACHINE_CONTROLLER_QPS

__all__ = [
    "IN_CLUSTER_CONFIG",
    "SERVICE_ACCOUNT_DIR",
    "ConfigError",
    "load_config",
    "new_configuration",
    "new_connection",
]

IN_CLUSTER_CONFIG = "inClusterConfig"
"""The kubeconfig value that selects the in-cluster service account (MCM's flag convention)."""

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the pod's service account token, CA and namespace are mounted."""

if TYPE_CHECKING:
    from kubernetes.client import Configuration


def _is_in_cluster(kubeconfig: str | None) -> bool:
    return not kubeconfig or kubeconfig == IN_CLUSTER_CONFIG


def _in_cluster_configuration(configuration: Configuration) -> str | None:
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=os.path.join(SERVICE_ACCOUNT_DIR, "token"),
        cert_filename=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        raise ConfigError(f"unable to load in-cluster configuration: {exc}") from exc
    _use_proxy(configuration, proxy_from_environment(str(configuration.host)))
    return _service_account_namespace()


def _use_proxy(configuration: Configuration, proxy: str | None) -> None:
    """Route the package's pool through ``proxy`` (chosen as client-go chooses it) and nothing
    else: the package's own reading of the environment differs (loopback servers, NO_PROXY)."""
    configuration.proxy = proxy
    configuration.no_proxy = None


def _service_account_namespace() -> str | None:
    try:
        with open(os.path.join(SERVICE_ACCOUNT_DIR, "namespace"), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _kubeconfig_paths(kubeconfig: str) -> list[str]:
    paths = [os.path.expanduser(p) for p in kubeconfig.split(os.pathsep) if p]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise ConfigError(f"kubeconfig {missing[0]!r} does not exist")
    return paths


def _kubeconfig_configuration(
    configuration: Configuration, kubeconfig: str, context: str | None
) -> tuple[str | None, TlsMaterial]:
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

    paths = _kubeconfig_paths(kubeconfig)
    selection = select_context(paths, context)
    kubeconfig = os.pathsep.join(paths)
    try:
        merged = KubeConfigMerger(kubeconfig)  # type: ignore[no-untyped-call]
        material = take_tls_material(merged.config, context)
        _check_material(material)
        loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
            config_dict=merged.config, config_base_path=None, active_context=context
        )
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        apply_ca(configuration, material)
        _use_proxy(configuration, cluster_proxy(selection.cluster))
    except (ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unable to load kubeconfig {kubeconfig!r}: {exc}") from exc
    return selection.namespace, material


def _check_material(material: TlsMaterial) -> None:
    """Raise ``ValueError`` for a CA or client identity that does not parse (checked at load
    time, as on the path without the package)."""
    if material.ca is not None:
        check_ca(material.ca, "certificate-authority")
    if material.identity is not None:
        check_identity(material.identity, "client-certificate/client-key")


def _package_configuration(
    kubeconfig: str | None, context: str | None
) -> tuple[Configuration, str | None, TlsMaterial]:
    from kubernetes.client import Configuration

    configuration = Configuration()
    material = TlsMaterial()
    if _is_in_cluster(kubeconfig):
        namespace = _in_cluster_configuration(configuration)
    else:
        assert kubeconfig is not None
        namespace, material = _kubeconfig_configuration(configuration, kubeconfig, context)
    configuration.keep_alive = True
    # the package's default is 5 per CPU (its constructor never leaves it None)
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, CONNECTION_POOL_SIZE)
    return configuration, namespace, material


def new_configuration(
    kubeconfig: str | None, *, context: str | None = None
) -> tuple[Configuration, str | None]:
    """A fresh ``kubernetes`` ``Configuration`` for ``kubeconfig`` and the default namespace it
    names (if any). A kubeconfig with a client certificate raises :class:`ConfigError`: its key
    would have to be written to a file for a ``Configuration``; use :func:`new_connection`."""
    configuration, namespace, material = _package_configuration(kubeconfig, context)
    if material.identity is not None:
        raise ConfigError(
            f"kubeconfig {kubeconfig!r} authenticates with a client certificate: build the client "
            "with new_connection (or load_config), which keeps the key in memory"
        )
    return configuration, namespace


def _package_connection(kubeconfig: str, context: str | None) -> tuple[Connection, str | None]:
    """A connection through the ``kubernetes`` package (exec plugins, auth providers, SOCKS)."""
    from kubernetes.client import ApiClient

    configuration, namespace, material = _package_configuration(kubeconfig, context)
    try:
        api_client = ApiClient(configuration=configuration)
    except ImportError as exc:  # urllib3's SOCKS support needs PySocks
        raise ConfigError(
            f"kubeconfig {kubeconfig!r}: a SOCKS proxy needs the PySocks package ({exc})"
        ) from None
    if material.identity is not None:
        try:
            use_identity(api_client, material.identity)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"kubeconfig {kubeconfig!r}: client certificate or key: {exc}") from exc
    return Connection.from_api_client(api_client), namespace


def new_connection(kubeconfig: str | None, *, context: str | None = None) -> tuple[Connection, str | None]:
    """A :class:`Connection` for ``kubeconfig`` and the default namespace it names (if any)."""
    if _is_in_cluster(kubeconfig):
        try:
            return in_cluster_connection(SERVICE_ACCOUNT_DIR), _service_account_namespace()
        except ValueError as exc:
            raise ConfigError(f"unable to load in-cluster configuration: {exc}") from exc
    assert kubeconfig is not None
    paths = _kubeconfig_paths(kubeconfig)
    selection = select_context(paths, context)
    if needs_kubernetes_package(selection.cluster, selection.user):  # reads os.environ too
        return _package_connection(kubeconfig, context)
    try:
        connection = kubeconfig_connection(
            selection.cluster,
            selection.user,
            cluster_dir=os.path.dirname(os.path.abspath(selection.cluster_file)),
            user_dir=os.path.dirname(os.path.abspath(selection.user_file)),
        )
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"unable to load kubeconfig {kubeconfig!r}: {exc}") from exc
    return connection, selection.namespace


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
    """A :class:`ClusterClient` with its own connection for the cluster ``kubeconfig`` names.

    ``qps``/``burst`` set the client's token bucket: by default the machine-controller's flag
    defaults 20 / 30; ``qps`` 0 → 5 and ``burst`` 0 → 10 (client-go rest's defaults), negative
    ``qps`` → unthrottled, as client-go. ``timeout`` bounds the wait for each non-watch answer.
    """
    connection, namespace = new_connection(kubeconfig, context=context)
    return ClusterClient(
        connection,
        qps=qps,
        burst=burst,
        namespace=namespace,
        user_agent=default_user_agent(user_agent_suffix),
        clock=clock,
        max_retries=max_retries,
        timeout=timeout,
    )
