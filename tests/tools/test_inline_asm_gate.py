"""tl.inline_asm_elementwise is GPU assembly the launch checks cannot see: the tools refuse kernels
that use it unless the operator allows it (Limits.allow_inline_asm, anvil serve --allow-inline-asm)."""

from __future__ import annotations

import anyio
import pytest

from compiler.backends.nvidia.toolchain import find_ptxas
from tools.compile import compile_kernel
from tools.errors import ToolInputError
from tools.limits import Limits
from tools.models import CompileRequest
from tools.runtime import Runtime

ASM = """\
import triton
import triton.language as tl


@triton.jit
def asm_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(x_ptr + offs, y.to(tl.float32, bitcast=True))
"""

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="needs ptxas to compile for the NVIDIA target")


def _compile(limits: Limits) -> object:
    rt = Runtime(limits=limits)
    req = CompileRequest(source=ASM, constexprs={"BLOCK": 16}, target="cuda:sm_90a")
    return anyio.run(compile_kernel, rt, req)


def test_inline_asm_is_refused_by_default_with_the_flag_named() -> None:
    with pytest.raises(ToolInputError) as info:
        _compile(Limits())
    assert "--allow-inline-asm" in info.value.message and "asm_kernel" in info.value.message
    assert info.value.data["error"] == "inline_asm_not_allowed"


def test_inline_asm_compiles_when_the_operator_allows_it() -> None:
    result = _compile(Limits(allow_inline_asm=1))
    assert result.kernel_name == "asm_kernel"  # type: ignore[attr-defined]


def test_the_limit_reads_its_variable() -> None:
    assert Limits.from_env({"ANVIL_ALLOW_INLINE_ASM": "1"}).allow_inline_asm == 1
    assert Limits.from_env({}).allow_inline_asm == 0
