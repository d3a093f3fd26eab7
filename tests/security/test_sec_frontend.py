"""Kernel source is data: attacks on the frontend's compile-time evaluation through ``compiler.compile_source``.

Each attack is compiled in a separate process (``fuzzing.CompileChild``) that holds the canary secrets in
its environment and a memory limit, so an attack that still works on the frontend hurts nothing. Each must
end in a located ``CompilationError`` pointing at the attack's line, within the deadline, leave no file
behind and leak no secret; the same process must then compile a valid kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fuzzing import CompileChild, judge_compile, leaked

from server.demo import VECTOR_ADD

SIGNATURE = {"out_ptr": "*fp32", "n": "i32"}
ADD_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}

HEADER = """\
import math
import compiler
import triton
import triton.language as tl


@triton.jit
def helper(a):
    return a + 1


@triton.jit
def attack_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
"""
ATTACK_LINE = HEADER.count("\n") + 1
FOOTER = "    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)\n"


def kernel(body: str) -> str:
    return HEADER + "    " + body + "\n" + FOOTER


# Statements of a kernel body; ``{marker}`` is a path that must not exist afterwards.
CODE_EXECUTION = {
    "issue_payload": 'b = tl.block_type(tl.float32, [1]); b.__setattr__("__module__", "math"); '
    'type("P", (triton.sys.modules["subprocess"].Popen,), b.__dict__)(["touch", "{marker}"])',
    "mro_subclasses": "x = tl.float32.__class__.__mro__[-1].__subclasses__()",
    "globals_builtins": 'x = tl.arange.__globals__["__builtins__"]["__import__"]("os").system("touch {marker}")',
    "dict": "x = tl.float32.__dict__",
    "setattr_dunder": 'tl.float32.__setattr__("name", "fp99")',
    "getattr_concat": 'x = getattr(tl.float32, "__" + "class__")',
    "type_call": "x = type(tl.float32)",
    "type_three_args": 'x = type("P", (), {{}})',
    "vars": "x = vars(tl)",
    "globals": "x = globals()",
    "locals": "x = locals()",
    "setattr": 'setattr(tl.float32, "name", "fp99")',
    "eval": 'x = eval("1 + 1")',
    "exec": 'exec("open(\'{marker}\', \'w\')")',
    "open": 'x = open("{marker}", "w")',
    "dunder_import": '__import__("os").system("touch {marker}")',
    "breakpoint": "breakpoint()",
    "format_walk": 'x = "{{0.__class__.__init__.__globals__}}".format(tl.float32)',
    "format_map": 'x = "{{a.__class__}}".format_map({{"a": tl.float32}})',
    "fstring_walk": 'x = f"{{tl.float32.__class__.__mro__}}"',
    "fstring_conversion": 'tl.static_assert(False, f"{{triton.sys.modules!r}}")',
    "triton_sys": 'x = triton.sys.modules["os"]',
    "triton_os": 'triton.os.system("touch {marker}")',
    "tl_core_sys": "x = tl.core.sys",
    "compiler_runtime": "x = compiler.runtime",
    "compiler_jit": "x = compiler.jit",
    "math_loader": "x = math.__loader__",
    "math_dict": "x = math.__dict__",
    "int_class": "x = (1).__class__.__subclasses__()",
    "str_class": 'x = "".__class__.__mro__',
    "constexpr_init_globals": "x = tl.constexpr.__init__.__globals__",
    "jit_fn_globals": "x = helper.fn.__globals__",
    "jit_fn_call": "x = helper.fn(1)",
    "jit_function_attr": "x = helper.src",
    "lambda": "f = lambda: 0",
    "comprehension": "x = [c for c in (1, 2)]",
    "mutate_dtype": "tl.float32.ir = 1",
    "mutate_list": 'tl.dtype.SINT_TYPES.append("int7")',
    "mutate_via_method": "tl.float32.__init__(\"int8\")",
    "import_os": "import os",
    "from_os_import": "from os import system",
    "import_as": "import subprocess as sp",
    "static_assert_environ": 'tl.static_assert(False, str(triton.sys.modules["os"].environ))',
    "static_print_environ": 'tl.static_print(triton.sys.modules["os"].environ)',
    "device_print_environ": 'tl.device_print("env", triton.sys.modules["os"].environ["ANVIL_TOKEN"])',
    # a dtype's .value is the dtype itself (Triton's constexpr-wrapped dtype arguments), and nothing more
    "dtype_value_class": "x = tl.float32.value.__class__",
    "dtype_value_ir": "x = tl.float32.value.value.ir",
    "dtype_value_setattr": 'tl.float32.value.__setattr__("name", "fp99")',
    # the standard library's private helpers are for trusted kernel files, not text
    "private_standard_helper": "x = tl.standard._log2(8)",
    "private_standard_import": "from triton.language.standard import _log2",
    # memory orders and scopes reach the generated assembly: only the listed words pass
    "atomic_sem_asm_injection": 'tl.atomic_add(out_ptr + offs, 1.0, sem="acq_rel\\"); trap; (\\"", mask=offs < n)',
    "atomic_scope_asm_injection": 'tl.atomic_add(out_ptr + offs, 1.0, scope="sys\\n.reg .b32 r;", mask=offs < n)',
    "atomic_sem_object": "tl.atomic_add(out_ptr + offs, 1.0, sem=tl.float32.__class__, mask=offs < n)",
    "inline_asm_cpu": 'x = tl.inline_asm_elementwise("syscall", "=r,r", [offs], dtype=tl.int32, is_pure=True, '
    "pack=1)",
}

MODULE_LEVEL = {
    "module_dict": "X = math.__dict__",
    "module_import_call": 'X = __import__("os")',
    "module_class_walk": "X = ().__class__.__base__.__subclasses__()",
    "module_open": 'X = open("{marker}", "w")',
}

BOMBS = {
    "string_repeat": 'x = "A" * (1 << 32)',
    "tuple_repeat": "x = (0,) * 10**10",
    "power": "x = 2 ** 10**10",
    "shift": "x = 1 << 10**12",
    "format_width": "x = format(0, '>1000000000')",
    "format_method_width": 'x = "{:>1000000000}".format(0)',
    "string_doubling": 'x = "A" * 100000\n    x = x * 100000\n    x = x * 100000',
    "int_to_str": "x = str(2 ** 200000)",
    "deep_sum": "x = " + " + ".join(["1"] * 20000),
    "deep_parens": "x = " + "(" * 3000 + "1" + ")" * 3000,
    "static_range_huge": "for i in tl.static_range(10**9):\n        offs = offs + 1",
    "static_range_unrolled": "for i in tl.static_range(1 << 20):\n        offs = offs + i",
}


def _check(child: CompileChild, source: str, marker: Path, line: int | None) -> Any:
    """The attack in `source` is refused, located (at `line` if given), harmlessly; its outcome."""
    outcome = child.compile(source, SIGNATURE, {"BLOCK": 16}, kernel="attack_kernel")
    problem = judge_compile(outcome)
    assert problem is None, problem
    assert outcome.outcome == "compilation_error", f"the attack compiled: {source}"
    assert outcome.located, outcome.message
    if line is not None:
        assert outcome.line == line, outcome.message
    assert not marker.exists(), "the attack created a file"
    assert leaked(outcome.message) is None
    after = child.compile(VECTOR_ADD, ADD_SIGNATURE, {"BLOCK": 64})
    assert after.outcome == "ok", after.message
    return outcome


@pytest.mark.parametrize("name", sorted(CODE_EXECUTION))
def test_code_execution_is_refused(child: CompileChild, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    _check(child, kernel(CODE_EXECUTION[name].format(marker=marker)), marker, ATTACK_LINE)


@pytest.mark.parametrize("name", sorted(MODULE_LEVEL))
def test_module_level_constants_are_data(child: CompileChild, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    source = HEADER.replace("\n\n@triton.jit\ndef helper", f"\n{MODULE_LEVEL[name].format(marker=marker)}\n"
                            "\n@triton.jit\ndef helper", 1) + "    x = X\n" + FOOTER
    _check(child, source, marker, None)


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_compile_time_bombs_are_bounded(child: CompileChild, name: str) -> None:
    deadline, child.deadline_s = child.deadline_s, 12.0  # a bomb that is not bounded is a hang
    try:
        outcome = child.compile(kernel(BOMBS[name]), SIGNATURE, {"BLOCK": 16}, kernel="attack_kernel")
    finally:
        child.deadline_s = deadline
    assert outcome.outcome == "compilation_error", f"{outcome.outcome}: {outcome.type} {outcome.message[:300]}"
    assert outcome.located and outcome.line >= ATTACK_LINE, outcome.message
    assert outcome.seconds < 10, f"took {outcome.seconds:.1f} s"
    after = child.compile(VECTOR_ADD, ADD_SIGNATURE, {"BLOCK": 64})
    assert after.outcome == "ok", after.message


def test_a_huge_memory_order_is_refused_with_a_bounded_message(child: CompileChild) -> None:
    for arg in ("sem", "scope"):
        body = f'tl.atomic_add(out_ptr + offs, 1.0, {arg}="x" * 60000, mask=offs < n)'
        outcome = child.compile(kernel(body), SIGNATURE, {"BLOCK": 16}, kernel="attack_kernel")
        assert outcome.outcome == "compilation_error" and outcome.line == ATTACK_LINE, outcome.message[:300]
        assert len(outcome.message) < 4000, len(outcome.message)


_CALL_TREE = "\n\n".join(f"@triton.jit\ndef f{i}(x):\n    return f{i + 1}(x) + f{i + 1}(x)" for i in range(40))
EXPONENTIAL_CALLS = f"""\
import triton
import triton.language as tl


{_CALL_TREE}


@triton.jit
def f40(x):
    return x


@triton.jit
def attack_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, f0(offs.to(tl.float32)), mask=offs < n)
"""

RECURSION = """\
import triton
import triton.language as tl


@triton.jit
def again(x):
    return again(x + 1)


@triton.jit
def attack_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, again(offs).to(tl.float32), mask=offs < n)
"""


@pytest.mark.parametrize("source", [EXPONENTIAL_CALLS, RECURSION], ids=["exponential_calls", "recursion"])
def test_call_trees_are_bounded(child: CompileChild, source: str) -> None:
    outcome = child.compile(source, SIGNATURE, {"BLOCK": 16}, kernel="attack_kernel")
    assert outcome.outcome == "compilation_error", f"{outcome.outcome}: {outcome.type} {outcome.message[:300]}"
    assert outcome.located and "Traceback" not in outcome.message
    assert outcome.seconds < 10, f"took {outcome.seconds:.1f} s"


def test_python_api_is_closed_in_process(tmp_path: Path) -> None:
    """The issue's payload through ``compiler.compile_source`` in this very process: refused, no process run."""
    import compiler

    marker = tmp_path / "pwned"
    source = kernel(CODE_EXECUTION["issue_payload"].format(marker=marker))
    with pytest.raises(compiler.CompilationError) as info:
        compiler.compile_source(source, "attack_kernel").compile(SIGNATURE, {"BLOCK": 16}, target="cpu")
    assert info.value.lineno == ATTACK_LINE and info.value.col > 0
    assert not marker.exists()


@pytest.mark.parametrize("name", ["c" * 200_000, "cumsun" * 20_000, "arange_" * 30_000])
def test_did_you_mean_of_huge_unknown_names_is_bounded(child: CompileChild, name: str) -> None:
    """An unknown `tl.<name>` is answered with the language's names spelled like it: a huge name
    costs no more than a short one, and the answer does not echo it back whole."""
    outcome = child.compile(kernel(f"x = tl.{name}"), SIGNATURE, {"BLOCK": 16}, kernel="attack_kernel")
    assert outcome.outcome == "compilation_error", f"{outcome.outcome}: {outcome.type} {outcome.message[:300]}"
    assert outcome.located and "Traceback" not in outcome.message
    assert outcome.seconds < 5, f"took {outcome.seconds:.1f} s"
    assert len(outcome.message) < 20_000


@pytest.mark.parametrize("precision", ["'x' * 100000", "'ieee' + 'x'", "a", "1.5"])
def test_dot_precision_is_checked_and_bounded(precision: str) -> None:
    """tl.dot's input_precision is a choice among three names: anything else (a huge string, a
    tensor, a number) is a located ArgumentError with a bounded message, on every target."""
    import compiler
    from compiler import errors

    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
           "def k(a_ptr, o_ptr):\n    r = tl.arange(0, 16)\n"
           "    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])\n"
           f"    tl.store(o_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, input_precision={precision}))\n")
    with pytest.raises(errors.CompilationError) as info:
        compiler.compile_source(src, kernel="k").compile({"a_ptr": "*fp32", "o_ptr": "*fp32"}, {}, target="cpu")
    text = str(info.value)
    assert "input_precision" in text and len(text) < 4000 and ":9:" in text


@pytest.mark.parametrize(("arg", "value"), [("lhs_format", "'x' * 60000"), ("lhs_format", "'e2m1' * 9000"),
                                            ("rhs_format", "a"), ("rhs_format", "1.5"), ("rhs_format", "None"),
                                            ("lhs_k_pack", "'x' * 60000"), ("fast_math", "a")])
def test_dot_scaled_arguments_are_checked_and_bounded(arg: str, value: str) -> None:
    """tl.dot_scaled's formats are a choice among five names and its flags are compile-time bools:
    anything else (a huge string, a tensor, a number, None) is a located error naming the
    argument, with a bounded message that does not quote the value whole."""
    import compiler
    from compiler import errors

    args = {"lhs_format": "'e4m3'", "rhs_format": "'e4m3'", arg: value}
    call = f"tl.dot_scaled(a, None, {args.pop('lhs_format')}, a, None, {args.pop('rhs_format')}"
    call += "".join(f", {k}={v}" for k, v in args.items()) + ")"
    src = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
           "def k(a_ptr, o_ptr):\n    r = tl.arange(0, 32)\n"
           "    a = tl.load(a_ptr + r[:, None] * 32 + r[None, :])\n"
           f"    tl.store(o_ptr + r[:, None] * 32 + r[None, :], {call})\n")
    with pytest.raises(errors.CompilationError) as info:
        compiler.compile_source(src, kernel="k").compile({"a_ptr": "*u8", "o_ptr": "*fp32"}, {}, target="cpu")
    err = info.value
    assert arg in err.message and len(str(err)) < 4000 and err.lineno == 9, str(err)[:500]
