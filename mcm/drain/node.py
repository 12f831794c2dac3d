"""The node steps around the drain: cordon before it, VolumeAttachment deletion after a forced one.

Guarantees:

- :func:`cordon_node` marks the Node unschedulable through the API (HEAD ``cordonNode``): a
  missing Node is not an error, an already cordoned Node is left alone, a write conflict is
  retried with fresh data, any other error is raised.
- :func:`delete_volume_attachments` (HEAD step ``Delete Volume Attachments``) deletes every
  VolumeAttachment the cache holds for the node, tolerates ones already gone, tries them all and
  then raises the first other error.
"""

from __future__ import annotations

import copy

import structlog

from mcm.runtime.cache import Lister
from mcm.runtime.client import ClusterClient
from mcm.runtime.client.errors import ApiError, Conflict, ConnectionFailed, NotFound
from mcm.runtime.client.resources import NODES, VOLUME_ATTACHMENTS

__all__ = ["cordon_node", "delete_volume_attachments"]

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
            log.error("Drain Error: Cordoning of node failed with error", node=node_name, error=str(err))
            raise
        log.info("node_cordoned", node=node_name)
        return


def delete_volume_attachments(client: ClusterClient, va_lister: Lister, node_name: str) -> int:
    """Delete the node's VolumeAttachments; return how many deletions the API accepted."""
    attachments = client.resource(VOLUME_ATTACHMENTS)
    deleted = 0
    first_error: Exception | None = None
    for attachment in va_lister.list():
        if (attachment.get("spec") or {}).get("nodeName") != node_name:
            continue
        name = str(attachment["metadata"]["name"])
        try:
            attachments.delete(name)
        except NotFound:
            continue
        except (ApiError, ConnectionFailed) as err:
            log.error("volume_attachment_delete_failed", node=node_name, attachment=name, error=str(err))
            first_error = first_error or err
            continue
        deleted += 1
        log.info("volume_attachment_deleted", node=node_name, attachment=name)
    if first_error is not None:
        raise first_error
    return deleted
