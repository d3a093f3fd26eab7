"""Failures explained where they are: an argument of the wrong kind at the argument, slow lowerings as
notes with their source lines, the unmasked accesses kept with the kernel for crash messages."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from server.demo import VECTOR_ADD
from tools.compile import compile_kernel
from tools.errors import ToolInputError
from tools.launch import launch_kernel
from tools.models import CompileRequest, LaunchRequest
from tools.runtime import Runtime

N = 300


def _args(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"x_ptr": {"shape": [N]}, "y_ptr": {"shape": [N]},
                            "out_ptr": {"shape": [N], "init": "empty"}, "n": N}
    return args | changes


def _launch(rt: Runtime, **request: Any) -> Any:
    req = LaunchRequest(**({"source": VECTOR_ADD, "constexprs": {"BLOCK": 64}, "grid": ["cdiv(300, BLOCK)"]}
                           | request))
    return anyio.run(launch_kernel, rt, req)


@pytest.fixture(scope="module")
def rt() -> Runtime:
    return Runtime()


def test_a_tensor_for_a_scalar_is_reported_at_the_argument(rt: Runtime) -> None:
    with pytest.raises(ToolInputError) as info:
        _launch(rt, args=_args(n={"shape": [1], "dtype": "int32", "init": "zeros"}))
    message = info.value.message
    assert message.startswith("args['n']: a tensor spec was given, but add_kernel uses n as a scalar")
    assert 'give a number, e.g. "n": 1024' in message and "at line 9" in message
    assert info.value.data["argument"] == "n" and info.value.data["expected"] == "scalar"
    assert info.value.data["diagnostics"][0]["line"] == 9  # where the compiler stopped, for reference


def test_a_number_for_a_pointer_is_reported_at_the_argument(rt: Runtime) -> None:
    with pytest.raises(ToolInputError) as info:
        _launch(rt, args=_args(y_ptr=3))
    assert info.value.message.startswith("args['y_ptr']: a number was given, but add_kernel uses y_ptr as a pointer")
    assert '"y_ptr": {"shape": [1024], "dtype": "float32"}' in info.value.message
    with pytest.raises(ToolInputError) as info:  # the same through a kernel_id compiled with other types
        compiled = anyio.run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 64}))
        _launch(rt, source=None, kernel_id=compiled.kernel_id, args=_args(y_ptr=3))
    assert info.value.data["argument"] == "y_ptr"


def test_a_real_compile_error_stays_at_its_line(rt: Runtime) -> None:
    broken = VECTOR_ADD.replace("x + y", "x + z")
    with pytest.raises(ToolInputError) as info:
        _launch(rt, source=broken, args=_args())
    assert "<source>:12:34" in info.value.message and "argument" not in info.value.data


FP64_ERF = """\
import triton
import triton.language as tl


@triton.jit
def erf_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.erf(tl.load(x_ptr + offs)))
"""


def test_slow_lowerings_and_unmasked_accesses_come_with_the_kernel(rt: Runtime) -> None:
    req = CompileRequest(source=FP64_ERF, constexprs={"BLOCK": 64}, signature={"x_ptr": "*fp64", "y_ptr": "*fp64"})
    result = anyio.run(compile_kernel, rt, req)
    notes = [d for d in result.diagnostics if d.message.startswith("performance:")]
    assert len(notes) == 1 and notes[0].severity == "note" and (notes[0].line, notes[0].column) == (8, 28)
    assert notes[0].source_line == "    tl.store(y_ptr + offs, tl.erf(tl.load(x_ptr + offs)))"
    assert "erf on fp64 tiles is a call of the C library's erf" in notes[0].message and notes[0].hint
    assert "1 performance note(s): line 8: erf on fp64 tiles" in result.summary
    record = rt.store.get(result.kernel_id)
    assert record is not None
    assert [(a["kind"], a["line"], a["pointer"]) for a in record.unmasked_accesses] == [
        ("load", 8, "x_ptr"), ("store", 8, "y_ptr")]
    assert record.launch_info()["unmasked_accesses"][0]["source_line"].startswith("tl.store(y_ptr + offs")
    fp32 = anyio.run(compile_kernel, rt, CompileRequest(source=FP64_ERF, constexprs={"BLOCK": 64}))
    assert not [d for d in fp32.diagnostics if d.message.startswith("performance:")]


def test_only_type_errors_are_retried_with_the_other_kind() -> None:
    """A kernel that fails for another reason (here: a compile-time limit) is not compiled again per argument:
    the answer comes before the kernel or the spec is looked at (both None here)."""
    from tools.arg_kinds import argument_kind_mistake

    failure = {"kind": "LimitError", "message": "compile-time work passed its limit", "line": 3}
    assert argument_kind_mistake(None, None, {"n": "*fp32"}, {}, "k", failure) is None  # type: ignore[arg-type]


_SCALE = """\
import triton
import triton.language as tl


@triton.jit
def scale_kernel(X, Out, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Out + offs, tl.load(X + offs, mask=mask) * alpha, mask=mask)
"""


def test_a_tensor_parameter_assumed_a_scalar_by_its_name_is_named(rt: Runtime) -> None:
    """compile_kernel with no types: X and Out have no 'ptr' in their names, so they were taken for
    scalars; the error says so at the parameter and gives the signature that fixes it."""
    with pytest.raises(ToolInputError) as info:
        anyio.run(compile_kernel, rt, CompileRequest(source=_SCALE, constexprs={"BLOCK": 64}))
    message = info.value.message
    assert message.startswith("no types were given for 'X', 'Out', so they were assumed scalars (X: i32, Out: i32"), \
        message
    assert "pass signature={'X': '*fp32', 'Out': '*fp32'}" in message and info.value.data["arguments"] == ["X", "Out"]
    ok = anyio.run(compile_kernel, rt, CompileRequest(source=_SCALE, constexprs={"BLOCK": 64},
                                                      signature={"X": "*fp32", "Out": "*fp32"}))
    assert ok.signature["alpha"] == "fp32"


def test_a_tensor_for_a_float_scalar_suggests_a_float(rt: Runtime) -> None:
    args = {"X": {"shape": [300]}, "Out": {"shape": [300], "init": "empty"}, "alpha": {"shape": [1]}, "n": 300}
    req = LaunchRequest(source=_SCALE, constexprs={"BLOCK": 64}, grid=["cdiv(300, BLOCK)"], args=args)
    with pytest.raises(ToolInputError) as info:
        anyio.run(launch_kernel, rt, req)
    message = info.value.message
    assert message.startswith("args['alpha']: a tensor spec was given, but scale_kernel uses alpha as a scalar")
    assert 'give a number, e.g. "alpha": 1.0 (or signature={"alpha": "fp32"}' in message, message
