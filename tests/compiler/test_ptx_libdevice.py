"""Precise math on the NVIDIA backend comes from libdevice, linked into the module when a kernel
uses it (found like ptxas: CUDA toolkit, then the triton package)."""

from __future__ import annotations

import pytest

import compiler
from compiler import errors
from compiler.backends import nvidia
from compiler.backends.nvidia import toolchain
from compiler.backends.nvidia.toolchain import find_libdevice, find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None or find_libdevice() is None,
                                reason="ptxas or libdevice not found")

SRC = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    y = tl.extra.libdevice.tanh(x) + tl.math.erf(x) + tl.extra.libdevice.pow(x, 1.5) + tl.math.log1p(tl.abs(x))
    y += tl.extra.libdevice.atan2(x, 2.0) + tl.extra.libdevice.lgamma(tl.abs(x) + 1.0) + tl.extra.libdevice.cbrt(x)
    y += tl.extra.libdevice.asinh(x) + tl.extra.libdevice.fmod(x, 0.7) + tl.extra.libdevice.hypot(x, 3.0)
    tl.store(y_ptr + o, y, mask=m)

@triton.jit
def plain(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.exp(tl.load(x_ptr + o, mask=o < n)), mask=o < n)
'''


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["fp32", "fp64", "fp16", "bf16"])
def test_libdevice_functions_link_and_assemble(dtype: str, arch: str) -> None:
    kernel = compiler.compile_source(SRC, kernel="k", filename="libdevice_kernels.py")
    ck = kernel.compile({"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32"}, {"BLOCK": 256},
                        target=f"cuda:{arch}", num_warps=4)
    ptx = ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF"
    assert ".extern" not in ptx  # every __nv_ function was linked (inlined or internal)


def test_kernels_without_libdevice_calls_do_not_link_it() -> None:
    kernel = compiler.compile_source(SRC, kernel="plain", filename="libdevice_kernels.py")
    ptx = kernel.compile({"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 256}, target="cuda:sm_90a").asm["ptx"]
    assert ".func" not in ptx and "ex2.approx.f32" in ptx


def test_missing_libdevice_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchain, "find_libdevice", lambda: None)
    monkeypatch.setenv("ANVIL_CACHE", "0")  # compiled, not found in a disk cache an earlier run left
    toolchain.libdevice_bitcode.cache_clear()
    nvidia._libdevice_part.cache_clear()  # the parts of it earlier compiles took
    try:
        kernel = compiler.compile_source(SRC, kernel="k", filename="libdevice_missing.py")
        with pytest.raises(errors.AnvilError, match="libdevice.10.bc was not found.*ANVIL_LIBDEVICE"):
            kernel.compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64}, target="cuda:sm_90a")
    finally:
        toolchain.libdevice_bitcode.cache_clear()
        nvidia._libdevice_part.cache_clear()


def test_only_the_functions_a_kernel_calls_are_linked() -> None:
    """The part of libdevice linked into a kernel holds the functions it calls and what they call,
    nothing else: O3 then works on a few functions, not the library's hundreds."""
    part = nvidia._libdevice_part(frozenset({"__nv_erff"}))
    import llvmlite.binding as llvm

    mod = llvm.parse_bitcode(part, context=llvm.create_context())
    defined = {f.name for f in mod.functions if not f.is_declaration}
    assert "__nv_erff" in defined and "__nv_expf" not in defined and len(defined) < 10
