"""mcm.testing: tools for testing mcm and provider drivers; the one package that may import
:mod:`mcm.emulator` (tests and benchmarks outside the package may too).

Where to start:

- :mod:`mcm.testing.driver_conformance`: a pytest plugin a provider repository runs against its
  driver (``ConformanceCase`` and ``DriverConformanceSuite``; ``docs/driver.md`` states the rules).
- For a cluster without a cluster, use :class:`mcm.emulator.ClusterPair` (control and target
  API server emulators, in process or as subprocesses) from :mod:`mcm.emulator`.
"""
