"""The NVIDIA lowering's LLVM IR helpers of compiler/backends/llvm: `CseBuilder` (a repeated pure
instruction emitted once, placed where LLVM's EarlyCSE would leave it) and `module_text` (llvmlite's
text of a module, printed faster)."""

from __future__ import annotations

import os
import sys

import pytest
from llvmlite import ir

from compiler.backends.llvm.cse import CseBuilder, CseRecord, Repeat
from compiler.backends.llvm.irtext import instruction_text, module_text

I32 = ir.IntType(32)
F32 = ir.FloatType()


def _kernel(nargs: int = 2) -> tuple[ir.Module, ir.Function, CseBuilder, CseRecord]:
    m = ir.Module(name="t", context=ir.Context())
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [I32] * nargs), "k")
    rec = CseRecord()
    return m, f, CseBuilder(f.append_basic_block("entry"), rec), rec


def _sink(m: ir.Module, b: ir.IRBuilder, *vals: ir.Value) -> None:
    """A use of each value (a call to an external function)."""
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [v.type for v in vals]), f"use{len(m.globals)}")
    b.call(fn, list(vals))


def _body(f: ir.Function) -> list[str]:
    return [str(i) for i in f.blocks[0].instructions]


def test_repeats_are_emitted_once() -> None:
    m, f, b, rec = _kernel()
    x, y = f.args
    s1 = b.add(x, y)
    _sink(m, b, s1)
    s2 = b.add(x, y)
    assert isinstance(s2, Repeat) and isinstance(s2, ir.Instruction) and s2.type == I32
    _sink(m, b, b.mul(s2, ir.Constant(I32, 3)), b.mul(s1, ir.Constant(I32, 3)))
    b.ret_void()
    rec.settle(f)
    body = _body(f)
    assert sum(" = add " in t for t in body) == 1 and sum(" = mul " in t for t in body) == 1
    assert body.index(str(s1)) == 0  # used at once: stays first


def test_an_unused_first_instance_moves_to_its_first_used_repeat() -> None:
    m, f, b, rec = _kernel()
    x, y = f.args
    b.add(x, y)  # nothing uses this one: EarlyCSE would delete it and keep the next
    marker = b.sub(x, y)
    _sink(m, b, marker)
    r = b.add(x, y)
    _sink(m, b, r)
    b.ret_void()
    rec.settle(f)
    body = _body(f)
    assert body.index(str(marker)) < body.index(str(r.of))


def test_floating_point_and_mid_block_inserts_are_not_shared() -> None:
    m = ir.Module(name="t", context=ir.Context())
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [F32, I32]), "k")
    b = CseBuilder(f.append_basic_block("entry"), CseRecord())
    x, n = f.args
    assert b.fadd(x, x) is not b.fadd(x, x)
    first = b.add(n, n)
    b.position_before(first)
    assert not isinstance(b.add(n, n), Repeat)


def test_module_text_is_llvmlites() -> None:
    m = ir.Module(name="t", context=ir.Context())
    st = m.context.get_identified_type("pair")
    st.set_body(F32, F32)
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType(F32, 3), I32, F32]), "k")
    entry, loop, done = (f.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    p, n, x = f.args
    s = b.add(n, ir.Constant(I32, 1), flags=["nsw"])
    c = b.icmp_signed("<", s, n)
    sel = b.select(c, s, n)
    g = b.gep(p, [b.zext(sel, ir.IntType(64))], inbounds=True)
    fc = b.fcmp_ordered("<", x, ir.Constant(F32, -0.0))
    t = b.fadd(x, ir.Constant(F32, 1.5))
    t.flags.append("contract")
    t.set_metadata("tag", m.add_metadata(["a"]))
    pair = b.asm(ir.FunctionType(st, [F32]), "mov.b32 $0, $2; mov.b32 $1, $2;", "=f,=f,f", [t], side_effect=False)
    b.store(b.extract_value(pair, 1), g)
    b.cbranch(fc, loop, done)
    b.position_at_end(loop)
    phi = b.phi(I32)
    phi.add_incoming(s, entry)
    phi.add_incoming(phi, loop)
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    for blk in f.blocks:
        for i in blk.instructions:
            text = instruction_text(i)
            assert text is None or text == i._to_string()
    text = module_text(m)
    assert all(i.get_reference() == i._get_reference() for blk in f.blocks for i in blk.instructions)
    assert text == str(m)


def test_module_text_of_a_gemm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_CACHE", "0")  # a cached PTX from another test would skip the lowering
    sys.path.insert(0, os.path.dirname(__file__))
    import nv_target_cases

    from compiler.backends.nvidia import backend as nb

    seen: list[tuple[str, str]] = []

    def both(m: ir.Module) -> str:
        text = module_text(m)  # caches the instructions' references: they must be llvmlite's
        for f in m.functions:
            for blk in f.blocks:
                for i in blk.instructions:
                    assert i.get_reference() == i._get_reference()
        seen.append((text, str(m)))
        return text

    fn, sig, consts, warps, stages, _ = nv_target_cases.all_cases()["gemm_fp16"]
    old, nb.module_text = nb.module_text, both
    try:
        fn.compile(sig, consts, target="cuda:sm_90a", num_warps=warps, num_stages=stages)
    finally:
        nb.module_text = old
    assert seen and all(a == b for a, b in seen)
