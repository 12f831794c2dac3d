"""The driver contract: what a provider implements so mcm can manage its VMs.

A driver is an object with the six methods of :class:`Driver`. Each takes a
:class:`~mcm.driver.context.CallContext` (deadline and cancellation) and a request dataclass, and
returns a response dataclass or raises :class:`~mcm.driver.errors.MachineError`. The controller
calls them synchronously from its workers, possibly several at once for different machines.

The rules a driver must follow (idempotent create, ``NotFound`` for a missing VM, which codes
mean "retry soon") are in ``docs/driver.md``. In short:

- ``create_machine`` returns the existing VM when one already backs the machine.
- ``get_machine_status`` raises ``NotFound`` when no VM backs the machine, ``Uninitialized`` when
  the VM exists but ``initialize_machine`` still has to run.
- ``delete_machine`` succeeds when the VM is already gone.
- ``initialize_machine`` may raise ``Unimplemented``: nothing to initialise (the default here).

Requests carry the Machine and MachineClass as typed models and the merged secret data of the
class as raw bytes. Secret data never appears in a request's ``repr``. Node addresses use the API
type :class:`~mcm.apis.machine.v1alpha1.NodeAddress` (``type``, ``address``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcm.apis.machine.v1alpha1 import Machine, MachineClass, NodeAddress
from mcm.driver.codes import Code
from mcm.driver.context import CallContext
from mcm.driver.errors import MachineError

__all__ = [
    "CreateMachineRequest",
    "CreateMachineResponse",
    "DeleteMachineRequest",
    "DeleteMachineResponse",
    "Driver",
    "GetMachineStatusRequest",
    "GetMachineStatusResponse",
    "GetVolumeIDsRequest",
    "GetVolumeIDsResponse",
    "InitializeMachineRequest",
    "InitializeMachineResponse",
    "ListMachinesRequest",
    "ListMachinesResponse",
    "MachineRequest",
    "MachineResponse",
    "NodeAddress",
]


@dataclass(frozen=True)
class MachineRequest:
    """What every per-machine request carries: the machine, its class and the class's secret data."""

    machine: Machine
    machine_class: MachineClass
    secret_data: Mapping[str, bytes] = field(repr=False)


@dataclass(frozen=True)
class CreateMachineRequest(MachineRequest):
    """Create the VM for ``machine``. ``secret_data`` holds ``userData`` with the bootstrap token."""


@dataclass(frozen=True)
class MachineResponse:
    """What create, initialise and status report about a VM: its IDs and addresses.

    ``addresses`` is stored as a tuple (a list of :class:`NodeAddress` is accepted too); anything
    else, such as a string passed in the wrong position, is a ``TypeError``.
    """

    provider_id: str
    node_name: str
    addresses: tuple[NodeAddress, ...] = ()

    def __post_init__(self) -> None:
        addresses: object = self.addresses
        if not isinstance(addresses, (tuple, list)) or not all(isinstance(a, NodeAddress) for a in addresses):
            raise TypeError(f"addresses must be NodeAddress values, got {addresses!r}")
        object.__setattr__(self, "addresses", tuple(addresses))


@dataclass(frozen=True)
class CreateMachineResponse(MachineResponse):
    """The new (or already existing) VM, and what the driver wants remembered about it."""

    last_known_state: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class InitializeMachineRequest(MachineRequest):
    """Finish setting up the VM of ``machine`` after creation."""


@dataclass(frozen=True)
class InitializeMachineResponse(MachineResponse):
    """The initialised VM."""


@dataclass(frozen=True)
class DeleteMachineRequest(MachineRequest):
    """Delete the VM of ``machine`` (found by ``spec.providerID`` or, failing that, by name)."""


@dataclass(frozen=True)
class DeleteMachineResponse:
    """What the driver wants remembered after the deletion."""

    last_known_state: str = ""


@dataclass(frozen=True)
class GetMachineStatusRequest(MachineRequest):
    """Report the VM of ``machine``."""


@dataclass(frozen=True)
class GetMachineStatusResponse(MachineResponse):
    """The VM backing the machine."""


@dataclass(frozen=True)
class ListMachinesRequest:
    """List the VMs created for ``machine_class``."""

    machine_class: MachineClass
    secret_data: Mapping[str, bytes] = field(repr=False)


@dataclass(frozen=True)
class ListMachinesResponse:
    """Provider ID → machine name, for every VM of the class."""

    machine_list: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GetVolumeIDsRequest:
    """Map core/v1 ``PersistentVolumeSpec`` objects (plain JSON dicts) to provider volume IDs."""

    pv_specs: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class GetVolumeIDsResponse:
    """The provider volume IDs of the specs the driver recognised (others are left out)."""

    volume_ids: tuple[str, ...] = ()


class Driver(abc.ABC):
    """A provider's VM operations. Implementations must be safe to call from several threads."""

    @abc.abstractmethod
    def create_machine(self, ctx: CallContext, request: CreateMachineRequest) -> CreateMachineResponse:
        """Create the VM backing the machine, or return the one that already exists."""

    def initialize_machine(
        self, ctx: CallContext, request: InitializeMachineRequest
    ) -> InitializeMachineResponse:
        """Initialise a created VM. The default raises ``Unimplemented`` (nothing to do)."""
        raise MachineError(Code.Unimplemented, "the driver does not implement InitializeMachine")

    @abc.abstractmethod
    def delete_machine(self, ctx: CallContext, request: DeleteMachineRequest) -> DeleteMachineResponse:
        """Delete the VM backing the machine; succeed if it does not exist."""

    @abc.abstractmethod
    def get_machine_status(
        self, ctx: CallContext, request: GetMachineStatusRequest
    ) -> GetMachineStatusResponse:
        """Report the VM backing the machine; ``NotFound`` if there is none."""

    @abc.abstractmethod
    def list_machines(self, ctx: CallContext, request: ListMachinesRequest) -> ListMachinesResponse:
        """List the VMs of the class: provider ID → machine name."""

    @abc.abstractmethod
    def get_volume_ids(self, ctx: CallContext, request: GetVolumeIDsRequest) -> GetVolumeIDsResponse:
        """Return the provider volume IDs for the given persistent volume specs."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections or other resources; the default does nothing."""
