"""The node step before the drain: :func:`cordon_node`.

Guarantee: it marks the Node unschedulable through the API (HEAD ``cordonNode``): a missing
Node is not an error, an already cordoned Node is left alone, a write conflict is retried with
fresh data, any other error is raised. (Deleting the node's VolumeAttachments after a forced
drain is the machine controller's deletion step ``Delete Volume Attachments``.)
"""

from __future__ import annotations

import copy

import structlog

from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, Conflict, NotFound
from mcm.runtime.client.resources import NODES

__all__ = ["cordon_node"]

log = structlog.get_logger(__name__)

CORDON_ATTEMPTS = 3


def cordon_node(client: ClusterClient, node_name: str) -> None:
    """Set ``spec.unschedulable`` on the Node; a missing Node is fine."""
    nodes = client.resource(NODES)
    for attempt in range(1, CORDON_ATTEMPTS + 1):
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
            if attempt == CORDON_ATTEMPTS:
                raise
            continue
        except ApiError as err:
            log.error("cordon_failed", node=node_name, error=str(err))
            raise
        log.info("node_cordoned", node=node_name)
        return
