"""The verifier on real kernels and on malformed ops.

Every kernel below is compiled (CPU, and NVIDIA PTX where ptxas is found) with the verifier run on
its Tile IR after the frontend and after every pass that rewrites it (folding, CSE, DCE; the CPU
backend's dot+add fusion; the NVIDIA backend's K-major marking, shared-memory pipelining and
prefetching): each must pass. Then ops built wrong, one fault at a time: each is refused with a
message that names the op, where it is, and what is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import compiler.passes as passes
from compiler.backends.llvm import scalar as llvm_scalar
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.ir import SPECS, Block, Builder, Function, Location, Op, VerificationError, verify
from compiler.ir import types as T
from compiler.ir.ops import BINARY, ELEMENTWISE, ELEMENTWISE_COMPUTE, MOVEMENT, operand_range
from compiler.ir.rules import ATTR_KINDS
from compiler.runtime import compiled
from compiler.runtime import stages as stages_mod

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "compiler"))
import ptx_ops_kernels as PTX  # noqa: E402
import verifier_kernels as K  # noqa: E402
from shared_memory_kernels import held_regions, held_with_pipeline  # noqa: E402
from stream_kernels import row_sums  # noqa: E402

HAVE_PTXAS = find_ptxas() is not None
BACKEND_STAGES = {"cpu": ("fold_dot_add",),
                  "cuda": ("mark_kmajor_b", "pipeline_dot_loads", "prefetch_dot_operands")}


# ------------------------------------------------------------------ verify after every stage
@pytest.fixture
def stages(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The runtime's stage loop with ANVIL_VERIFY_IR on: it verifies the Tile IR after the frontend
    and after each Tile IR stage; yields the names of the points it verified at ("frontend", then
    each pass's name; a stage the compiler stopped verifying after shows as missing)."""
    seen: list[str] = []
    check = stages_mod.check

    def recording(ctx: Any, after: str) -> None:
        check(ctx, after)
        seen.append("frontend" if after == "the frontend" else after.removeprefix("stage ").removeprefix("tir."))

    monkeypatch.setenv("ANVIL_VERIFY_IR", "1")
    monkeypatch.setenv("ANVIL_CACHE", "0")
    monkeypatch.setattr(compiled, "_MEMORY", {})
    monkeypatch.setattr(stages_mod, "check", recording)
    yield seen


def _compile(stages: list[str], kernel: Any, sig: dict[str, str], cx: dict[str, Any], target: str,
             debug: bool = False) -> None:
    if target.startswith("cuda") and not HAVE_PTXAS:
        pytest.skip("ptxas not found (CUDA toolkit or triton package)")
    kernel.compile(sig, cx, target=target, num_warps=4, debug=debug)
    want = ["frontend", *(p.__name__ for p in passes.PIPELINE), *BACKEND_STAGES[target.split(":")[0]]]
    if debug and target.startswith("cuda"):
        want.remove("pipeline_dot_loads")
    assert [s for s in want if s not in stages] == [], f"stages not verified: {stages}"


_CASES = [(name, t) for name, case in K.CASES.items() for t in case[4]]


@pytest.mark.parametrize("name,target", _CASES, ids=[f"{n}-{t}" for n, t in _CASES])
def test_kernel_verifies_after_every_stage(stages: list[str], name: str, target: str) -> None:
    kernel, sig, cx, debug, _ = K.CASES[name]
    _compile(stages, kernel, sig, cx, target, debug)


@pytest.mark.parametrize("name", sorted(PTX.CASES))
def test_nvidia_op_kernel_verifies_after_every_stage(stages: list[str], name: str) -> None:
    kernel, sig, cx, debug = PTX.CASES[name]
    _compile(stages, kernel, sig, cx, "cuda:sm_90a", debug)


def test_shared_memory_and_staged_loops_verify(stages: list[str]) -> None:
    _compile(stages, held_regions, {"x_ptr": "*i32", "y_ptr": "*i32", "sum_ptr": "*i32", "addr_ptr": "*i32"},
             {"A": 3000, "B": 100, "NW": 4}, "cuda:sm_90a")
    _compile(stages, held_with_pipeline, {"x_ptr": "*fp32", "y_ptr": "*fp32", "back_ptr": "*i32", "n": "i32"},
             {"A": 5000, "BLOCK": 128}, "cuda:sm_90a")
    _compile(stages, row_sums, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32:16"},
             {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": True}, "cuda:sm_90a")


def test_pipelined_matmul_makes_async_copies(stages: list[str]) -> None:
    """An sm_90a fp16 matmul goes through the shared-memory pipeline: the verified Tile IR that was
    lowered (the kernel's `tir` artifact) holds the async_copy / async_wait / async_drain ops and the
    dot's `in_flight` and `b_kmajor` flags."""
    kernel, sig, cx, _, _ = K.CASES["matmul_kmajor"]
    if not HAVE_PTXAS:
        pytest.skip("ptxas not found (CUDA toolkit or triton package)")
    tir = kernel.compile(sig, cx, target="cuda:sm_90a", num_warps=4).asm["tir"]
    for needle in ("async_copy", "async_wait", "async_drain", "in_flight", "b_kmajor"):
        assert needle in tir, needle
    assert "prefetch_dot_operands" in stages


# ------------------------------------------------------------------ the table and the sets from it
def test_every_opcode_has_a_spec_and_the_sets_come_from_it() -> None:
    assert set(BINARY) <= ELEMENTWISE_COMPUTE <= ELEMENTWISE <= set(SPECS)
    assert set(llvm_scalar.BINARY) == set(BINARY)  # the shared LLVM semantics lower every binary opcode
    assert {"broadcast", "expand_dims", "trans", "reshape", "join", "split", "gather"} == MOVEMENT
    assert {"splat", "broadcast", "expand_dims", "make_range", "constant", "load"} == ELEMENTWISE - ELEMENTWISE_COMPUTE
    for name, spec in SPECS.items():
        assert spec.name == name
        assert all(a.kind in ATTR_KINDS for a in spec.attrs)
    assert operand_range(SPECS["load"], {"has_mask": True, "has_other": False}) == (2, 2)
    assert operand_range(SPECS["histogram"], {}) == (1, 2)
    assert operand_range(SPECS["for"], {}) == (3, None)


# ------------------------------------------------------------------ malformed ops are refused
LOC = Location("kernel.py", 12, 4)


def _fn() -> tuple[Function, Builder, list[Any]]:
    body = Block()
    x = body.add_arg(T.TileType((16,), T.fp32), "x")
    p = body.add_arg(T.TileType((16,), T.PointerType(T.fp32)), "p")
    n = body.add_arg(T.i32, "n")
    return Function("k", body, ["x", "p", "n"], [{}, {}, {}]), Builder(body, LOC), [x, p, n]


def _refused(fn: Function, *needles: str) -> str:
    with pytest.raises(VerificationError) as e:
        verify(fn)
    msg = str(e.value)
    assert "kernel.py:12:4" in msg and e.value.loc == LOC
    for s in needles:
        assert s in msg, msg
    return msg


def test_a_well_formed_function_passes() -> None:
    fn, b, (x, p, n) = _fn()
    y = b.value("add", [x, x], x.type)
    m = b.value("cmp", [y, x], T.TileType((16,), T.i1), pred="lt")
    v = b.value("load", [p, m], x.type, has_mask=True, has_other=False, cache=None, volatile=True)
    b.create("store", [p, v, m], [], {"has_mask": True, "cache": ".cs", "eviction": None})
    b.value("math", [x, x, y], x.type, fn="fma")
    b.value("max", [x, y], x.type, propagate_nan="all", axis_hints=(("multiple_of", (16,)),))
    verify(fn)


def test_wrong_operand_count() -> None:
    fn, b, (x, p, n) = _fn()
    b.create("add", [x], [x.type])
    _refused(fn, "add at kernel.py:12:4", "expected 2 operand(s) (lhs, rhs), got 1")


def test_operand_count_follows_the_mask_attribute() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("load", [p], x.type, has_mask=True, has_other=False)
    _refused(fn, "load at", "expected 2 operand(s)", "mask (if has_mask)", "got 1")


def test_math_arity_follows_the_function() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("math", [x, x], x.type, fn="exp")
    _refused(fn, "math at", "math function 'exp' takes 1 operand(s), got 2")


def test_missing_required_attribute() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("cmp", [x, x], T.TileType((16,), T.i1))
    _refused(fn, "cmp at", "missing attribute 'pred'")


def test_unknown_attribute() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("sub", [x, x], x.type, volatile=True)
    _refused(fn, "sub at", "unknown attribute 'volatile'", "known: axis_hints")


def test_wrong_attribute_type() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("expand_dims", [x], T.TileType((1, 16), T.fp32), axis="0")
    _refused(fn, "expand_dims at", "attribute 'axis' must be int, got str '0'")


def test_a_bool_is_not_an_int_attribute() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("program_id", [], T.i32, axis=True)
    _refused(fn, "program_id at", "attribute 'axis' must be int, got bool True")


def test_attribute_value_outside_its_choices() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("cmp", [x, x], T.TileType((16,), T.i1), pred="less")
    _refused(fn, "cmp at", "attribute 'pred' is 'less', expected one of 'eq', 'ne'")


def test_required_attribute_set_to_none() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("dot", [x, x, x], x.type, input_precision=None)
    _refused(fn, "dot at", "attribute 'input_precision' is None; it is required")


def test_bad_result_type() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("cmp", [x, x], x.type, pred="eq")
    _refused(fn, "cmp at", "result 0 has type tile<16xfp32>, expected tile<16xi1>", "i1 of the shape of operand 0")


def test_bad_result_shape() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("expand_dims", [x], T.TileType((16, 1), T.fp32), axis=0)
    _refused(fn, "expand_dims at", "expected tile<1x16xfp32>")


def test_bad_result_count() -> None:
    fn, b, (x, p, n) = _fn()
    b.create("store", [p, x], [T.i32], {"has_mask": False})
    _refused(fn, "store at", "expected 0 result(s) (no results), got 1")


def test_operand_types_checked() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("load", [x], x.type, has_mask=False, has_other=False)
    _refused(fn, "load at", "operand 0 is not a pointer")


def test_unknown_opcode() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("frobnicate", [x], x.type)
    _refused(fn, "frobnicate at", "unknown opcode")


def test_loop_body_must_yield_the_carried_types() -> None:
    fn, b, (x, p, n) = _fn()
    body = Block()
    body.add_arg(T.i32)
    body.add_arg(T.fp32)
    with b.at(body):
        b.create("yield", [], [])
    zero = b.value("constant", [], T.i32, value=0)
    init = b.value("constant", [], T.fp32, value=0.0)
    b.create("for", [zero, n, n, init], [T.fp32], {"step_sign": 0}, [body])
    _refused(fn, "for at", "body yields [], expected [fp32]")


def test_errors_name_the_op_even_in_a_region() -> None:
    fn, b, (x, p, n) = _fn()
    region = Block()
    region.add_arg(T.fp32)
    region.add_arg(T.fp32)
    with b.at(region):
        b.create("yield", [b.value("mul", [region.args[0], region.args[1]], T.fp64)], [])
    b.create("reduce", [x], [T.fp32], {"axis": 0}, [region])
    _refused(fn, "mul at", "result 0 has type fp64, expected fp32")


def test_op_constructed_directly_is_checked_too() -> None:
    fn, b, (x, p, n) = _fn()
    fn.body.append(Op("trans", [x], [x.type], {"perm": [0]}, loc=LOC))
    _refused(fn, "trans at", "attribute 'perm' must be tuple of ints, got list [0]")


def test_constant_must_hold_a_value_of_its_type() -> None:
    fn, b, (x, p, n) = _fn()
    b.value("constant", [], T.fp32, value=1)
    _refused(fn, "constant at", "result type fp32: does not hold the value 1")
