"""generate_kernel's expression comes from a client: attacks on it through the tool (in-memory client,
real worker processes, canaries in the environment), and a bounded fuzz of the translator itself.

Each attack must end in a clear tool error with no side effect, quickly, and the next call must work.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sec_tools import assert_clear_error, call

from tools.errors import ToolInputError
from tools.generate.group import build_group
from tools.generate.lowerings import LOWERINGS
from tools.generate.translate import Translator
from tools.reference_program import parse_program
from tools.specs import TensorSpec

pytestmark = pytest.mark.anyio

X = {"x": {"shape": [8, 16]}, "w": {"shape": [16]}}


async def generate(client: Client, expression: str, args: dict[str, Any] | None = None,
                   **extra: Any) -> tuple[Any, str]:
    return await call(client, "generate_kernel", {"expression": expression, "args": args or X, **extra})


async def next_generate_works(client: Client) -> None:
    result, text = await generate(client, "torch.softmax(x * 2 + w, dim=-1)")
    assert not result.is_error, text
    assert result.structured_content["passed"] is True


CODE = {
    "import_call": "__import__('os').system('touch {marker}')",
    "dunder_walk": "x.__class__.__mro__[1].__subclasses__()",
    "getattr": "getattr(x, '__class__')",
    "open": "open('{marker}', 'w')",
    "exec": "exec('import os')",
    "eval": "eval('1')",
    "lambda": "(lambda: x)()",
    "comprehension": "[t for t in (x, w)][0]",
    "walrus": "(y := x) + y",
    "fstring": "f'{{x}}'",
    "torch_load": "torch.load('{marker}')",
    "torch_ops": "torch.ops.aten.add(x, w)",
    "torch_private": "torch._C._get_tracing_state()",
    "namespace_dict": "F.__dict__",
    "math_loader": "math.__loader__",
    "storage": "x.storage()",
    "grad_fn": "x.grad_fn",
    "data": "x.data + w",
    "inplace": "x.add_(w)",
    "out_keyword": "torch.add(x, w, out=x)",
    "kwargs_unpack": "torch.add(**x)",
    "star_unpack": "torch.add(*x)",
    "string_method": "'abc'.join(x)",
    "builtins_name": "__builtins__",
    "type_call": "type(x)",
}


@pytest.mark.parametrize("name", sorted(CODE))
async def test_no_code_runs(client: Client, tmp_path: Path, name: str) -> None:
    marker = tmp_path / "pwned"
    start = time.monotonic()
    result, text = await generate(client, CODE[name].format(marker=marker))
    assert_clear_error(result, text)
    assert not marker.exists()
    assert time.monotonic() - start < 15
    await next_generate_works(client)


STATEMENTS = {
    "import": ("import os", "statements are not supported"),
    "from_import": ("from os import system", "statements are not supported"),
    "def": ("def f():\n    return 1", "statements are not supported"),
    "for": ("for i in (1, 2):\n    y = x", "statements are not supported"),
    "with": ("with x:\n    y = x", "statements are not supported"),
    "del": ("del x", "statements are not supported"),
    "global": ("global x", "statements are not supported"),
    "attribute_target": ("x.shape = 3", "assign to one plain name"),
    "subscript_target": ("y = x; y[0] = 1", "assign to one plain name"),
    "tuple_target": ("a, b = x, w", "assign to one plain name"),
    "chain_target": ("a = b = x", "assign to one plain name"),
    "augmented": ("y = x; y += 1", "only plain assignments"),
    "annotated": ("y: int = 1", "only plain assignments"),
    "shadow_torch": ("torch = x", "cannot be assigned"),
    "shadow_builtins": ("__builtins__ = x", "cannot be assigned"),
    "private_target": ("_y = x", "cannot be assigned"),
    "shadow_arg": ("x = w", "is an argument"),
    "twice": ("y = x; y = w", "assigned twice"),
    "bare_not_last": ("x + 1; y = x", "bare expression can only be the last"),
    "syntax": ("y = (x + ", "syntax error"),
    "use_before_assign": ("y = z + x; z = x", "unknown name 'z'"),
}


@pytest.mark.parametrize("name", sorted(STATEMENTS))
async def test_only_assignments_are_accepted(client: Client, name: str) -> None:
    text_in, message = STATEMENTS[name]
    result, text = await generate(client, text_in)
    assert_clear_error(result, text, message)


async def test_unknown_functions_list_the_allowed_ones(client: Client) -> None:
    result, text = await generate(client, "torch.cumsum(x, dim=-1)")
    assert_clear_error(result, text, "cannot be fused")
    assert "close names: torch.sum" in text and "generate_kernel's description lists every function" in text
    tools = {t.name: t for t in await client.list_tools()}
    description = tools["generate_kernel"].description or ""
    assert "F.{" in description and "softmax" in description and "layer_norm" in description
    result, text = await generate(client, "torch.frobnicate(x)")
    assert_clear_error(result, text, "not an allowed function", "Allowed torch functions: ")


BOMBS = {
    "long": ("x" + " + x" * 1200, "characters"),
    "deep": ("(" * 300 + "x" + ")" * 300, "nested"),
    "many_statements": ("; ".join(f"y{i} = x" for i in range(20)), "statements"),
    "doubling_chain": ("a0 = x + x; " + "; ".join(f"a{i} = a{i - 1} + a{i - 1}" for i in range(1, 16)),
                       "syntax nodes"),
    "many_ops": ("; ".join(f"a{i} = " + " + ".join(["x"] * 20) for i in range(15)) + "; y = a0 + a14",
                 "more than"),
    "int_power": ("x * 2 ** 10 ** 10", "too large"),
    "int_product": ("x * (2 ** 200 * 2 ** 200)", "too large"),
    "float_overflow": ("x * math.exp(1e6)", "cannot compute"),
    "broadcast": ("a + b", "limit per tensor"),
    "expand": ("x.expand(2 ** 30, 8, 16)", "limit per tensor"),
    "reshape": ("x.reshape(3, -1)", "does not apply"),
    "float_string": ("x * float('nan2')", "float() takes"),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
async def test_size_bombs_are_refused_quickly(client: Client, name: str) -> None:
    expression, message = BOMBS[name]
    args = {**X, "a": {"shape": [1 << 11, 1]}, "b": {"shape": [1, 1 << 11]}} if name == "broadcast" else X
    start = time.monotonic()
    result, text = await generate(client, expression, args)
    assert_clear_error(result, text, message)
    assert time.monotonic() - start < 15  # a loaded CI machine; a blow-up would take far longer
    await next_generate_works(client)


@pytest.mark.parametrize(("args", "extra", "message"), [
    ({"x\nimport os": {"shape": [4]}}, {}, "cannot name an argument"),
    ({"torch": {"shape": [4]}}, {}, "cannot name an argument"),
    ({"__class__": {"shape": [4]}}, {}, "cannot name an argument"),
    ({"x": {"shape": [4], "init": "empty"}}, {}, "init 'empty'"),
    ({"x": {"shape": [4], "device": "meta"}}, {}, "device"),
    (X, {"kernel_name": "k(x_ptr):\n    pass\n\n\ndef evil"}, "kernel_name"),
    (X, {"kernel_name": "float"}, "kernel_name"),
    (X, {"outputs": ["x"]}, "does not assign"),
    ({f"a{i}": 1 for i in range(40)}, {}, "limit is"),
])
async def test_arguments_are_checked(client: Client, args: dict[str, Any], extra: dict[str, Any],
                                     message: str) -> None:
    result, text = await generate(client, "x + 1" if "x" in args else "a0 + 1", args, **extra)
    assert_clear_error(result, text, message)


async def test_expression_text_never_reaches_the_kernel_as_code(client: Client) -> None:
    """Strings and comments of the expression reach the kernel only as one-line comments."""
    result, text = await generate(client, "s = 'a\\nimport os\\n'  # x\nout2 = x * 2")
    assert not result.is_error, text
    source = result.structured_content["source"]
    assert "import os" not in [line.strip() for line in source.splitlines()]
    assert all(line.startswith(("import ", "from ", "@", "def ", "    ", "")) for line in source.splitlines())
    assert result.structured_content["passed"] is True


# --- the translator alone, on random expressions of the reference language -------------------------------

_ATOMS = ["x", "w", "s", "2", "0.5", "-1", "x.shape[-1]", "float('-inf')", "torch.pi", "x.T", "x[:, None]",
          "x.sum(-1, keepdim=True)", "x.float()", "(x > 0)", "w.half()"]
_UNARY = ["torch.exp({})", "F.gelu({})", "torch.softmax({}, dim=-1)", "{}.mean(-1)", "F.silu({})",
          "torch.rsqrt({})", "-{}", "{}.sum(0)", "torch.sigmoid({})", "F.layer_norm({}, (16,))",
          "torch.logsumexp({}, -1)", "{}.amax(-1, keepdim=True)", "{}.t()", "{}.to(torch.bfloat16)"]
_BINARY = ["{} + {}", "{} * {}", "{} - {}", "{} / {}", "{} ** {}", "{} @ {}", "torch.maximum({}, {})",
           "torch.where({} > 0, {}, 0.0)", "{} < {}"]


@st.composite
def reference_expressions(draw: st.DrawFn, depth: int = 4) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(_ATOMS))
    if draw(st.booleans()):
        return draw(st.sampled_from(_UNARY)).format(draw(reference_expressions(depth - 1)))
    a, b = draw(reference_expressions(depth - 1)), draw(reference_expressions(depth - 1))
    return draw(st.sampled_from(_BINARY)).format(a, b)


def test_translator_fuzz_gives_results_or_tool_errors() -> None:
    """Random expressions: a group, or a ToolInputError; never another exception."""
    args = {"x": TensorSpec(shape=[8, 16]), "w": TensorSpec(shape=[16]), "s": 0.5}
    outcomes = {"ok": 0, "refused": 0}

    @settings(max_examples=300, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(reference_expressions())
    def run(expression: str) -> None:
        try:
            program = parse_program(expression, arg_names=list(args), outputs=None, max_chars=2000, max_nodes=400,
                                    max_depth=40)
            tr = Translator(args, LOWERINGS)  # type: ignore[arg-type]
            build_group(tr, tr.run(program))
            outcomes["ok"] += 1
        except ToolInputError as exc:
            assert exc.message.strip() and "Traceback" not in exc.message
            outcomes["refused"] += 1

    run()
    assert outcomes["ok"] > 20 and outcomes["refused"] > 20, outcomes
