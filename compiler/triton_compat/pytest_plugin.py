"""A pytest plugin that runs Triton test suites on Anvil.

    pytest -p compiler.triton_compat.pytest_plugin --device=cpu test_core.py

Importing it installs the `triton` stand-in, before any test module (or conftest) imports
triton. It also registers the markers Triton's suites use, and with `--anvil-test-timeout=S`
ends a test that runs longer than S seconds by dumping its stack and exiting the worker (a
kernel spinning in native code cannot be interrupted any other way).
"""

from __future__ import annotations

import faulthandler
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from . import install

install()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--anvil-test-timeout", action="store", type=float, default=0.0,
                     help="seconds a single test may run before its worker process is ended (0: no limit)")


def pytest_configure(config: pytest.Config) -> None:
    for marker in ("interpreter: runs under Triton's interpreter", "cpu: supported on the CPU backend",
                   "gpu: needs a GPU"):
        config.addinivalue_line("markers", marker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    timeout = float(item.config.getoption("--anvil-test-timeout") or 0)
    if timeout > 0:
        faulthandler.dump_traceback_later(timeout, exit=True, file=sys.stderr)
    try:
        yield
    finally:
        if timeout > 0:
            faulthandler.cancel_dump_traceback_later()
