"""Differential tests: skipped cleanly where Triton (3.x, with a working interpreter) is absent."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest


def _why_not() -> str:
    """Why Triton's interpreter cannot run here ("" when it can)."""
    # Only look: importing triton here would fix its mode before TRITON_INTERPRET is set.
    if importlib.util.find_spec("triton") is None:
        return "differential tests need Triton 3.x (pip install 'anvil[dev]')"
    try:
        major, minor = (int(p) for p in importlib.metadata.version("numpy").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return ""
    if (major, minor) >= (2, 4):
        return "Triton 3.6's interpreter needs numpy < 2.4"
    return ""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    why = _why_not()
    if not why:
        return
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if "differential" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def diff_selected(request: pytest.FixtureRequest) -> list[str]:
    """Names of the differential cases of every selected test, in the order they will run."""
    names = []
    for item in request.session.items:
        cs = getattr(item, "callspec", None)
        if cs is not None and "case" in cs.params and hasattr(cs.params["case"], "source"):
            names.append(cs.params["case"].name)
    return names
