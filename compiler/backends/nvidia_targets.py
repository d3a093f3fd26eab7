"""The NVIDIA architectures the backend compiles for, and what each one gets.

It lives beside registry.py, not in nvidia/, for the same reason the registry knows each backend's
device: device_info and the tools read it without importing the backend (whose import starts
LLVM's initialisation and loads the assembler).

One table: every arch check of the backend reads a field of a `NvTarget` instead of comparing
arch names, so `sm_100a` never orders before `sm_90a` as the strings do, and an architecture
the table does not hold is refused with an ArgumentError before LLVM sees it (LLVM's NVPTX
target aborts the whole process on an architecture its PTX version cannot express).

The PTX ISA version of a target is the lowest that ptxas 13.0 assembles for it (each checked by
assembling an empty kernel with the version below it, which ptxas refuses), raised to 8.4 from
sm_89 on, where fp8 `mma.sync` needs it. `verified_on` names the GPU the tests under tests/gpu
ran on; the other targets are compiled and assembled by ptxas in CI (tests/compiler) but have
not run on their hardware. docs/targets.md describes what each target gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError

__all__ = ["NvTarget", "NV_TARGETS", "nv_target", "arch_number", "describe_targets"]


@dataclass(frozen=True)
class NvTarget:
    arch: str  # the ptxas / LLVM name, e.g. "sm_100a"
    number: int  # 10 * major + minor of the compute capability: 100 for sm_100a
    ptx: tuple[int, int]  # the PTX ISA version the kernels declare (`.version`)
    family: str  # the GPUs it is for, in words
    wgmma: bool  # warpgroup MMA (`wgmma.mma_async`): sm_90a only, no later architecture has it
    clusters: bool  # thread block clusters (`.reqnctapercluster`)
    max_shared_bytes: int  # dynamic shared memory a block may ask for (the opt-in maximum)
    verified_on: str | None = None  # the GPU the GPU tests ran on; None: compiled and assembled only
    # fifth-generation tensor cores (`tcgen05.mma` into tensor memory): the datacenter Blackwell
    # parts only; consumer Blackwell (sm_120a) has none
    tcgen05: bool = False

    @property
    def ptx_feature(self) -> str:
        """The LLVM NVPTX feature for `ptx` (e.g. "+ptx86")."""
        return f"+ptx{self.ptx[0]}{self.ptx[1]}"

    @property
    def fp8_mma(self) -> bool:
        """`mma.sync` on e4m3 / e5m2 operands (Ada, Hopper, Blackwell)."""
        return self.number >= 89


_KB = 1024
NV_TARGETS: dict[str, NvTarget] = {t.arch: t for t in (
    NvTarget("sm_80", 80, (7, 8), "Ampere datacenter (A100, A30)", False, False, 163 * _KB),
    NvTarget("sm_86", 86, (7, 8), "Ampere consumer and workstation (RTX 30xx, A10, A40)", False, False, 99 * _KB),
    NvTarget("sm_87", 87, (7, 8), "Ampere embedded (Jetson AGX Orin)", False, False, 163 * _KB),
    NvTarget("sm_89", 89, (8, 4), "Ada (RTX 40xx, L4, L40)", False, False, 99 * _KB),
    NvTarget("sm_90", 90, (8, 4), "Hopper without its arch-specific instructions", False, True, 227 * _KB),
    NvTarget("sm_90a", 90, (8, 4), "Hopper (H100, H200, GH200)", True, True, 227 * _KB, verified_on="H200"),
    NvTarget("sm_100a", 100, (8, 6), "Blackwell datacenter (B200, GB200)", False, True, 227 * _KB, tcgen05=True),
    NvTarget("sm_103a", 103, (8, 8), "Blackwell Ultra datacenter (B300, GB300)", False, True, 227 * _KB,
             tcgen05=True),
    NvTarget("sm_120a", 120, (8, 7), "Blackwell consumer and workstation (RTX 50xx, RTX PRO 6000)", False, True,
             99 * _KB),
)}


def nv_target(arch: str) -> NvTarget:
    """The table's entry for `arch`, or an ArgumentError naming the architectures it holds."""
    t = NV_TARGETS.get(arch)
    if t is None:
        known = ", ".join(f"'cuda:{a}'" for a in NV_TARGETS)
        raise ArgumentError(f"unknown CUDA architecture {arch!r}; the NVIDIA backend compiles for {known} "
                            "(sm_80 or newer: it relies on cp.async, ldmatrix and bf16 conversions)",
                            hint="'cuda' alone compiles for sm_90a")
    return t


def arch_number(arch: str) -> int:
    """'sm_90a' -> 90, 'sm_100a' -> 100: the number to compare architectures by (never the name)."""
    t = NV_TARGETS.get(arch)
    if t is not None:
        return t.number
    digits = "".join(c for c in arch.removeprefix("sm_") if c.isdigit())
    return int(digits or 0)


def describe_targets() -> list[dict[str, object]]:
    """The table as plain values, for device_info and the docs: each target with whether it ran on
    hardware."""
    return [{"target": f"cuda:{t.arch}", "family": t.family, "ptx_version": f"{t.ptx[0]}.{t.ptx[1]}",
             "wgmma": t.wgmma, "tcgen05": t.tcgen05, "clusters": t.clusters, "max_shared_bytes": t.max_shared_bytes,
             "verified_on_hardware": t.verified_on is not None, "verified_on": t.verified_on}
            for t in NV_TARGETS.values()]
