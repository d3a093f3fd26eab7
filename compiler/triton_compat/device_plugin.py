"""`--device` and the `device` fixture, for running a Triton test file without its conftest.py."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--device", action="store", default="cpu")


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--device"))
