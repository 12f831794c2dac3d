"""The FakeDriver, in process and served over gRPC, passes the driver conformance kit."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from mcm.driver import FakeDriver
from mcm.driver.grpc import GrpcDriver, serve
from mcm.testing.driver_conformance import (
    ConformanceCase,
    ConformanceHarness,
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


def test_harness_waits_for_a_settling_cloud_and_then_gives_up() -> None:
    case = replace(_case(FakeDriver()), settle_timeout=5.0, poll_interval=0.001)
    attempts: list[int] = []

    def settles_on_third_look() -> None:
        attempts.append(1)
        assert len(attempts) >= 3, "not yet"

    ConformanceHarness(case).eventually(settles_on_third_look)
    assert len(attempts) == 3

    def never() -> None:
        raise AssertionError("still not there")

    impatient = ConformanceHarness(replace(case, settle_timeout=0.0))
    with pytest.raises(AssertionError, match="still not there"):
        impatient.eventually(never)


def test_harness_fails_on_exceptions_that_are_not_machine_errors() -> None:
    harness = ConformanceHarness(_case(FakeDriver()))

    def boom(ctx: object) -> None:
        raise KeyError("vm")

    with pytest.raises(pytest.fail.Exception, match="drivers must raise MachineError"):
        harness.call(boom)
