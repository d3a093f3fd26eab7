"""`triton.runtime.driver`: the active "device" is this machine's CPU.

Code written for Triton asks the driver for the current target, device and its properties
(`driver.active.get_current_target().backend`, `driver.active.utils.get_device_properties(dev)`);
these answers describe the CPU backend so such code takes its generic path.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from typing import Any

import torch

from ... import knobs

__all__ = ["driver", "GPUTarget", "CPUDriver", "CPUDeviceInterface"]


@dataclass(frozen=True)
class GPUTarget:
    """Triton's target triple: backend name, architecture and warp size."""

    backend: str
    arch: Any
    warp_size: int


class _Event:
    """A CUDA-event look-alike timed with perf_counter (work on the CPU is synchronous)."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _Event) -> float:
        if self.t is None or end.t is None:
            raise RuntimeError("both events must be recorded before elapsed_time")
        return (end.t - self.t) * 1e3


class CPUDeviceInterface:
    """What `driver.active.get_device_interface()` returns: torch.cuda's shape, for the CPU."""

    Event = _Event

    @staticmethod
    def synchronize(device: Any = None) -> None:
        pass

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def current_stream(device: Any = None) -> int:
        return 0


def _l2_bytes() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index2/size") as f:
            v = f.read().strip()
        mult = {"K": 1 << 10, "M": 1 << 20}.get(v[-1:], 1)
        return int(v.rstrip("KM")) * mult
    except (OSError, ValueError):
        return 1 << 20


class _Utils:
    @staticmethod
    def get_device_properties(device: Any = None) -> dict[str, Any]:
        """Numbers in the shape of CUDA's; "multiprocessor_count" is the number of CPU threads."""
        return {
            "max_shared_mem": _l2_bytes(),
            "max_num_regs": 1 << 16,
            "multiprocessor_count": knobs.cpu_threads(),
            "warpSize": 1,
            "sm_clock_rate": 0,
            "mem_clock_rate": 0,
            "mem_bus_width": 0,
        }


class CPUDriver:
    """`triton.runtime.driver.active` for the CPU backend."""

    def __init__(self) -> None:
        self.utils = _Utils()
        self.backend = "cpu"

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cpu", platform.machine() or "cpu", 1)

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: Any) -> None:
        pass

    def get_current_stream(self, device: Any = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        return torch.device("cpu")

    def get_device_interface(self) -> CPUDeviceInterface:
        return CPUDeviceInterface()

    def get_benchmarker(self) -> Any:
        # deferred: start-up cost: triton.testing (statistics, decimal) loads on first use, as in __init__
        from ..testing import do_bench

        return do_bench

    def get_empty_cache_for_benchmark(self) -> Any:
        return torch.empty(max(_l2_bytes() * 2, 1 << 22) // 4, dtype=torch.int32)

    def clear_cache(self, cache: Any) -> None:
        cache.zero_()

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty


class _DriverConfig:
    """`triton.runtime.driver`: `.active` is the CPU driver; `set_active` is accepted and ignored."""

    def __init__(self) -> None:
        self._active: Any = None
        self.default = None

    @property
    def active(self) -> CPUDriver:
        if self._active is None:
            self._active = CPUDriver()
        return self._active

    def set_active(self, driver: Any) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = None

    # triton-cpu's driver switches between the CPU and a GPU; here the CPU is the only device.
    def set_active_to_cpu(self) -> None:
        self._active = None

    def set_active_to_gpu(self) -> None:
        raise RuntimeError("Anvil's triton stand-in has only the CPU driver")

    def get_active_gpus(self) -> list[Any]:
        return []


driver = _DriverConfig()
_ = os
