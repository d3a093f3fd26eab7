"""Atomics on the AMD backend (device-free): the LLVM IR's sync scopes and orders, and the AMDGCN
instructions they select on gfx942 and gfx950 (hardware float atomics, no compare-and-swap loop
where an instruction exists, no scratch)."""

from __future__ import annotations

import re

import pytest

import compiler.language as tl
from compiler import jit
from tests.compiler.test_amd_backend import ARCHS, _check_common


@jit
def tile_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    old = tl.atomic_add(x_ptr + offs, tl.load(y_ptr + offs, mask=m, other=0), mask=m)
    tl.store(out_ptr + offs, old, mask=m)


@jit
def tile_kinds(x_ptr, v_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(v_ptr + offs, mask=m, other=0)
    tl.atomic_max(x_ptr + offs, v, mask=m)
    tl.atomic_min(x_ptr + offs, v, mask=m, sem="relaxed")
    tl.atomic_and(x_ptr + offs, v, mask=m, sem="release", scope="cta")
    tl.atomic_or(x_ptr + offs, v, mask=m, sem="acquire", scope="sys")
    tl.atomic_xor(x_ptr + offs, v, mask=m)
    tl.atomic_xchg(x_ptr + offs, v, mask=m)


@jit
def tile_cas(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.atomic_cas(x_ptr + offs, 0, offs.to(x_ptr.dtype.element_ty)))


@jit
def scalar_max(x_ptr, out_ptr, v):
    old = tl.atomic_max(x_ptr, v, sem="relaxed", scope="cta")
    tl.store(out_ptr, old)


@jit
def scalar_add_unused(x_ptr, v):
    tl.atomic_add(x_ptr, v)


def _atomics(asm: str) -> set[str]:
    return set(re.findall(r"global_atomic_\w+", asm))


def _sig(ty: str, n: str = "i32") -> dict[str, str]:
    return {"x_ptr": f"*{ty}", "y_ptr": f"*{ty}", "out_ptr": f"*{ty}", "n": n}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("ty", "instr"), [("fp32", "global_atomic_add_f32"), ("i32", "global_atomic_add"),
                                           ("fp64", "global_atomic_add_f64"), ("i64", "global_atomic_add_x2")])
def test_tile_add_selects_the_hardware_atomic(arch: str, ty: str, instr: str) -> None:
    ck = tile_add.compile(_sig(ty), {"BLOCK": 256}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert _atomics(asm) == {instr}
    assert "global_atomic_cmpswap" not in asm
    # acq_rel at agent scope by default: Triton's (sem="acq_rel", scope="gpu")
    llir = ck.asm["llir"]
    kind = "fadd" if ty.startswith("fp") else "add"
    assert re.search(rf'atomicrmw {kind} ptr addrspace\(1\) %\S+, \w+ %\S+ syncscope\("agent"\) acq_rel', llir)
    assert re.search(r"buffer_wbl2|global_wb", asm) and re.search(r"buffer_inv|global_inv", asm)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("ty", "instr"), [("fp16", "global_atomic_pk_add_f16"),
                                           ("bf16", "global_atomic_pk_add_bf16")])
def test_half_precision_add_is_packed_when_pairs_are_aligned(arch: str, ty: str, instr: str) -> None:
    """n divisible by 16 proves each thread's consecutive pair 4-byte aligned: one packed atomic
    per pair; without the proof, a compare-and-swap loop per element."""
    ck = tile_add.compile(_sig(ty, "i32:16"), {"BLOCK": 1024}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert _atomics(asm) == {instr}
    assert "atomicrmw fadd ptr addrspace(1)" in ck.asm["llir"] and ("<2 x half>" if ty == "fp16" else
                                                                    "<2 x bfloat>") in ck.asm["llir"]
    ck = tile_add.compile(_sig(ty, "i32"), {"BLOCK": 1024}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert _atomics(asm) == {"global_atomic_cmpswap"}


@pytest.mark.parametrize("arch", ARCHS)
def test_integer_kinds_scopes_and_orders(arch: str) -> None:
    ck = tile_kinds.compile({"x_ptr": "*i32", "v_ptr": "*i32", "n": "i32"}, {"BLOCK": 128}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    # the system-scope `or` may meet fine-grained host memory, where PCIe has no atomic or: LLVM
    # makes it a compare-and-swap loop; the agent and workgroup scope ones are single instructions
    assert _atomics(asm) == {"global_atomic_smax", "global_atomic_smin", "global_atomic_and", "global_atomic_xor",
                             "global_atomic_swap", "global_atomic_cmpswap"}
    llir = ck.asm["llir"]
    for kind, scope_order in [("max", 'syncscope("agent") acq_rel'), ("min", 'syncscope("agent") monotonic'),
                              ("and", 'syncscope("workgroup") release'), ("xor", 'syncscope("agent") acq_rel'),
                              ("xchg", 'syncscope("agent") acq_rel')]:
        assert re.search(rf"atomicrmw {kind} ptr addrspace\(1\) %\S+, i32 %\S+ {re.escape(scope_order)}", llir), kind
    # the system scope is LLVM's default one: no syncscope
    assert re.search(r"atomicrmw or ptr addrspace\(1\) %\S+, i32 %\S+ acquire", llir)


@pytest.mark.parametrize("arch", ARCHS)
def test_unsigned_max_and_float_max(arch: str) -> None:
    ck = tile_kinds.compile({"x_ptr": "*u32", "v_ptr": "*u32", "n": "i32"}, {"BLOCK": 128}, target=f"amd:{arch}")
    assert {"global_atomic_umax", "global_atomic_umin"} <= _atomics(_check_common(ck, arch))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ty", ["i32", "i64", "fp32", "fp16"])
def test_tile_cas(arch: str, ty: str) -> None:
    ck = tile_cas.compile({"x_ptr": f"*{ty}", "out_ptr": f"*{ty}"}, {"BLOCK": 64}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    bits = {"i32": 32, "i64": 64, "fp32": 32, "fp16": 16}[ty]
    assert re.search(rf'cmpxchg ptr addrspace\(1\) %\S+, i{bits} \S+, i{bits} %\S+ syncscope\("agent"\) acq_rel '
                     r"acquire", ck.asm["llir"])
    # a 16-bit compare-and-swap is one on the aligned 32-bit word around it
    assert _atomics(asm) == {"global_atomic_cmpswap_x2" if bits == 64 else "global_atomic_cmpswap"}


@pytest.mark.parametrize("arch", ARCHS)
def test_scalar_atomic_runs_once_and_broadcasts_its_old_value(arch: str) -> None:
    ck = scalar_max.compile({"x_ptr": "*i32", "out_ptr": "*i32", "v": "i32"}, {}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert _atomics(asm) == {"global_atomic_smax"}
    assert asm.count("global_atomic_smax") == 1
    # thread 0 performs it; the old value goes through LDS to every thread (two barriers)
    assert "ds_write_b32" in asm and "ds_read_b32" in asm and asm.count("s_barrier") == 2
    assert 'syncscope("workgroup") monotonic' in ck.asm["llir"]
    assert ck.metadata["shared"] > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_scalar_atomic_whose_result_is_unused_needs_no_lds(arch: str) -> None:
    ck = scalar_add_unused.compile({"x_ptr": "*fp32", "v": "fp32"}, {}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert _atomics(asm) == {"global_atomic_add_f32"} and "s_barrier" not in asm
    assert ck.metadata["shared"] == 0


