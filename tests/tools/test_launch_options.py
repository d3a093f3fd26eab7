"""How the device worker launches a kernel: bounds-checked unless told otherwise, on every target."""

from __future__ import annotations

from typing import Any

from compiler.runtime.specialize import LaunchOptions
from tools.launch_job import launch_options


def _kernel(**extra: Any) -> dict[str, Any]:
    return {"constexprs": {"BLOCK": 64}, "num_warps": 8, "num_stages": None, "maxnreg": None,
            "cluster_dims": None, "target": "cuda", **extra}  # fmt: skip


def test_tool_launches_are_checked_by_default() -> None:
    options = launch_options(_kernel(debug=False))
    assert options == {"BLOCK": 64, "num_warps": 8, "debug": False, "bounds_check": True}
    assert LaunchOptions.from_kwargs({k: v for k, v in options.items() if k != "BLOCK"}, None).checked


def test_debug_is_passed_and_timed_runs_can_go_unchecked() -> None:
    assert launch_options(_kernel(debug=True))["debug"] is True
    unchecked = launch_options(_kernel(debug=False), checked=False)
    assert "bounds_check" not in unchecked
    assert not LaunchOptions.from_kwargs({"debug": False}, None).checked
    assert LaunchOptions.from_kwargs({"debug": True}, None).checked
    assert LaunchOptions(bounds_check=True) != LaunchOptions()  # part of the compile cache key (its repr)
