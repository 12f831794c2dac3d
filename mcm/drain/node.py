"""The node step before the drain: :func:`cordon_node`.

Guarantee: it marks the Node unschedulable through the API (HEAD ``cordonNode``): a missing
Node is not an error, an already cordoned Node is left alone, a write conflict is retried with
fresh data, any other error is raised. (Deleting the node's VolumeAttachments after a forced
drain is the machine controller's deletion step ``Delete Volume Attachments``.)
"""

from __future__ import annotations

import copy

import structlog

from mcm.runtime.client import ClusterClient, RESTClient
from mcm.runtime.client.errors import ApiError, Conflict, NotFound
from mcm.runtime.client.resources import NODES
from mcm.runtime.clock import REAL_CLOCK, Clock
from mcm.runtime.retry import DEFAULT_RETRY, retry_on_conflict

__all__ = ["cordon_node"]

log = structlog.get_logger(__name__)


def cordon_node(client: ClusterClient, node_name: str, *, clock: Clock = REAL_CLOCK) -> None:
    """Set ``spec.unschedulable`` on the Node; a missing Node is fine. Each try reads the Node
    live; a conflict is retried as client-go's ``retry.RetryOnConflict(retry.DefaultRetry, …)``."""
    nodes = client.resource(NODES)
    retry_on_conflict(DEFAULT_RETRY, lambda: _cordon(nodes, node_name), clock=clock)


def _cordon(nodes: RESTClient, node_name: str) -> None:
    try:
        node = nodes.get(node_name)
    except NotFound:
        log.info("cordon_skipped_node_not_found", node=node_name)
        return
    if (node.get("spec") or {}).get("unschedulable") is True:
        log.debug("cordon_already_done", node=node_name)
        return
    updated = copy.deepcopy(node)
    updated.setdefault("spec", {})["unschedulable"] = True
    try:
        nodes.update(updated)
    except NotFound:
        return
    except Conflict:
        raise
    except ApiError as err:
        log.error("cordon_failed", node=node_name, error=str(err))
        raise
    log.info("node_cordoned", node=node_name)
