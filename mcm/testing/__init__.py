"""mcm.testing: tools for testing mcm and provider drivers; the one package that may import
:mod:`mcm.emulator` (tests and benchmarks outside the package may too).

Where to start:

- :mod:`mcm.testing.driver_conformance`: a pytest plugin a provider repository runs against its
  driver (``ConformanceCase`` and ``DriverConformanceSuite``; ``docs/driver.md`` states the rules).
- For a cluster without a cluster, use :class:`mcm.emulator.ClusterPair` (control and target
  API server emulators, in process or as subprocesses) from :mod:`mcm.emulator`; for a real one,
  :mod:`mcm.testing.envtest` (``python -m mcm.testing.envtest build`` builds it with Go).
- :mod:`mcm.testing.nodesim`: kubelets for VMs that do not boot, registering Nodes for a
  driver's VMs in the target cluster.
"""

try:
    import pytest
except ImportError:  # pytest is only needed by the conformance kit
    pass
else:
    # A provider's conftest imports the kit before pytest reads its pytest_plugins: registering
    # it here (the package is imported first) lets pytest rewrite its asserts, so the suite's
    # failures explain themselves and no PytestAssertRewriteWarning appears.
    pytest.register_assert_rewrite("mcm.testing.driver_conformance")
