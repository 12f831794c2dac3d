"""The FakeDriver, in process and served over gRPC, passes the driver conformance kit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcm.driver import FakeDriver
from mcm.driver.grpc import GrpcDriver, serve
from mcm.testing.driver_conformance import (
    ConformanceCase,
    DriverConformanceSuite,
    sample_machine,
    sample_machine_class,
)


def _case(driver: FakeDriver | GrpcDriver) -> ConformanceCase:
    return ConformanceCase(driver, sample_machine(), sample_machine_class(), {"userData": b"#!/bin/sh"}, 10.0)


class TestFakeDriverConformance(DriverConformanceSuite):
    @pytest.fixture
    def driver_conformance_case(self) -> ConformanceCase:
        return _case(FakeDriver())


class TestInitializingFakeDriverConformance(DriverConformanceSuite):
    @pytest.fixture
    def driver_conformance_case(self) -> ConformanceCase:
        return _case(FakeDriver(initialization=True))


class TestGrpcServedFakeDriverConformance(DriverConformanceSuite):
    @pytest.fixture
    def driver_conformance_case(self) -> Iterator[ConformanceCase]:
        with serve(FakeDriver(initialization=True), "127.0.0.1:0") as server:
            with GrpcDriver(server.endpoint, timeout=10.0) as client:
                yield _case(client)
