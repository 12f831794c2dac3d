"""Conformance suite options: ``--apiserver=emulator`` (default) or ``--apiserver=kubeconfig:<path>``
(also env ``CONFORMANCE_KUBECONFIG``), and the suite's markers."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--apiserver",
        default="emulator",
        help="API server under test: 'emulator' (a fresh in-process emulator) or 'kubeconfig:<path>'",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "emulator_only: needs emulator controls; skipped against a real server"
    )
    config.addinivalue_line("markers", "needs_controllers: needs kube-controller-manager on a real server")
