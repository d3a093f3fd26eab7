"""device_info: the CPU and GPUs, their measured ceilings, available backends, versions.

Ceilings (copy bandwidth, dense matmul rate) are measured once per worker, in the worker of the
device, and cached: benchmark reports its results as a percentage of them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import torch

from tools.models import DeviceEntry, DeviceInfo
from tools.runtime import Progress, Report, Runtime, WorkerState, gpu_available, noop_progress, resolve_target

_VERSIONED = ("anvil", "torch", "llvmlite", "numpy", "pydantic", "fastmcp", "mcp", "cuda-bindings", "triton")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if torch.version.cuda:
        found["cuda (torch)"] = str(torch.version.cuda)
    return found


def _backend_present(module: str) -> bool:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None  # a bare namespace directory does not count


def backends() -> list[str]:
    found = ["cpu"] if _backend_present("compiler.backends.cpu") or _backend_present("compiler") else []
    if gpu_available() and _backend_present("compiler.backends.nvidia"):
        found.append("cuda")
    return found


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


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
            name=_cpu_name(),
            arch=platform.machine(),
            cores=os.cpu_count(),
            memory_bytes=_memory_bytes(),
            **ceilings,
        )
    entry.protections = state.protections or None
    return entry.model_dump() | {"backends": backends(), "versions": versions(), "executable": sys.executable}


async def device_info(rt: Runtime, progress: Progress | None = None) -> DeviceInfo:
    """The device_info tool (measured once per server, then cached)."""
    progress = progress or noop_progress
    cached = rt.device_info_cache.get("info")
    if cached is not None:
        return DeviceInfo.model_validate(cached)
    devices = ["cpu"] + ([f"cuda:{i}" for i in range(torch.cuda.device_count())] if gpu_available() else [])
    entries: list[DeviceEntry] = []
    extra: dict[str, Any] = {}
    for i, device in enumerate(devices):
        await progress(i, len(devices), f"measuring {device}")
        out = await rt.executor.run(device, "device", {"measure": True}, timeout=120.0, progress=None)
        backends_and_versions = {"backends": out.pop("backends"), "versions": out.pop("versions")}
        extra = extra or backends_and_versions
        out.pop("executable", None)
        entries.append(DeviceEntry.model_validate(out))
    default = resolve_target("auto")
    parts = [
        f"{e.kind}:{e.index} {e.name}"
        + (f" ({e.copy_gbps:.0f} GB/s copy, {e.matmul_tflops:.2f} TFLOP/s {e.matmul_dtype})" if e.copy_gbps else "")
        for e in entries
    ]
    info = DeviceInfo(
        devices=entries,
        backends=extra.get("backends", []),
        default_target=default,
        versions=extra.get("versions", {}),
        limits=rt.limits.to_dict(),
        summary=f"target 'auto' = {default}; " + "; ".join(parts),
    )
    rt.device_info_cache["info"] = info.model_dump()
    return info
