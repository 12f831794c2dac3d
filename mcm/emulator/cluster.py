"""Two clusters side by side: ``control`` (Machines, classes, secrets, leases) and ``target``
(nodes, pods, volumes, PDBs), each with its own kubeconfig (docs/emulator.md).

Guarantees:

- ``ClusterPair.start(dir)`` runs two independent emulators on kernel-chosen loopback ports,
  installs the MCM CRDs into ``control`` (waiting for Established) and writes
  ``control.kubeconfig`` and ``target.kubeconfig`` into ``dir``.
- ``ClusterPair.single(dir)`` runs one emulator that plays both roles; both files point at it.
- ``in_process=False`` runs each emulator as ``python -m mcm.emulator serve`` in its own process
  (off the GIL of the code under test); ``control``/``target`` are then
  :class:`~mcm.emulator.admin.RemoteEmulator` handles with the same control methods. With
  ``request_logs=True`` each writes its request log to ``dir/<name>.requests.jsonl``.
- ``close()`` (or leaving the ``with`` block) stops every emulator it started.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from mcm import packaged
from mcm.emulator.emulator import Emulator
from mcm.emulator.process import EmulatorProcess, spawn

__all__ = ["ClusterPair", "default_crd_dir"]


def default_crd_dir() -> Path:
    """The machine.sapcloud.io CRDs shipped in the package (``mcm/apis/machine/crds``)."""
    return packaged.machine_crds()


class ClusterPair:
    """A control and a target emulator with kubeconfig files."""

    def __init__(
        self,
        control: Any,
        target: Any,
        control_kubeconfig: Path,
        target_kubeconfig: Path,
        processes: list[EmulatorProcess] | None = None,
    ) -> None:
        self.control = control
        """The control cluster: an :class:`Emulator` (in process) or a ``RemoteEmulator``."""
        self.target = target
        """The target cluster (the same object as ``control`` for :meth:`single`)."""
        self.control_kubeconfig = control_kubeconfig
        self.target_kubeconfig = target_kubeconfig
        self.processes = processes or []

    @classmethod
    def start(
        cls,
        directory: str | Path,
        *,
        tls: bool = False,
        crds: str | Path | None = None,
        namespace: str | None = None,
        in_process: bool = True,
        request_logs: bool = False,
        **options: Any,
    ) -> ClusterPair:
        """Start ``control`` and ``target``; install the MCM CRDs into ``control``."""
        target_dir = Path(directory)
        if not in_process:
            return cls._start_processes(target_dir, tls=tls, crds=crds, request_logs=request_logs)
        control = Emulator(
            name="control", tls=tls, tls_dir=target_dir / "control-tls" if tls else None, **options
        )
        target = Emulator(
            name="target", tls=tls, tls_dir=target_dir / "target-tls" if tls else None, **options
        )
        control.start()
        try:
            target.start()
            _install(control, crds)
            control_path = control.write_kubeconfig(target_dir / "control.kubeconfig", namespace=namespace)
            target_path = target.write_kubeconfig(target_dir / "target.kubeconfig")
        except BaseException:
            control.close()
            target.close()
            raise
        return cls(control, target, control_path, target_path)

    @classmethod
    def single(
        cls,
        directory: str | Path,
        *,
        tls: bool = False,
        crds: str | Path | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> ClusterPair:
        """One emulator in both roles; both kubeconfig files point at it."""
        target_dir = Path(directory)
        emulator = Emulator(name="cluster", tls=tls, tls_dir=target_dir / "tls" if tls else None, **options)
        emulator.start()
        try:
            _install(emulator, crds)
            control_path = emulator.write_kubeconfig(target_dir / "control.kubeconfig", namespace=namespace)
            target_path = emulator.write_kubeconfig(target_dir / "target.kubeconfig")
        except BaseException:
            emulator.close()
            raise
        return cls(emulator, emulator, control_path, target_path)

    @classmethod
    def _start_processes(
        cls, directory: Path, *, tls: bool, crds: str | Path | None, request_logs: bool
    ) -> ClusterPair:
        crd_dir = Path(crds) if crds is not None else default_crd_dir()

        def log(name: str) -> Path | None:
            return directory / f"{name}.requests.jsonl" if request_logs else None

        control = spawn(
            directory,
            "control",
            tls=tls,
            crds=crd_dir if crd_dir.is_dir() else None,
            request_log=log("control"),
        )
        try:
            target = spawn(directory, "target", tls=tls, request_log=log("target"))
        except BaseException:
            control.close()
            raise
        return cls(control.remote, target.remote, control.kubeconfig, target.kubeconfig, [control, target])

    def close(self) -> None:
        """Stop the emulators."""
        if self.processes:
            for process in self.processes:
                process.close()
            return
        self.control.close()
        if self.target is not self.control:
            self.target.close()

    def __enter__(self) -> ClusterPair:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _install(emulator: Emulator, crds: str | Path | None) -> None:
    directory = Path(crds) if crds is not None else default_crd_dir()
    files = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
    if files:
        emulator.install_crds(files)
