"""What a worker does before it reports ready: the tool path once, on a tiny kernel.

The first compile in a process pays for importing the compiler, initialising LLVM and its
target, and Python's first pass through every module on the way; the first launch on a GPU
pays for the driver and the context. A worker does all of that at start-up, through the same
job functions the tools call, so that the first call a client makes costs what any call does.
The disk cache is bypassed for the warm-up compile (a cached kernel would skip LLVM), and
nothing is written to it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tools.compile import compiler_version, run_compile_job
from tools.executor import WorkerState, device_for
from tools.launch_job import run_launch_job
from tools.store import CompileSpec

WARM_KERNEL = """\
import triton
import triton.language as tl


@triton.jit
def warm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)
"""
_N = 100
_SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@contextmanager
def _no_disk_cache() -> Iterator[None]:
    saved = os.environ.get("ANVIL_CACHE")
    os.environ["ANVIL_CACHE"] = "0"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("ANVIL_CACHE", None)
        else:
            os.environ["ANVIL_CACHE"] = saved


def _spec(target: str) -> dict[str, object]:
    return CompileSpec(source=WARM_KERNEL, kernel_name=None, signature=dict(_SIGNATURE), hints={},
                       constexprs={"BLOCK": 64}, target=target, compiler_version=compiler_version()).to_dict()


def _launch_payload(target: str, device: str) -> dict[str, Any]:
    kernel = {
        "kernel_id": "warm-up", "source": WARM_KERNEL, "kernel_name": "warm_kernel",
        "arg_names": ["x_ptr", "out_ptr", "n", "BLOCK"], "constexpr_names": ["BLOCK"], "signature": dict(_SIGNATURE),
        "constexprs": {"BLOCK": 64}, "target": target, "num_warps": None, "num_stages": None, "maxnreg": None,
        "cluster_dims": None, "debug": False,
    }
    return {
        "kernel": kernel,
        "grid": [2],
        "args": {"x_ptr": {"shape": [_N], "dtype": "float32", "init": "randn", "seed": 0},
                 "out_ptr": {"shape": [_N], "dtype": "float32", "init": "empty"}, "n": _N},
        "references": {"out_ptr": "x_ptr * 2.0 + 1.0"},
        "outputs": ["out_ptr"],
        "atol": None,
        "rtol": None,
        "device": device,
        "max_reference_elements": 1 << 20,
        "max_reference_bytes": 1 << 24,
    }


def warm_up(state: WorkerState, targets: list[str], *, launch: bool) -> float:
    """Compile the warm-up kernel for each target as compile_kernel does, or with ``launch``, launch and
    check it on this worker's device as launch_kernel does; return the milliseconds spent."""
    start = time.perf_counter()
    with _no_disk_cache():
        for target in targets:
            if not launch:
                run_compile_job(_spec(target), state, lambda *_: None)
            elif device_for(target) == state.device:
                result = run_launch_job(_launch_payload(target, state.device), state, lambda *_: None)
                if not result["passed"]:
                    raise RuntimeError(f"the warm-up kernel failed its check on {state.device}: {result['summary']}")
                state.jit_cache.pop("warm-up", None)
    return (time.perf_counter() - start) * 1e3
