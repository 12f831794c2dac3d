"""The real drain (``mcm.drain``) behind the controller's Drainer seam.

``mcm.drain`` and ``mcm.controller`` may not import each other, so this adapter belongs to the
layer above both (the application); the e2e tests use this copy. Pass ``drain_factory`` as
``Controller(drainer_factory=...)``.
"""

from __future__ import annotations

from mcm.controller.drainer import Drainer, DrainFailed, DrainRequest, DrainWiring
from mcm.drain import DrainListers, DrainOptions, VolumeAttachmentHub, cordon_node, drain_node


class MCMDrainer:
    """Cordons with :func:`mcm.drain.cordon_node`, drains with :func:`mcm.drain.drain_node`."""

    def __init__(self, wiring: DrainWiring) -> None:
        self._wiring = wiring
        self._hub = VolumeAttachmentHub()
        wiring.add_volume_attachment_handler(self._hub)
        self._listers = DrainListers(
            pods=wiring.pods,
            pdbs=wiring.pdbs,
            pvs=wiring.pvs,
            pvcs=wiring.pvcs,
            volume_attachments=wiring.volume_attachments,
            pods_synced=wiring.pods_synced,
        )

    def cordon(self, node_name: str) -> None:
        cordon_node(self._wiring.target, node_name)

    def drain(self, request: DrainRequest) -> None:
        options = DrainOptions(
            timeout=request.timeout,
            max_evict_retries=request.max_evict_retries,
            pv_detach_timeout=request.pv_detach_timeout,
            pv_reattach_timeout=request.pv_reattach_timeout,
            force=request.force,
        )
        metadata = dict(request.machine.get("metadata") or {})
        machine_ref = {"apiVersion": "machine.sapcloud.io/v1alpha1", "kind": "Machine", "metadata": metadata}
        result = drain_node(
            self._wiring.target,
            self._listers,
            self._wiring.driver,
            request.node_name,
            options,
            clock=self._wiring.clock,
            stop=self._wiring.stop,
            hub=self._hub,
            recorder=self._wiring.recorder,
            machine_ref=machine_ref if metadata else None,
        )
        if not result.ok:
            raise DrainFailed(result.error or "drain failed")


def drain_factory(wiring: DrainWiring) -> Drainer:
    return MCMDrainer(wiring)
