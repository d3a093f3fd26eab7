"""Every user-facing compile error says what, where (file:line:col + caret) and what to do."""

from __future__ import annotations

import textwrap

import pytest
import torch

import compiler
from compiler import errors as E

HEADER = "import triton\nimport triton.language as tl\n\n"


def compile_text(body: str, sig: dict[str, str] | None = None, **constexprs: object) -> compiler.CompiledKernel:
    src = HEADER + textwrap.dedent(body)
    k = compiler.compile_source(src, kernel="k", filename="kern.py")
    return k.compile(sig or {"x_ptr": "*fp32", "n": "i32"}, constexprs)


def expect(cls: type[E.CompilationError], body: str, line: int, fragment: str, caret_at: str | None = None,
           sig: dict[str, str] | None = None, **constexprs: object) -> E.CompilationError:
    with pytest.raises(cls) as info:
        compile_text(body, sig, **constexprs)
    e = info.value
    assert e.filename == "kern.py"
    assert e.lineno == line, str(e)
    assert fragment in e.message, str(e)
    text = str(e)
    assert text.startswith(f"kern.py:{line}:{e.col}: {cls.__name__}: ")
    lines = text.splitlines()
    src_line = (HEADER + textwrap.dedent(body)).splitlines()[line - 1].strip()
    assert lines[1].strip() == src_line
    caret = lines[2].index("^") - 4
    if caret_at is not None:
        assert src_line[caret:].startswith(caret_at), (src_line, caret, text)
    assert "Traceback" not in text
    return e


def test_unsupported_construct() -> None:
    e = expect(E.UnsupportedError, """
        @triton.jit
        def k(x_ptr, n):
            with open("f") as f:
                pass
        """, 7, "unsupported construct: With", caret_at="with")
    assert e.hint


def test_lambda_is_unsupported() -> None:
    expect(E.UnsupportedError, """
        @triton.jit
        def k(x_ptr, n):
            f = lambda v: v + 1
        """, 7, "Lambda", caret_at="lambda")


def test_undefined_name() -> None:
    e = expect(E.UndefinedNameError, """
        @triton.jit
        def k(x_ptr, n):
            offs = tl.arange(0, 16)
            tl.store(x_ptr + offs, undefined_thing, mask=offs < n)
        """, 8, "'undefined_thing' is not defined", caret_at="undefined_thing")
    assert "define it" in e.hint


def test_unknown_tl_attribute() -> None:
    expect(E.UndefinedNameError, """
        @triton.jit
        def k(x_ptr, n):
            y = tl.no_such_function(1)
        """, 7, "no attribute 'no_such_function'", caret_at="tl.no_such_function")


def test_misspelt_tl_function_suggests_the_right_one() -> None:
    e = expect(E.UndefinedNameError, """
        @triton.jit
        def k(x_ptr, n):
            offs = tl.arrange(0, 16)
            y = tl.cumulative_sum(tl.load(x_ptr + offs), axis=0)
        """, 7, "module triton.language has no attribute 'arrange'", caret_at="tl.arrange")
    assert e.hint.startswith("did you mean tl.arange") and "language_reference" in e.hint
    e = expect(E.UndefinedNameError, """
        @triton.jit
        def k(x_ptr, n):
            offs = tl.arange(0, 16)
            y = tl.cumulative_sum(tl.load(x_ptr + offs), axis=0)
        """, 8, "'cumulative_sum'", caret_at="tl.cumulative_sum")
    assert "did you mean tl.cumsum?" in e.hint
    e = expect(E.UndefinedNameError, """
        @triton.jit
        def k(x_ptr, n):
            y = tl.qqqqqq(1)
        """, 7, "'qqqqqq'", caret_at="tl.qqqqqq")
    assert "did you mean" not in e.hint


def test_wrong_argument_count_to_jit_function() -> None:
    expect(E.ArgumentError, """
        @triton.jit
        def helper(a, b):
            return a + b

        @triton.jit
        def k(x_ptr, n):
            y = helper(1)
        """, 11, "missing argument 'b'", caret_at="helper(1)")


def test_too_many_arguments() -> None:
    expect(E.ArgumentError, """
        @triton.jit
        def helper(a):
            return a

        @triton.jit
        def k(x_ptr, n):
            y = helper(1, 2, 3)
        """, 11, "takes 1 arguments but 3 were given")


def test_wrong_argument_type() -> None:
    expect(E.DtypeError, """
        @triton.jit
        def k(x_ptr, n):
            v = tl.load(n)
        """, 7, "tl.load needs a pointer", caret_at="tl.load")


def test_shape_mismatch_in_broadcast() -> None:
    e = expect(E.ShapeError, """
        @triton.jit
        def k(x_ptr, n):
            a = tl.arange(0, 16)
            b = tl.arange(0, 32)
            c = a + b
        """, 9, "incompatible shapes [16] and [32]", caret_at="a + b")
    assert "[:, None]" in e.hint


def test_non_power_of_two_arange() -> None:
    e = expect(E.ShapeError, """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
        """, 7, "not a power of two", caret_at="tl.arange", BLOCK=100)
    assert "128" in e.hint


def test_runtime_value_where_constexpr_needed() -> None:
    e = expect(E.ConstexprError, """
        @triton.jit
        def k(x_ptr, n):
            offs = tl.arange(0, n)
        """, 7, "compile-time constants", caret_at="tl.arange")
    assert "constexpr" in e.hint


def test_dtype_error_floordiv_on_floats() -> None:
    expect(E.DtypeError, """
        @triton.jit
        def k(x_ptr, n):
            offs = tl.arange(0, 16)
            x = tl.load(x_ptr + offs)
            y = x // 2.0
        """, 9, "// needs integer operands", caret_at="x // 2.0")


def test_loop_carried_type_change() -> None:
    e = expect(E.DtypeError, """
        @triton.jit
        def k(x_ptr, n):
            acc = 0
            for i in range(n):
                acc += tl.load(x_ptr + i)
        """, 8, "changes type inside the loop", caret_at="for")
    assert "tl.zeros" in e.hint


def test_error_inside_inlined_function_reports_call_chain() -> None:
    with pytest.raises(E.ShapeError) as info:
        compile_text("""
            @triton.jit
            def bad(a):
                return a + tl.arange(0, 32)

            @triton.jit
            def k(x_ptr, n):
                y = bad(tl.arange(0, 16))
            """)
    text = str(info.value)
    assert info.value.lineno == 7
    assert "called from kern.py:11:" in text


def test_kernel_cannot_return_a_value() -> None:
    with pytest.raises(E.UnsupportedError) as info:
        compile_text("""
            @triton.jit
            def k(x_ptr, n):
                return n + 1
            """)
    assert "cannot return a value" in info.value.message
    assert info.value.lineno == 7


def test_syntax_error_is_located() -> None:
    with pytest.raises(E.CompilationError) as info:
        compiler.compile_source("import triton\n@triton.jit\ndef k(x:\n", filename="bad.py")
    assert info.value.filename == "bad.py"
    assert info.value.lineno == 3
    assert "syntax error" in info.value.message


def test_signature_missing_parameter() -> None:
    k = compiler.compile_source(HEADER + "@triton.jit\ndef k(x_ptr, n):\n    pass\n")
    with pytest.raises(E.ArgumentError, match="no type for parameter 'n'"):
        k.compile({"x_ptr": "*fp32"}, {})


def test_bad_signature_type() -> None:
    k = compiler.compile_source(HEADER + "@triton.jit\ndef k(x_ptr, n):\n    pass\n")
    with pytest.raises(E.ArgumentError, match="unknown type 'float7'"):
        k.compile({"x_ptr": "*fp32", "n": "float7"}, {})


@compiler.jit
def _copy(x_ptr, y_ptr, n, BLOCK: compiler.language.constexpr):
    offs = compiler.language.arange(0, BLOCK)
    compiler.language.store(y_ptr + offs, compiler.language.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class _OnOtherDevice:
    """A tensor as the launch sees one (dtype, device, data_ptr), on a device this machine may lack."""

    dtype = torch.float32
    device = torch.device("xpu")

    def data_ptr(self) -> int:
        return 0


def test_mixed_devices_at_launch() -> None:
    x = torch.zeros(16)
    with pytest.raises(E.LaunchError, match="different devices"):
        _copy[(1,)](x, _OnOtherDevice(), 16, BLOCK=16)


def test_meta_tensor_at_launch_runs_nothing() -> None:
    """A meta tensor (a torch op traced for shapes) holds no data: the launch compiles and runs nothing,
    also beside a CPU tensor (tests/torch/test_ops.py covers ops traced this way)."""
    x = torch.zeros(16)
    assert _copy[(1,)](x, torch.zeros(16, device="meta"), 16, BLOCK=16) is None
    assert _copy[(1,)](torch.zeros(16, device="meta"), x, 16, BLOCK=16) is None
    assert not x.any()


def test_unknown_launch_keyword() -> None:
    x = torch.zeros(16)
    with pytest.raises(E.LaunchError, match="unexpected keyword argument 'BLOKC'"):
        _copy[(1,)](x, x, 16, BLOKC=16)


def test_missing_launch_argument() -> None:
    x = torch.zeros(16)
    with pytest.raises(E.LaunchError, match="missing argument 'n'"):
        _copy[(1,)](x, x, BLOCK=16)


def test_bad_grid() -> None:
    x = torch.zeros(16)
    with pytest.raises(E.LaunchError, match="grid"):
        _copy[(1, 1, 1, 1)](x, x, 16, BLOCK=16)


def test_launch_error_has_no_internal_traceback() -> None:
    x = torch.zeros(16)
    try:
        _copy[(1,)](x, x, BLOCK=16)
    except E.LaunchError as e:
        assert e.__traceback__ is None or all(
            "compiler/runtime/launch.py" not in str(f) for f in [e.__traceback__.tb_frame.f_code.co_filename])


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_long_source_lines_and_messages_are_clipped_around_the_caret(where: str) -> None:
    """A kernel line of any length shows as a window around the caret, which still points at the
    column; a message quoting kernel text is clipped and says how much was left out."""
    from compiler.ir.core import Location

    body = {"start": "BAD" + "+b" * 400, "middle": "a+" * 400 + "BAD" + "+b" * 400, "end": "a+" * 400 + "BAD"}[where]
    line = "    x = " + body
    e = E.CompilationError("m" * 5000, Location("k.py", 3, line.index("BAD") + 1), line)
    first, shown, caret = str(e).splitlines()[:3]
    assert len(shown) < 300 and shown[caret.index("^"):].startswith("BAD")
    assert first.endswith("... (3,000 more characters)") and len(first) < 2100


@pytest.mark.parametrize(("call", "fragment"), [
    ("tl.atomic_add(x_ptr, 1.0, sem='seq_cst')", "tl.atomic_add sem='seq_cst' is not supported: use one of 'acq_rel'"),
    ("tl.atomic_max(x_ptr, 1.0, scope='device')", "tl.atomic_max scope='device' is not supported: use one of 'gpu'"),
    ("tl.atomic_cas(x_ptr, 0.0, 1.0, sem='strong')", "tl.atomic_cas sem='strong' is not supported"),
])
def test_an_unknown_memory_order_or_scope_is_refused_at_the_call(call: str, fragment: str) -> None:
    """Not passed on to a backend (the CPU used to ignore it, a GPU backend to fail on it)."""
    e = expect(E.ArgumentError, f"""
        @triton.jit
        def k(x_ptr, n):
            {call}
        """, 7, fragment, caret_at="tl.atomic_")
    assert e.hint and "(the default)" in e.hint


def test_the_documented_memory_orders_and_scopes_compile() -> None:
    for sem in ("acq_rel", "acquire", "release", "relaxed", None):
        for scope in ("gpu", "cta", "sys", None):
            ck = compile_text(f"""
                @triton.jit
                def k(x_ptr, n):
                    tl.atomic_add(x_ptr, 1.0, sem={sem!r}, scope={scope!r})
                """)
            assert f'sem="{sem or "acq_rel"}"' in ck.asm["tir"] and f'scope="{scope or "gpu"}"' in ck.asm["tir"]


_HOST_CALLS = """
import numpy as np
import math
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    {line}
    tl.store(x_ptr + o, x)
"""


@pytest.mark.parametrize(("line", "error", "words"), [
    ("x = np.exp(x)", E.UnsupportedError, ["'np' is the module 'numpy', which kernels cannot use", "tl.exp"]),
    ("x = math.exp(x)", E.ConstexprError, ["exp() takes compile-time numbers", "on tensor values use tl.exp"]),
    ("x = math.erf(x)", E.ConstexprError, ["on tensor values use tl.erf"]),
    ("acc = []; acc.append(x)", E.UndefinedNameError, ["has no attribute 'append'", "accumulate into a tile"]),
])
def test_host_library_calls_in_a_kernel_point_to_the_tl_functions(line: str, error: type, words: list[str]) -> None:
    src = _HOST_CALLS.format(line=line)
    with pytest.raises(error) as info:
        compiler.compile_source(src, kernel="k").compile({"x_ptr": "*fp32"}, {"BLOCK": 16}, target="cpu")
    text = str(info.value)
    assert "<kernel>:12:" in text and line.split(";")[-1].strip() in text, text
    for w in words:
        assert w in text, text
