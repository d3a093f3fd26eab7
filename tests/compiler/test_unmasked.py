"""What the compiler tells the tools about a kernel beyond its binary: the accesses without a mask whose
address depends on the program id (passes/unmasked.py), and the slow lowerings it chose (scalar library
calls in vector loops on the CPU: backends/cpu/libcalls.py; spills and serialized wgmma from the
assembler: backends/nvidia/notes.py)."""

from __future__ import annotations

from typing import Any

import pytest

import compiler
from compiler.backends.nvidia.notes import assembler_notes
from compiler.backends.nvidia.toolchain import PtxasReport
from compiler.ir.core import Location

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def masked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def unmasked(x_ptr, out_ptr, scale_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.load(scale_ptr)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * s)


@triton.jit
def matmul_rows(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks
    acc = tl.zeros([BM], dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.sum(tl.load(a_ptrs) * tl.load(b_ptrs)[None, :], axis=1)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rows, acc, mask=rows < 64)


@triton.jit
def gather(idx_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx_ptr + offs, mask=offs < 100, other=0)
    tl.atomic_add(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + i))


@triton.jit
def branches(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    base = 0
    if tl.program_id(0) > 0:
        base = n
    i = 0
    while i < n:
        i += BLOCK
    tl.store(out_ptr + base + tl.arange(0, BLOCK), tl.load(x_ptr + i + tl.arange(0, BLOCK)))
'''


def _compiled(name: str, sig: dict[str, str], consts: dict[str, Any]) -> Any:
    jit = compiler.compile_source(KERNELS, name, filename="<source>")
    return jit.compile(sig, consts, target="cpu")


def _accesses(ck: Any) -> list[tuple[str, int, str | None]]:
    return [(a["kind"], a["line"], a["pointer"]) for a in ck.metadata["unmasked_accesses"]]


def test_masked_accesses_are_not_suspects() -> None:
    ck = _compiled("masked", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert _accesses(ck) == []


def test_unmasked_accesses_that_follow_the_program_id_are_named() -> None:
    ck = _compiled("unmasked", {"x_ptr": "*fp32", "out_ptr": "*fp32", "scale_ptr": "*fp32", "n": "i32"},
                   {"BLOCK": 64})
    # the scalar load of scale_ptr is the same address in every program: not a suspect
    assert _accesses(ck) == [("load", 17, "x_ptr"), ("store", 17, "out_ptr")]


def test_loop_carried_pointers_keep_their_dependence() -> None:
    ck = _compiled("matmul_rows", {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "K": "i32"},
                   {"BM": 16, "BK": 16})
    # a_ptrs follows the program id through the loop; b_ptrs does not; the store is masked
    assert _accesses(ck) == [("load", 28, "a_ptr")]


def test_addresses_read_from_memory_that_follows_the_program_id() -> None:
    ck = _compiled("gather", {"idx_ptr": "*i32", "x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 32})
    # x_ptr + i: i was loaded at an address of this program; the atomic's address is the same everywhere
    assert _accesses(ck) == [("load", 38, "x_ptr")]


def test_branches_and_while_loops() -> None:
    ck = _compiled("branches", {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 32})
    # base takes n only in programs past the first: the store follows the program id; the while loop does not
    assert _accesses(ck) == [("store", 49, "out_ptr")]


SLOW_MATH = '''
import triton
import triton.language as tl


@triton.jit
def slow(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.erf(x) + tl.exp(x) * 2.0
    first = tl.load(x_ptr)
    tl.store(y_ptr + offs, y + tl.sin(first), mask=m)
'''


@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_scalar_library_calls_in_vector_loops_are_noted_at_their_line(dtype: str) -> None:
    jit = compiler.compile_source(SLOW_MATH, None, filename="<source>")
    ck = jit.compile({"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32"}, {"BLOCK": 64}, target="cpu")
    notes = ck.metadata["notes"]
    if dtype == "fp32":  # float32 math is vectorized
        assert notes == []
        return
    # erf and exp on tiles call the C library per element; sin of one scalar is no loop
    assert [(n["line"], n["column"]) for n in notes] == [(11, 9), (11, 21)]
    assert "erf on fp64 tiles is a call of the C library's erf" in notes[0]["message"]
    assert "float32" in notes[0]["hint"]


def test_the_notes_survive_the_disk_cache(tmp_path: Any, monkeypatch: Any) -> None:
    from compiler.runtime import compiled

    monkeypatch.setenv("ANVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANVIL_CACHE", "1")
    sig = {"x_ptr": "*fp64", "y_ptr": "*fp64", "n": "i32"}
    first = compiler.compile_source(SLOW_MATH, None, filename="<source>").compile(sig, {"BLOCK": 32}, target="cpu")
    monkeypatch.setattr(compiled, "_MEMORY", {})
    again = compiler.compile_source(SLOW_MATH, None, filename="<source>").compile(sig, {"BLOCK": 32}, target="cpu")
    assert "cache_load_ms" in again.metadata["compile_ms"]
    assert again.metadata["notes"] == first.metadata["notes"] and len(first.metadata["notes"]) == 2
    assert again.metadata["unmasked_accesses"] == first.metadata["unmasked_accesses"] == []


def test_assembler_spills_and_serialized_wgmma_become_notes() -> None:
    kernel, dot = Location("<source>", 5, 1), Location("<source>", 12, 15)
    report = PtxasReport(registers=255, spill_stores=96, spill_loads=128, shared_bytes=0, stack_bytes=96,
                         notes=("(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized "
                                "due to ...",))
    notes = assembler_notes(report, kernel, [dot])
    assert [(n["line"], n["column"]) for n in notes] == [(5, 1), (12, 15)]
    assert "96 bytes stored, 128 bytes loaded (255 registers" in str(notes[0]["message"])
    assert "serializes the wgmma instructions of this tl.dot" in str(notes[1]["message"])
    clean = PtxasReport(registers=40, spill_stores=0, spill_loads=0, shared_bytes=0, stack_bytes=0)
    assert assembler_notes(clean, kernel, [dot]) == [] and assembler_notes(None, kernel, []) == []
