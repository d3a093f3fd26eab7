"""The AMD backend: Tile IR -> per-thread LLVM IR for AMDGPU (wave64, linear layouts) -> AMDGCN
assembly and an HSA code object (ELF), for AMD Instinct gfx942 (MI300) and gfx950 (MI350).

Kernels compile to a linked code object with the metadata a loader needs and launch through the
HIP runtime (hip.py); no AMD GPU has run them (docs/architecture.md, "AMD", says what is lowered).
backend.py lists the stages; lower.py and the op modules lower; codegen.py runs LLVM;
toolchain.py links; metadata.py reads the kernel's metadata and descriptor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...ir import types as T

__all__ = ["AmdBinary", "ARCHS", "DEFAULT_ARCH"]

ARCHS = ("gfx942", "gfx950")
DEFAULT_ARCH = "gfx942"


@dataclass
class AmdBinary:
    name: str
    symbol: str
    arch: str
    llir: str
    amdgcn: str
    hsaco: bytes | None  # None where no linker was found at compile time
    num_warps: int
    lds_bytes: int
    arg_types: list[T.Type]
    arg_names: list[str]
    kernel: dict[str, Any] = field(default_factory=dict)  # the code object's metadata for the kernel
