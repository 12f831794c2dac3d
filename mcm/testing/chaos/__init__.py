"""The chaos suite: a real ``machine-controller`` (and ``machine-controller-manager``) under
faults, and invariants that must hold.

Where to start: :mod:`.run` (``run_profile``, the report), :mod:`.scenarios` (the faults),
:mod:`.invariants` (what must hold), :mod:`.harness` (processes and fault switches),
:mod:`.world` (clusters, proxies, kubelets, owner), :mod:`.tracker` (what happened),
:mod:`.bystander` (another writer), :mod:`.cloud` (the driver and its faults),
:mod:`.pool` (``machine-controller-manager`` and a MachineDeployment under faults) and
:mod:`.rollout` (what must hold of the pool).
``python -m mcm.testing.chaos --minutes N [--seed S]`` (``hack/chaos.sh``) runs a long profile;
``tests/chaos`` runs the short one in CI. ``docs/reliability.md`` explains the suite.
"""
