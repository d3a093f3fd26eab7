"""Tile IR: the printed form, the verifier, and each pass on tiny kernels."""

from __future__ import annotations

import pytest

from compiler import compile_source
from compiler.frontend import GenOptions, ParamSpec, generate_kernel
from compiler.ir import Block, Builder, Function, VerificationError, print_function, verify
from compiler.ir import types as T
from compiler.passes import cse, dce, fold, run_pipeline
from compiler.runtime.jit import as_jit

SRC = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    a = offs * 1 + 0
    b = offs * 1 + 0
    unused = tl.exp(tl.load(x_ptr + offs))
    x = tl.load(x_ptr + a, mask=a < n)
    tl.store(out_ptr + b, x + (2 + 3), mask=b < n)
'''


def _ir(src: str = SRC, **constexprs: object) -> Function:
    fn = compile_source(src, kernel="k")
    specs = [ParamSpec("x_ptr", False, None, T.PointerType(T.fp32), 16),
             ParamSpec("out_ptr", False, None, T.PointerType(T.fp32), 16),
             ParamSpec("n", False, None, T.i32),
             ParamSpec("BLOCK", True, constexprs.get("BLOCK", 64))]
    return generate_kernel(fn.source, specs, GenOptions(), lambda o: (j.source if (j := as_jit(o)) else None))


def test_frontend_output_verifies_and_prints_stably() -> None:
    f = _ir()
    verify(f)
    text = print_function(f)
    assert text.startswith("func @k(%x_ptr: !ptr<fp32> {divisibility=16}, %out_ptr: !ptr<fp32> {divisibility=16}, "
                           "%n: i32) {\n  %pid = program_id {axis=0} : i32\n")
    assert "make_range {end=64, start=0} : tile<64xi32>" in text
    assert print_function(_ir()) == text  # deterministic


def test_fold_cse_dce() -> None:
    f = _ir()
    before = print_function(f)
    assert before.count("math") == 1
    run_pipeline(f, check=True)
    after = print_function(f)
    assert "math" not in after, "the unused exp (and its load) is dead"
    assert after.count("load") == 1
    assert after.count("make_range") == 1
    assert "constant {value=5.0}" in after or "constant {value=5}" in after, after
    assert after.count("cmp") == 1, "a < n and b < n are the same value after folding and CSE"


def test_each_pass_keeps_the_ir_valid() -> None:
    f = _ir()
    for p in (fold, cse, dce):
        p(f)
        verify(f)


def test_verifier_rejects_bad_ir() -> None:
    body = Block()
    x = body.add_arg(T.i32, "x")
    y = body.add_arg(T.fp32, "y")
    b = Builder(body)
    b.create("add", [x, y], [T.i32])
    f = Function("bad", body, ["x", "y"], [{}, {}])
    with pytest.raises(VerificationError, match="operand types differ"):
        verify(f)


def test_verifier_rejects_use_before_definition() -> None:
    body = Block()
    x = body.add_arg(T.i32, "x")
    b = Builder(body)
    other = Block()
    ghost = other.add_arg(T.i32, "ghost")
    b.create("add", [x, ghost], [T.i32])
    f = Function("bad", body, ["x"], [{}])
    with pytest.raises(VerificationError, match="does not dominate"):
        verify(f)


def test_loop_ir_has_structured_for_with_yield() -> None:
    src = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)
'''
    f = _ir(src, BLOCK=16)
    verify(f)
    text = print_function(f)
    assert "= for " in text and "yield" in text and "^(%i: i32, %" in text
