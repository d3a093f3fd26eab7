"""A pytest plugin: while the example tests run on the CPU, also compile every kernel they launch
for the NVIDIA backend (sm_90a by default) and record the outcome per specialization.

    ANVIL_PTX_RECORD=out.json python -m pytest -p ptx_plugin tests/examples   (tests/examples on sys.path)
"""

from __future__ import annotations

import json
import os
from typing import Any

import compiler.runtime.launch as _launch

_ARCH = os.environ.get("ANVIL_PTX_ARCH", "sm_90a")
_orig = _launch.compile_kernel
_seen: dict[str, dict[str, Any]] = {}


def _compile_both(fn: Any, specs: list[Any], opts: Any, target: str) -> Any:
    ck = _orig(fn, specs, opts, target)
    if target == "cpu":
        key = f"{fn.__name__}{[(s.name, str(getattr(s, 'type', '')), repr(getattr(s, 'value', ''))) for s in specs]}"
        if key not in _seen:
            try:
                g = _orig(fn, specs, opts, f"cuda:{_ARCH}")
                ok = g.asm["cubin"][:4] == b"\x7fELF"
                _seen[key] = {"kernel": fn.__name__, "ok": ok, "error": "" if ok else "no cubin",
                              "spills": g.metadata["n_spills"]}
            except Exception as e:  # noqa: BLE001 - recorded and reported by the test
                _seen[key] = {"kernel": fn.__name__, "ok": False, "error": f"{type(e).__name__}: {e}"}
    return ck


_launch.compile_kernel = _compile_both


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    path = os.environ.get("ANVIL_PTX_RECORD")
    if path:
        with open(path, "w") as f:
            json.dump(list(_seen.values()), f)
