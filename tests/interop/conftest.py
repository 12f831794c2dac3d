"""The interop tier: mcm beside upstream v0.47.0's Go binaries (``hack/upstream-mcm.sh`` builds
them). Without them every test here is skipped, reported as one line; under ``CI=true`` with
Go installed they are required (``hack/test.sh`` builds them first)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from .env import InteropEnv, Upstream, missing, upstream_paths

SKIPPED = "interop tier skipped"


@pytest.fixture(scope="session")
def upstream() -> Upstream:
    paths = upstream_paths()
    reason = missing(paths)
    if reason is None:
        return paths
    if os.environ.get("CI") == "true" and shutil.which("go") is not None:
        pytest.fail(f"interop tier required under CI=true with Go installed: {reason}", pytrace=False)
    pytest.skip(f"{SKIPPED}: {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Report every skip of this tier at one place, so ``-ra`` shows it as one line."""
    report = yield
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and str(longrepr[2]).startswith(f"Skipped: {SKIPPED}"):
        report.longrepr = (__file__, 1, longrepr[2])
    return report


@pytest.fixture
def env(tmp_path: Path, upstream: Upstream) -> Iterator[InteropEnv]:
    environment = InteropEnv(tmp_path, upstream)
    try:
        yield environment
    finally:
        environment.close()
