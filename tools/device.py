"""device_info: the CPU and GPUs, their measured ceilings, available backends, versions.

Ceilings (copy bandwidth, dense matmul rate) are measured in the worker of the device once per
machine: the server keeps each device's description in ``<state dir>/devices.json`` under a key
of everything that would change it (host, CPU, memory, driver, boards, torch and Anvil versions),
so device_info and benchmark (which reports results as a percentage of the ceilings) read them
from there afterwards. Workers cannot write to that directory. The measuring is the "device"
job in the device worker (tools/device_job.py).
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tools.compile import compiler_version
from tools.executor import Progress, gpu_available, noop_progress, resolve_target
from tools.models import DeviceEntry, DeviceInfo, TargetEntry

if TYPE_CHECKING:
    from tools.runtime import Runtime

_VERSIONED = ("anvil", "torch", "llvmlite", "numpy", "pydantic", "fastmcp", "mcp", "cuda-bindings", "triton")


def _torch() -> ModuleType:
    """torch, for what only it knows about this host (its CUDA build, the GPUs it sees): imported on first
    use, since the server process starts without it (server/app.py imports it in the background)."""
    # deferred: start-up cost: torch (about 2 s), which the server process needs only for these facts
    import torch

    return torch


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    torch = _torch()
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


def compile_targets() -> list[TargetEntry]:
    """Every target the compiler compiles for, with whether it has run on hardware: the CPU (CI runs
    it), then the NVIDIA table (compiler/backends/nvidia_targets.py, read without importing the
    backend), then AMD Instinct. Compiling for a GPU target needs ptxas or ld.lld, not a GPU."""
    # deferred: start-up cost: importing it runs compiler/__init__ (the whole compiler, about 0.2 s)
    from compiler.backends.nvidia_targets import describe_targets

    cpu = TargetEntry(target="cpu", family=f"this machine's CPU ({platform.machine()}), native code through LLVM",
                      verified_on_hardware=True, verified_on=platform.machine())
    amd = [TargetEntry(target=f"amd:{arch}", family=family, verified_on_hardware=False)
           for arch, family in (("gfx942", "AMD Instinct MI300 / MI325 (CDNA 3)"),
                                ("gfx950", "AMD Instinct MI350 / MI355 (CDNA 4)"))]
    return [cpu] + [TargetEntry.model_validate({k: row[k] for k in TargetEntry.model_fields if k in row})
                    for row in describe_targets()] + amd


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


# --- in the server: described once per machine, kept on disk -----------------------------------------------

_CACHE_FILE = "devices.json"
_MAX_CACHE_BYTES = 1 << 20


def _read_text(path: str, limit: int = 1 << 16) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""


def machine_key(device: str) -> str:
    """What identifies a device's description and ceilings on this machine: the host, its CPU and memory,
    the torch and Anvil versions, and for GPUs the driver and the boards it reports (read from /proc,
    without touching the driver). A change in any of them measures again."""
    torch = _torch()
    parts = [device, platform.node(), cpu_name(), str(os.cpu_count()), str(host_memory_bytes()), torch.__version__,
             compiler_version(), sys.version.split()[0]]
    if device != "cpu":
        parts += [_read_text("/proc/driver/nvidia/version"), os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                  str(torch.version.cuda), str(getattr(torch.version, "hip", ""))]
        for board in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
            parts.append(_read_text(board))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _load_cache(state_dir: Path | None) -> dict[str, Any]:
    if state_dir is None:
        return {}
    path = state_dir / _CACHE_FILE
    try:
        if path.stat().st_size > _MAX_CACHE_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _store_cache(state_dir: Path | None, key: str, entry: dict[str, Any]) -> None:
    """Add one device's description to the cache file (written whole, then renamed into place)."""
    if state_dir is None:
        return
    data = _load_cache(state_dir)
    data[key] = entry
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        tmp = state_dir / f"{_CACHE_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        tmp.replace(state_dir / _CACHE_FILE)
    except OSError:
        pass  # an unwritable directory costs a measurement per server, nothing else


def _cached_entry(rt: Runtime, device: str) -> DeviceEntry | None:
    raw = _load_cache(rt.state_dir).get(machine_key(device))
    if not isinstance(raw, dict):
        return None
    try:
        entry = DeviceEntry.model_validate(raw)
    except ValueError:
        return None
    return entry if entry.copy_gbps and entry.matmul_tflops else None


async def describe_device(rt: Runtime, device: str, progress: Progress | None = None) -> DeviceEntry:
    """The device's description with its measured ceilings: from memory, from the disk cache, or measured
    now by the device's worker (once per machine; minutes of a benchmark never go to it again)."""
    known = rt.device_info_cache.get(device)
    if known is not None:
        return DeviceEntry.model_validate(known)
    entry = _cached_entry(rt, device)
    if entry is None:
        if progress is not None:
            await progress(0, 1, f"measuring {device}: copy bandwidth and matmul rate (once per machine)")
        out = await rt.executor.run(device, "device", {"measure": True}, timeout=120.0, progress=None)
        entry = DeviceEntry.model_validate({k: v for k, v in out.items() if k in DeviceEntry.model_fields})
        _store_cache(rt.state_dir, machine_key(device), entry.model_dump(exclude={"protections"}))
    rt.device_info_cache[device] = entry.model_dump(exclude={"protections"})
    return entry


def device_ceilings(entry: DeviceEntry) -> dict[str, Any]:
    """The measured peaks benchmark reports against."""
    return {"copy_gbps": entry.copy_gbps, "matmul_tflops": entry.matmul_tflops, "matmul_dtype": entry.matmul_dtype}


async def device_info(rt: Runtime, progress: Progress | None = None) -> DeviceInfo:
    """The device_info tool: each device described and measured once per machine (then read from
    ``rt.state_dir``), what confines its worker (once that worker has started), backends, versions and
    limits."""
    progress = progress or noop_progress
    cached = rt.device_info_cache.get("info")
    if cached is not None:
        return DeviceInfo.model_validate(cached)
    devices = ["cpu"] + ([f"cuda:{i}" for i in range(_torch().cuda.device_count())] if gpu_available() else [])
    entries: list[DeviceEntry] = []
    protections_of = getattr(rt.executor, "protections", None)
    for device in devices:
        entry = await describe_device(rt, device, progress)
        entry.protections = protections_of(device) if protections_of is not None else None
        entries.append(entry)
    default = resolve_target("auto")
    parts = [
        f"{e.kind}:{e.index} {e.name}"
        + (f" ({e.copy_gbps:.0f} GB/s copy, {e.matmul_tflops:.2f} TFLOP/s {e.matmul_dtype})" if e.copy_gbps else "")
        for e in entries
    ]
    info = DeviceInfo(
        devices=entries,
        backends=backends(),
        targets=compile_targets(),
        default_target=default,
        versions=versions(),
        limits=rt.limits.to_dict(),
        summary=f"target 'auto' = {default}; " + "; ".join(parts),
    )
    if protections_of is None or all(e.protections for e in entries):  # else: ask the workers again next time
        rt.device_info_cache["info"] = info.model_dump()
    return info
