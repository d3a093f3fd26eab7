"""The frontend's closed world: kernel text reaches only compile-time values, within limits.

Every case compiles source text with `compile_source` (parsed, never executed) for the CPU
target and expects a located CompilationError: the right line, a column, the source line, and
no side effect. The limits are closed.py's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

import compiler
from compiler.frontend import closed, limits

HEADER = "import triton\nimport triton.language as tl\nimport math\n\n@triton.jit\ndef k(x_ptr, n):\n"


def compile_body(body: str, header: str = HEADER) -> compiler.CompilationError:
    src = header + "".join(f"    {line}\n" for line in body.splitlines())
    with pytest.raises(compiler.CompilationError) as info:
        compiler.compile_source(src, "k").compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")
    err = info.value
    assert err.lineno >= 1 and err.col >= 1, str(err)
    return err


def test_the_reported_payload_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    err = compile_body(
        'b = tl.block_type(tl.float32, [1]); b.__setattr__("__module__", "math")\n'
        f'type("P", (triton.sys.modules["subprocess"].Popen,), b.__dict__)(["touch", "{marker}"])')
    assert "__setattr__" in err.message and err.lineno == 7
    assert not marker.exists()


def test_environment_is_not_reachable() -> None:
    os.environ["ANVIL_CLOSED_WORLD_CANARY"] = "canary-8c1f"
    try:
        for body in ('tl.static_assert(False, str(triton.sys.modules["os"].environ))',
                     'tl.static_assert(False, str(triton.os.environ))',
                     'tl.static_assert(False, str(tl.core.sys))',
                     'tl.static_assert(False, str(math.__loader__))'):
            err = compile_body(body)
            assert "canary-8c1f" not in str(err)
            assert err.lineno == 7
    finally:
        del os.environ["ANVIL_CLOSED_WORLD_CANARY"]


@pytest.mark.parametrize("body, words", [
    ("x = tl.float32.__class__", "'__class__'"),
    ("x = (1).__class__.__mro__", "'__class__'"),
    ("x = getattr(tl, '__dict__')", "'__dict__'"),
    ("x = getattr(tl, '__' + 'loader__')", "'__loader__'"),
    ("x = type(tl.float32)", "'type'"),
    ("x = vars(tl)", "'vars'"),
    ("x = globals()", "'globals'"),
    ("setattr(tl.float32, 'ir', 1)", "'setattr'"),
    ("eval('1')", "'eval'"),
    ("exec('1')", "'exec'"),
    ("open('/etc/passwd')", "'open'"),
    ("__import__('os')", "'__import__'"),
    ("breakpoint()", "'breakpoint'"),
    ("x = '{0.__class__}'.format(tl.float32)", "'format'"),
    ("x = '%s' % (1,)", "%-formatting"),
    ("x = tl.core.functools", "'functools'"),
    ("x = tl.builtins.T", "'T'"),
    ("x = triton.runtime", "'runtime'"),
    ("x = triton.testing", "'testing'"),
    ("x = tl.float32.ir", "'ir'"),
    ("x = tl.dtype.SINT_TYPES.append('x')", "'append'"),
    ("x = tl.arange.__wrapped__", "'__wrapped__'"),
    ("x = math.factorial(100000)", "'factorial'"),
    ("x = tl.load(x_ptr, _sem=None)", "'_sem'"),
    ("x = [1, 2]; x.append(3)", "'append'"),
    ("x = b'A' * 10", "bytes"),
])
def test_unreachable(body: str, words: str) -> None:
    err = compile_body(body)
    assert words in str(err), str(err)


def test_language_objects_stay_unchanged() -> None:
    import compiler.language as tl

    before = (tl.float32.ir, list(tl.dtype.SINT_TYPES))
    compile_body("x = tl.dtype.SINT_TYPES\nx = x + ('int128',)\ntl.static_assert(False, str(x))")
    assert (tl.float32.ir, list(tl.dtype.SINT_TYPES)) == before


def test_module_level_text_is_closed_too() -> None:
    src = ("import triton\nimport triton.language as tl\nimport math\nimport os\nfrom os import system\n"
           "import subprocess as sp\nX = math.__dict__\nY = triton.sys\nZ = 2 ** 10\n\n@triton.jit\n"
           "def k(x_ptr):\n    tl.static_assert(Z == 1024)\n    tl.static_assert(False, str({name}))\n")
    for name in ("X", "Y", "os", "system", "sp"):
        with pytest.raises(compiler.CompilationError) as info:
            compiler.compile_source(src.replace("{name}", name), "k").compile({"x_ptr": "*fp32"}, {}, target="cpu")
        said = "which kernels cannot use" if name in ("os", "sp") else "is not defined"  # a module, or no value
        assert f"{name!r} {said}" in str(info.value) or f"{name!r} is the module" in str(info.value), str(info.value)
        assert said in str(info.value) and info.value.lineno == 14


@pytest.mark.parametrize("body", [
    "x = 'A' * (1 << 32)",
    "x = (0,) * 10**10",
    "x = 2 ** 10**10",
    "x = 1 << 10**12",
    "x = 10**400 * 10**400",
    "x = f'{0:>1000000000}'",
    "x = f'{1.5:.999999}'",
    "x = round(10**300, -10**9)",
    "t = (0,) * 60000\nu = (t,) * 60000\nx = str(u)",
    "for i in tl.static_range(10**9):\n    pass",
    "for i in tl.static_range(1 << 17):\n    pass",
    "x = 0x" + "f" * 400,
])
def test_bombs_are_refused_quickly(body: str) -> None:
    t0 = time.perf_counter()
    err = compile_body(body)
    assert isinstance(err, closed.LimitError) or "limit" in str(err), str(err)
    assert time.perf_counter() - t0 < 5


def test_a_deep_expression_is_a_located_limit() -> None:
    err = compile_body("x = " + " + ".join(["n"] * 20000))
    assert isinstance(err, closed.LimitError) and err.lineno == 7 and "nests" in err.message


def test_module_level_bomb_is_located() -> None:
    src = "import triton\nX = 2 ** 10**10\n\n@triton.jit\ndef k(x_ptr):\n    pass\n"
    with pytest.raises(closed.LimitError) as info:
        compiler.compile_source(src, "k")
    assert info.value.lineno == 2


def test_exponential_call_tree_hits_the_step_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_STEPS", 20_000)
    src = HEADER.replace("@triton.jit\ndef k(x_ptr, n):\n", "") + (
        "@triton.jit\ndef f(d: tl.constexpr):\n    if d > 0:\n        f(d - 1)\n        f(d - 1)\n\n"
        "@triton.jit\ndef k(x_ptr, n):\n    f(40)\n")
    t0 = time.perf_counter()
    with pytest.raises(closed.LimitError) as info:
        compiler.compile_source(src, "k").compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")
    assert "steps" in info.value.message and time.perf_counter() - t0 < 10


def test_unbounded_recursion_is_a_located_limit() -> None:
    src = HEADER.replace("@triton.jit\ndef k(x_ptr, n):\n", "") + (
        "@triton.jit\ndef f(d):\n    return f(d + 1)\n\n@triton.jit\ndef k(x_ptr, n):\n    f(1)\n")
    with pytest.raises(compiler.CompilationError) as info:
        compiler.compile_source(src, "k").compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")
    assert isinstance(info.value, closed.LimitError) and info.value.lineno >= 1


def test_what_kernels_use_still_works() -> None:
    """Compile-time Python that real kernels write: dtype queries, tuples, f-strings, math, builtins."""
    src = HEADER.replace("def k(x_ptr, n):\n", "def k(x_ptr, n, BLOCK: tl.constexpr):\n") + "\n".join([
        "    tl.static_assert(x_ptr.dtype.element_ty.is_floating() and tl.float32.primitive_bitwidth == 32)",
        "    tl.static_assert('int32' in tl.dtype.SINT_TYPES and tl.float16.name == 'fp16')",
        "    SHAPE: tl.constexpr = (BLOCK, 2 * BLOCK)",
        "    tl.static_assert(SHAPE[1] == 2 * BLOCK and len(SHAPE) == 2 and SHAPE.index(BLOCK) == 0)",
        "    tl.static_assert(f'{BLOCK:>4}' == '  16' and str(BLOCK).startswith('1'))",
        "    tl.static_assert(math.log2(BLOCK) == 4 and triton.cdiv(BLOCK, 3) == 6 and tl.cdiv(7, 2) == 4)",
        "    tl.static_assert(triton.next_power_of_2(BLOCK + 1) == 32 and max(1, BLOCK) == BLOCK)",
        "    tl.static_assert(isinstance(BLOCK, int) and not isinstance(BLOCK, tl.tensor))",
        "    tl.static_assert(hasattr(tl.float32, 'name') and not hasattr(tl.float32, 'nope'))",
        "    tl.static_assert(getattr(tl.float32, 'name') == 'fp32' and BLOCK.bit_length() == 5)",
        "    acc = tl.zeros((BLOCK,), dtype=tl.float32)",
        "    for i, w in enumerate((1.0, 2.0)):",
        "        acc += w * i",
        "    offs = tl.arange(0, BLOCK)",
        "    tl.store(x_ptr + offs, acc + tl.load(x_ptr + offs, mask=offs < n, other=0.0), mask=offs < n)",
    ]) + "\n"
    kernel = compiler.compile_source(src, "k")
    x = torch.randn(13)
    expected = x + 2.0
    kernel[(1,)](x, 13, BLOCK=16)
    torch.testing.assert_close(x, expected)


def test_python_kernels_cannot_reach_unknown_globals() -> None:
    import compiler.language as tl

    handle = open(os.devnull)  # noqa: SIM115 - an object kernels must not reach
    table = {"scale": 2, "nested": {"handle": handle}}

    @compiler.jit
    def k(x_ptr):
        tl.static_assert(len(handle.name) == 1)

    @compiler.jit
    def k2(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) * table["scale"])

    @compiler.jit
    def k3(x_ptr):
        tl.static_assert(os.sep == "/" and len(os.environ) > 0)

    try:
        with pytest.raises(compiler.CompilationError) as info:
            k[(1,)](torch.zeros(1))
        assert "global 'handle' is a TextIOWrapper" in str(info.value)
        with pytest.raises(compiler.CompilationError) as info:
            k2[(1,)](torch.zeros(1))
        assert "global 'table' is a dict" in str(info.value)  # holds an object that is not data
        with pytest.raises(compiler.CompilationError) as info:
            k3[(1,)](torch.zeros(1))
        assert "'environ'" in str(info.value)  # a module's attributes are read as data only
    finally:
        handle.close()


def test_device_print_prefix_is_text_not_a_format(capfd: pytest.CaptureFixture[str]) -> None:
    """A prefix with printf conversions prints as written (no reads or writes through %n / %s)."""
    src = HEADER + "    tl.device_print('%n%n%s%s%p%x ', tl.load(x_ptr))\n"
    kernel = compiler.compile_source(src, "k")
    kernel[(1,)](torch.full((1,), 2.5), 1)
    out = capfd.readouterr().out
    assert "%n%n%s%s%p%x 2.5" in out, out


def test_a_parameter_named_twice_is_located() -> None:
    src = "import triton\n\n@triton.jit\ndef k(a, n, a):\n    pass\n"
    with pytest.raises(compiler.CompilationError) as info:
        compiler.compile_source(src, "k").compile({"a": "*fp32", "n": "i32"}, {}, target="cpu")
    assert "'a' appears twice" in info.value.message and (info.value.lineno, info.value.col) == (4, 13)


def test_a_long_unrolled_chain_compiles_and_is_right() -> None:
    """1,000 chained elementwise ops: the CPU backend cuts the fused expression into buffers instead
    of recursing once per op (which ran out of Python stack at about 250)."""
    src = HEADER.replace("def k(x_ptr, n):\n", "def k(x_ptr, n, N: tl.constexpr):\n") + (
        "    offs = tl.arange(0, 16)\n    acc = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n"
        "    for i in tl.static_range(N):\n        acc = acc * 0.999 + 0.001 * i\n"
        "    tl.store(x_ptr + offs, acc, mask=offs < n)\n")
    x = torch.rand(13)
    expected = x.double()
    for i in range(1000):
        expected = expected * 0.999 + 0.001 * i
    compiler.compile_source(src, "k")[(1,)](x, 13, N=1000)
    torch.testing.assert_close(x, expected.float(), rtol=1e-4, atol=1e-4)


def test_str_join_is_sized_before_it_runs() -> None:
    err = compile_body("t = ('A' * 60000,) * 2\nx = ','.join(t)")
    assert isinstance(err, closed.LimitError) and "joining" in err.message
    err = compile_body("x = ','.join((1, 2))")
    assert "strings" in err.message
    src = HEADER + "    tl.static_assert(','.join(['=r'] * 2 + ['r'] * 3) == '=r,=r,r,r,r')\n"
    compiler.compile_source(src, "k").compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")


def test_from_imports_in_text_give_only_language_names() -> None:
    for imp in ("from compiler import runtime", "from compiler import errors", "from triton import testing",
                "from math import factorial"):
        name = imp.split()[-1]
        src = f"import triton\nimport triton.language as tl\n{imp}\n\n@triton.jit\ndef k(x_ptr):\n    x = {name}\n"
        with pytest.raises(compiler.CompilationError) as info:
            compiler.compile_source(src, "k").compile({"x_ptr": "*fp32"}, {}, target="cpu")
        assert info.value.lineno == 7, (imp, str(info.value))
    ok = ("import triton\nfrom triton.language import arange, float32\nfrom math import pi\n\n@triton.jit\n"
          "def k(x_ptr):\n    tl_x = arange(0, 4).to(float32) * pi\n")
    compiler.compile_source(ok, "k").compile({"x_ptr": "*fp32"}, {}, target="cpu")


def test_a_huge_constexpr_is_a_located_limit() -> None:
    src = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, N: tl.constexpr):\n    pass\n"
    with pytest.raises(closed.LimitError) as info:
        compiler.compile_source(src, "k").compile({"x_ptr": "*fp32"}, {"N": 10**400}, target="cpu")
    assert "constexpr 'N'" in info.value.message and info.value.lineno == 5


def test_text_of_language_objects_holds_no_addresses_or_paths() -> None:
    for expr in ("str(tl.load)", "str(tl)", "f'{math}'", "str((tl.sum, tl.float32))", "str(x_ptr.to)"):
        err = compile_body(f"tl.static_assert(False, {expr})")
        text = str(err)
        assert "0x" not in text and "/" not in text.split("static_assert failed:")[-1].split("\n")[0], text


def test_call_argument_errors_point_at_the_parameter() -> None:
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, n,\n"
           "      BLOCK: tl.constexpr):\n    pass\n")
    kernel = compiler.compile_source(src, "k")
    with pytest.raises(compiler.CompilationError) as info:
        kernel.compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")
    assert "'BLOCK'" in info.value.message and (info.value.lineno, info.value.col) == (6, 7)
    with pytest.raises(compiler.CompilationError) as info:
        kernel.compile({"x_ptr": "*fp32"}, {"BLOCK": 4}, target="cpu")
    assert "'n'" in info.value.message and info.value.lineno == 5
    with pytest.raises(compiler.CompilationError) as info:
        kernel.compile({"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 4, "NOPE": 1}, target="cpu")
    assert "NOPE" in info.value.message and info.value.lineno == 5


def test_dot_of_pointers_is_a_located_error() -> None:
    err = compile_body("offs = tl.arange(0, 16)\np = x_ptr + offs[:, None] * 16 + offs[None, :]\nx = tl.dot(p, p)")
    assert isinstance(err, compiler.errors.DtypeError) and err.lineno == 9
