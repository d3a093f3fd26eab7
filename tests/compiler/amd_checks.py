"""What every kernel compiled for an AMD target must show (shared by the AMD compile tests)."""

from __future__ import annotations

import re
from typing import Any

from compiler.backends.amd.metadata import kernel_descriptor
from compiler.backends.amd.toolchain import find_linker


def check_compiled(ck: Any, arch: str) -> str:
    """Assembly for `arch` without scratch or spills, LDS within 64 KiB and, where a linker exists,
    a code object whose kernel descriptor agrees; returns the assembly."""
    asm = str(ck.asm["amdgcn"])
    assert f"amdgcn-amd-amdhsa--{arch}" in asm
    assert re.search(r"^\s*\.amdhsa_private_segment_fixed_size\s+0$", asm, re.M)
    assert ck.metadata["n_spills"] == 0 and ck.metadata["shared"] <= 64 * 1024
    if find_linker() is not None:
        kd = kernel_descriptor(ck.asm["hsaco"], f"{ck.artifacts.symbol}.kd")
        assert kd is not None and kd["private_segment_fixed_size"] == 0
        assert kd["group_segment_fixed_size"] == ck.metadata["shared"]
    return asm
