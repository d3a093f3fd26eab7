"""device_info's job in a device worker: describe the device and measure its ceilings (copy bandwidth,
dense matmul rate). The server keeps what it returns on disk (tools/device.py).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from tools.device import backends, cpu_name, host_memory_bytes, versions
from tools.executor import Report, WorkerState
from tools.models import DeviceEntry


def _median_seconds(fn: Callable[[], None], device: str, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_ceilings(state: WorkerState) -> dict[str, Any]:
    """Copy bandwidth (read + write bytes / s) and matmul rate, measured once per worker."""
    if state.ceilings:
        return state.ceilings
    device = state.device
    gpu = device.startswith("cuda")
    n = (256 << 20) // 4 if gpu else (64 << 20) // 4
    src = torch.ones(n, device=device)
    dst = torch.empty_like(src)

    def copy() -> None:
        dst.copy_(src)

    seconds = _median_seconds(copy, device, 10 if gpu else 5)
    copy_gbps = 2 * src.nbytes / seconds / 1e9
    size, dtype = (8192, torch.bfloat16) if gpu else (1024, torch.float32)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)

    def matmul() -> None:
        torch.mm(a, b)

    seconds = _median_seconds(matmul, device, 5 if gpu else 3)
    state.ceilings = {
        "copy_gbps": round(copy_gbps, 2),
        "matmul_tflops": round(2 * size**3 / seconds / 1e12, 4),
        "matmul_dtype": str(dtype).removeprefix("torch."),
    }
    return state.ceilings


def run_device_job(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    """Describe this worker's device and measure its ceilings; return a DeviceEntry dict."""
    report(0, 1, f"measuring {state.device}")
    ceilings = measure_ceilings(state) if payload.get("measure", True) else {}
    if state.device.startswith("cuda"):
        index = int(state.device.split(":")[1]) if ":" in state.device else 0
        props = torch.cuda.get_device_properties(index)
        kind: Literal["cuda", "rocm"] = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        arch = getattr(props, "gcnArchName", None) if kind == "rocm" else f"sm_{props.major}{props.minor}"
        entry = DeviceEntry(
            kind=kind,
            index=index,
            name=props.name,
            arch=arch,
            cores=props.multi_processor_count,
            memory_bytes=props.total_memory,
            **ceilings,
        )
    else:
        entry = DeviceEntry(
            kind="cpu",
            name=cpu_name(),
            arch=platform.machine(),
            cores=os.cpu_count(),
            memory_bytes=host_memory_bytes(),
            **ceilings,
        )
    entry.protections = state.protections or None
    return entry.model_dump() | {"backends": backends(), "versions": versions(), "executable": sys.executable}
