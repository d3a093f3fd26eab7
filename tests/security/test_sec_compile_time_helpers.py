"""Compile-time helpers in kernel source text (`@triton.constexpr_function`, `@tl.constexpr` on a def) are
evaluated by the frontend's closed-world evaluator, never executed: every attack on the frontend fails inside
one the same way, their work is bounded, and the Python side of the feature (running a helper as Python) is
out of reach of text."""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzzing import CompileChild
from test_sec_frontend import CODE_EXECUTION, _check

HELPER_HEADER = """\
import math
import compiler
import triton
import triton.language as tl


@triton.jit
def helper(a):
    return a + 1


@{decorator}
def pick(n):
    offs = n
"""
HELPER_LINE = HELPER_HEADER.count("\n") + 1
KERNEL = """    return n


@triton.jit
def attack_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = pick(BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32) + x, mask=offs < n)
"""


def helper_kernel(body: str, decorator: str = "triton.constexpr_function") -> str:
    return HELPER_HEADER.format(decorator=decorator) + "    " + body + "\n" + KERNEL


def _refused(child: CompileChild, source: str, marker: Path, line: int | None, seconds: float = 10) -> None:
    outcome = _check(child, source, marker, line)
    assert outcome.seconds < seconds, f"took {outcome.seconds:.1f} s"


# the attacks that do not need the kernel's own tensors (offs is a number inside the helper)
_IN_HELPER = sorted(n for n in CODE_EXECUTION if n not in ("inline_asm_cpu", "device_print_environ"))


@pytest.mark.parametrize("decorator", ["triton.constexpr_function", "tl.constexpr"])
@pytest.mark.parametrize("name", _IN_HELPER)
def test_code_execution_inside_a_helper_is_refused(child: CompileChild, tmp_path: Path, name: str,
                                                   decorator: str) -> None:
    marker = tmp_path / "pwned"
    _refused(child, helper_kernel(CODE_EXECUTION[name].format(marker=marker), decorator), marker, HELPER_LINE)


HELPER_BOMBS = {
    "while_forever": "while True:\n        pass",
    "while_counting": "i = 0\n    while i >= 0:\n        i += 1",
    "huge_range": "for i in range(10**9):\n        offs = i",
    "nested_ranges": "for i in range(60000):\n        for j in range(60000):\n            offs = j",
    "string_doubling": 'x = "A"\n    for i in range(64):\n        x = x + x',
    "int_growth": "x = 3\n    for i in range(64):\n        x = x * x",
    "recursion": "return pick(n + 1)",
}


@pytest.mark.parametrize("name", sorted(HELPER_BOMBS))
def test_helper_work_is_bounded(child: CompileChild, tmp_path: Path, name: str) -> None:
    deadline, child.deadline_s = child.deadline_s, 15.0  # a bomb that is not bounded is a hang
    try:
        _refused(child, helper_kernel(HELPER_BOMBS[name]), tmp_path / "pwned", None, seconds=12)
    finally:
        child.deadline_s = deadline


KERNEL_SIDE = {
    # the Python side of the feature is not reachable from text
    "constexpr_function_value": "x = triton.constexpr_function",
    "runtime_jit": "x = triton.runtime.jit.constexpr_function",
    "compiler_constexpr_function": "x = compiler.constexpr_function",
    "wrap_lambda": "x = triton.constexpr_function(lambda: 0)",
    "constexpr_wraps_builtin": "x = tl.constexpr(open)",
    # a helper's result and arguments are compile-time values only
    "helper_of_a_tensor": "x = pick(offs)",
    "helper_fn_attribute": "x = pick.fn",
    "helper_globals": "x = pick.__globals__",
    # .value of a number is the number, nothing more
    "int_value_class": "x = BLOCK.value.__class__",
    "int_value_value_dict": "x = BLOCK.value.value.__dict__",
    "str_value_format": 'x = "{{0.__class__}}".value.format(1)',
}


@pytest.mark.parametrize("name", sorted(KERNEL_SIDE))
def test_helpers_reach_nothing_from_the_kernel(child: CompileChild, tmp_path: Path, name: str) -> None:
    source = HELPER_HEADER.format(decorator="triton.constexpr_function") + "    return n\n" + \
        KERNEL.replace("    x = pick(BLOCK)\n", "    " + KERNEL_SIDE[name] + "\n    x = 1.0\n").split("\n", 1)[1]
    line = source.splitlines().index("    " + KERNEL_SIDE[name]) + 1
    _refused(child, source, tmp_path / "pwned", line)


def test_a_helper_returning_a_runtime_value_is_refused(child: CompileChild, tmp_path: Path) -> None:
    _refused(child, helper_kernel("return tl.arange(0, 16)"), tmp_path / "pwned", None)
