"""A cluster's address, connection pool and credentials, without the ``kubernetes`` package.

``kubernetes.client`` imports every generated API and model class (tens of MiB of memory and a
noticeable start-up time) although mcm only needs a connection pool and an ``Authorization``
header. :class:`Connection` is what the transport needs; :func:`kubeconfig_connection` and
:func:`in_cluster_connection` build one for the common cases directly, and
:meth:`Connection.from_api_client` wraps a ``kubernetes`` ``ApiClient`` for everything else
(exec plugins, auth providers, SOCKS proxies), so only those configurations import the package.

Guarantees:

- TLS as the kubeconfig says: the CA from ``certificate-authority`` (a path, relative to the
  kubeconfig file that names it) or ``certificate-authority-data``, client certificates from
  ``client-certificate``/``client-key`` or their ``-data`` forms, ``insecure-skip-tls-verify``,
  ``tls-server-name``. Inline data never lands in a file: the CA goes to urllib3 as data and an
  inline certificate or key is loaded into the pool's ``SSLContext`` from memory
  (:mod:`mcm.runtime.client.identity`).
- A proxy as client-go picks it (:mod:`mcm.runtime.client.proxy`): the cluster's ``proxy-url``,
  else ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY`` or a loopback server exempts it; its
  ``user:password`` becomes a ``Proxy-Authorization`` header. Proxied requests all go through
  urllib3's ``ProxyManager`` (CONNECT for ``https`` servers); the lean pool is for direct
  connections only.
- Credentials: ``tokenFile`` (re-read at most every :data:`TOKEN_FILE_REFRESH` seconds, so
  rotated tokens are used; it wins over ``token`` as in client-go), ``token``, basic auth.
- TCP keep-alive with client-go's probe timing; a pool of :data:`CONNECTION_POOL_SIZE`
  connections per host, enough for the informers' long-running watches.
"""

from __future__ import annotations

import base64
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import urllib3

from mcm.runtime.client.http11 import HTTP11Pool, tls_context
from mcm.runtime.client.identity import (
    ClientIdentity,
    check_ca,
    check_identity,
    client_identity,
    client_ssl_context,
    decode_data,
    load_client_identity,
    read_file,
)
from mcm.runtime.client.proxy import cluster_proxy, proxy_from_environment

__all__ = [
    "CONNECTION_POOL_SIZE",
    "TOKEN_FILE_REFRESH",
    "Connection",
    "TokenFile",
    "in_cluster_connection",
    "keepalive_socket_options",
    "kubeconfig_connection",
]

CONNECTION_POOL_SIZE = 64
"""Connections kept per host: every informer holds one for its watch."""

TOKEN_FILE_REFRESH = 60.0
"""Seconds a token read from a file is used before the file is read again (client-go: 1 min)."""

Headers = Callable[[], dict[str, str]]


def keepalive_socket_options(
    idle: int = 30, interval: int = 15, count: int = 9
) -> list[tuple[int, int, int]]:
    """urllib3's default socket options plus TCP keep-alive with client-go's timing."""
    options = list(urllib3.connection.HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


class TokenFile:
    """A bearer token read from a file, re-read every :data:`TOKEN_FILE_REFRESH` seconds; the
    last good token is kept when a read fails."""

    def __init__(self, path: str, refresh: float = TOKEN_FILE_REFRESH) -> None:
        self.path = path
        self.refresh = refresh
        self._lock = threading.Lock()
        self._token = ""
        self._read_at = -float("inf")

    def token(self) -> str:
        with self._lock:
            if time.monotonic() - self._read_at >= self.refresh:
                try:
                    with open(self.path, encoding="utf-8") as f:
                        self._token = f.read().strip() or self._token
                except OSError:
                    pass
                self._read_at = time.monotonic()
            return self._token

    def headers(self) -> dict[str, str]:
        token = self.token()
        return {"Authorization": f"Bearer {token}"} if token else {}


class Connection:
    """The server URL, the urllib3 pool manager to reach it and a function giving the auth headers."""

    def __init__(
        self,
        host: str,
        pool: urllib3.PoolManager,
        headers: Headers = dict,
        *,
        ca_file: str | None = None,
        api_client: Any = None,
        http11: HTTP11Pool | None = None,
    ) -> None:
        self.host = host.rstrip("/")
        self.pool = pool
        self.http11 = http11
        """The lean keep-alive pool for plain requests, when the configuration allows one (no
        proxy, credentials from headers); watches and everything else use ``pool``."""
        self._headers = headers
        self.ca_file = ca_file
        """The CA bundle file, when the configuration named one (diagnostics and tests)."""
        self.api_client = api_client
        """The ``kubernetes`` ``ApiClient`` this connection wraps, if any."""

    @classmethod
    def from_api_client(cls, api_client: Any) -> Connection:
        """Wrap a ``kubernetes`` ``ApiClient``: its pool, host and auth settings (refresh hooks
        of exec plugins and in-cluster tokens run on every request, as in the package)."""
        configuration = api_client.configuration

        def headers() -> dict[str, str]:
            found: dict[str, str] = {}
            for setting in configuration.auth_settings().values():
                if setting.get("in") == "header" and setting.get("value"):
                    found[setting["key"]] = setting["value"]
            return found

        return cls(
            str(configuration.host),
            api_client.rest_client.pool_manager,
            headers,
            ca_file=configuration.ssl_ca_cert,
            api_client=api_client,
        )

    def auth_headers(self) -> dict[str, str]:
        """The credentials' headers for the next request."""
        return self._headers()

    def close(self) -> None:
        """Close the pooled connections (idle ones at once; one in use when it is released)."""
        if self.http11 is not None:
            self.http11.close()
        if self.api_client is not None:
            self.api_client.close()
        else:
            _close_pools(self.pool)


def _close_pools(manager: urllib3.PoolManager) -> None:
    """Close every pool of ``manager`` and forget them: urllib3 2's ``clear`` only forgets them,
    leaving their idle sockets open (and a transport's cached host pool usable)."""
    pools = manager.pools
    for key in pools.keys():  # noqa: SIM118 - iterating the container raises; keys() is a locked copy
        try:
            pool = pools[key]
        except KeyError:  # removed meanwhile
            continue
        pool.close()
    manager.clear()


# --- TLS material -------------------------------------------------------------------------------


def _path(value: Any, base_dir: str) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if os.path.isabs(value) else os.path.join(base_dir, value)


def _tls_args(
    cluster: Mapping[str, Any],
    user: Mapping[str, Any],
    dirs: tuple[str, str],
    identity: ClientIdentity | None,
) -> dict[str, Any]:
    """urllib3's TLS arguments for ``cluster`` and ``user`` (``identity``: the client identity
    its ``client-certificate-data``/``client-key-data`` hold), their files read and checked now
    (``ValueError`` naming the entry and file), as client-go fails at start-up."""
    cluster_dir, user_dir = dirs
    verify = not cluster.get("insecure-skip-tls-verify")
    args: dict[str, Any] = {}
    if not verify:
        args.update(cert_reqs="CERT_NONE", assert_hostname=False)
    else:
        args["cert_reqs"] = "CERT_REQUIRED"
        args.update(_ca_args(cluster, cluster_dir))
    if cluster.get("tls-server-name"):
        args["server_hostname"] = cluster["tls-server-name"]
    if identity is not None:
        check_identity(identity, "client-certificate-data/client-key-data")
        has_ca = bool(args.get("ca_cert_data") or args.get("ca_certs"))
        args["ssl_context"] = client_ssl_context(identity, verify=verify, system_roots=not has_ca)
        return args
    cert, key = _path(user.get("client-certificate"), user_dir), _path(user.get("client-key"), user_dir)
    if cert:
        pem = read_file(cert, "client-certificate")
        key_pem = read_file(key, "client-key") if key else b""
        check_identity(
            ClientIdentity(pem, key_pem),
            f"client-certificate {cert!r}" + (f", client-key {key!r}" if key else ""),
        )
        args.update(cert_file=cert, key_file=key)
    elif key:
        raise ValueError(f"client-key {key!r} is set without a client-certificate")
    return args


def _ca_args(cluster: Mapping[str, Any], cluster_dir: str) -> dict[str, Any]:
    """The CA to verify the server with: ``certificate-authority-data`` or the file
    ``certificate-authority`` names (checked now); none means the system's."""
    ca_data = cluster.get("certificate-authority-data")
    if ca_data:
        pem = decode_data(ca_data, "certificate-authority")
        check_ca(pem, "certificate-authority-data")
        return {"ca_cert_data": pem.decode("ascii")}
    path = _path(cluster.get("certificate-authority"), cluster_dir)
    if path:
        check_ca(read_file(path, "certificate-authority"), f"certificate-authority {path!r}")
    return {"ca_certs": path}


def _pool(proxy: str | None, tls: dict[str, Any]) -> urllib3.PoolManager:
    options: dict[str, Any] = {
        "num_pools": 4,
        "maxsize": CONNECTION_POOL_SIZE,
        "socket_options": keepalive_socket_options(),
        **tls,
    }
    if proxy:
        url = urllib3.util.parse_url(proxy)
        headers = {}
        if url.auth:  # user:password in the proxy URL, sent as Go's transport sends it
            headers = urllib3.util.make_headers(proxy_basic_auth=unquote(url.auth))
        return urllib3.ProxyManager(url._replace(auth=None).url, proxy_headers=headers, **options)
    return urllib3.PoolManager(**options)


def _http11_pool(
    server: str, tls: Mapping[str, Any], identity: ClientIdentity | None = None
) -> HTTP11Pool | None:
    """The lean pool for ``server`` with the same TLS settings as the urllib3 pool (its context
    built on first use, the client identity loaded from memory), or ``None`` for a scheme it does
    not speak."""
    url = urllib3.util.parse_url(server)
    if url.scheme not in ("http", "https") or not url.host:
        return None

    def context() -> ssl.SSLContext:
        built = tls_context(
            verify=tls.get("cert_reqs") != "CERT_NONE",
            ca_file=tls.get("ca_certs"),
            ca_data=tls.get("ca_cert_data"),
            cert_file=tls.get("cert_file"),
            key_file=tls.get("key_file"),
        )
        if identity is not None:
            load_client_identity(built, identity)
        return built

    return HTTP11Pool(
        url.scheme,
        url.host,
        url.port,
        ssl_context=context if url.scheme == "https" else None,
        server_hostname=tls.get("server_hostname"),
        socket_options=keepalive_socket_options(),
        maxsize=CONNECTION_POOL_SIZE,
    )


def _user_headers(user: Mapping[str, Any], user_dir: str) -> Headers:
    token_file = _path(user.get("tokenFile"), user_dir)
    if token_file:
        read_file(token_file, "tokenFile")  # a file missing at start-up is a configuration error
        return TokenFile(token_file).headers
    fixed: dict[str, str] = {}
    if user.get("token"):
        fixed["Authorization"] = f"Bearer {user['token']}"
    elif user.get("username") or user.get("password"):
        pair = f"{user.get('username') or ''}:{user.get('password') or ''}".encode()
        fixed["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    return lambda: dict(fixed)


def needs_kubernetes_package(
    cluster: Mapping[str, Any], user: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> bool:
    """Whether the configuration uses something only the ``kubernetes`` package handles: exec
    credential plugins, auth providers, a SOCKS proxy (``proxy-url`` or the environment's)."""
    proxy = cluster_proxy(cluster, environ) or ""
    return bool(user.get("exec") or user.get("auth-provider") or proxy.lower().startswith("socks"))


def kubeconfig_connection(
    cluster: Mapping[str, Any],
    user: Mapping[str, Any],
    *,
    cluster_dir: str,
    user_dir: str,
    environ: Mapping[str, str] | None = None,
) -> Connection:
    """A connection for a kubeconfig's selected cluster and user (see the module docstring).

    ``cluster_dir``/``user_dir``: directories of the files that define them (relative paths);
    ``environ``: where ``HTTPS_PROXY`` and the like are read (``os.environ`` by default)."""
    identity = (
        client_identity(dict(user), user_dir)
        if user.get("client-certificate-data") or user.get("client-key-data")
        else None
    )
    tls = _tls_args(cluster, user, (cluster_dir, user_dir), identity)
    proxy = cluster_proxy(cluster, environ)
    server = str(cluster["server"])
    return Connection(
        server,
        _pool(proxy, tls),
        _user_headers(user, user_dir),
        ca_file=tls.get("ca_certs"),
        http11=None if proxy else _http11_pool(server, tls, identity),
    )


def in_cluster_connection(service_account_dir: str, environ: Mapping[str, str] = os.environ) -> Connection:
    """The pod's service account: ``KUBERNETES_SERVICE_HOST``/``_PORT``, its token (re-read as it
    rotates) and CA, through the proxy the environment names for it (client-go's
    ``http.ProxyFromEnvironment``). Raises ``ValueError`` naming what is missing."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ValueError("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?)")
    token_path = os.path.join(service_account_dir, "token")
    ca_path = os.path.join(service_account_dir, "ca.crt")
    for path, what in ((token_path, "service account token"), (ca_path, "service account CA")):
        if not os.path.isfile(path):
            raise ValueError(f"the {what} file {path} does not exist")
    read_file(token_path, "service account token")
    check_ca(read_file(ca_path, "service account CA"), f"service account CA {ca_path!r}")
    tokens = TokenFile(token_path)
    if not tokens.token():
        raise ValueError(f"the service account token file {token_path} is empty")
    server = f"[{host}]" if ":" in host else host
    tls = {"cert_reqs": "CERT_REQUIRED", "ca_certs": ca_path}
    url = f"https://{server}:{port}"
    proxy = proxy_from_environment(url, environ)
    return Connection(
        url,
        _pool(proxy, tls),
        tokens.headers,
        ca_file=ca_path,
        http11=None if proxy else _http11_pool(url, tls),
    )
