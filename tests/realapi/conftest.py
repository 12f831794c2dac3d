"""The real-API tier (marker ``realapi``): every test here runs on the shared real control pair
(``real_pair`` in ``tests/conftest.py``), on one xdist worker (``--dist loadgroup``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.controller import ControllerOptions
from mcm.testing.envtest import ControlPlanePair
from tests.realapi.env import RealEnv


@pytest.fixture
def pair(real_pair: ControlPlanePair) -> ControlPlanePair:
    return real_pair


@pytest.fixture
def env(pair: ControlPlanePair) -> Iterator[RealEnv]:
    environment = RealEnv(pair)
    try:
        yield environment
    finally:
        environment.close()


def make_env(pair: ControlPlanePair, **options: object) -> RealEnv:
    """A RealEnv whose ControllerOptions take ``options`` (its namespace is filled in)."""
    environment = RealEnv(pair)
    environment.options = ControllerOptions(namespace=environment.ns, **options)  # type: ignore[arg-type]
    return environment
