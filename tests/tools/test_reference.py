"""The reference evaluator: what it computes, and everything it refuses (with a located message)."""

from __future__ import annotations

import pytest
import torch

from tools.errors import ToolInputError
from tools.reference import evaluate_expression, parse_reference


@pytest.fixture
def env() -> dict[str, object]:
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.randn(4, 8, generator=g), "n": 32}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("x + y", lambda x, y: x + y),
        ("torch.softmax(x, dim=-1)", lambda x, y: torch.softmax(x, dim=-1)),
        ("F.layer_norm(x, (8,))", lambda x, y: torch.nn.functional.layer_norm(x, (8,))),
        (
            "torch.nn.functional.gelu(x, approximate='tanh')",
            lambda x, y: torch.nn.functional.gelu(x, approximate="tanh"),
        ),
        ("(x * 2 - 1).half().float()", lambda x, y: (x * 2 - 1).half().float()),
        ("x.to(torch.float16)", lambda x, y: x.half()),
        ("x @ y.T", lambda x, y: x @ y.T),
        ("torch.max(x, dim=1).values", lambda x, y: x.max(dim=1).values),
        ("x.sum(dim=1, keepdim=True) / math.sqrt(8)", lambda x, y: x.sum(1, keepdim=True) / 8**0.5),
        ("torch.where(x > 0, x, 0.0)", lambda x, y: torch.where(x > 0, x, 0.0)),
        ("x[:, :4] * y[None, 0, 4:]", lambda x, y: x[:, :4] * y[None, 0, 4:]),
        ("torch.cumsum(x, 0)[..., ::2]", lambda x, y: torch.cumsum(x, 0)[..., ::2]),
        ("-x ** 2 + abs(-3)", lambda x, y: -(x**2) + 3),
        ("(x > 0) & ~(y > 0)", lambda x, y: (x > 0) & ~(y > 0)),
    ],
)
def test_evaluates_like_torch(env: dict[str, object], expression: str, expected) -> None:
    got = evaluate_expression(expression, env)
    torch.testing.assert_close(got, expected(env["x"], env["y"]))


def test_scalars_and_shapes(env: dict[str, object]) -> None:
    assert evaluate_expression("n // 4 * 2", env) == 16
    assert evaluate_expression("x.shape[-1] + n", env) == 40


def _refused(expression: str, env: dict[str, object], **kw: object) -> str:
    with pytest.raises(ToolInputError) as info:
        evaluate_expression(expression, env, **kw)  # type: ignore[arg-type]
    return str(info.value)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "function '__import__' is not allowed"),
        ("x.__class__", "attribute '__class__' is not allowed"),
        ("x.__class__.__mro__[1].__subclasses__()", "is not allowed"),
        ("torch.load('weights.pt')", "torch.load is not an allowed function"),
        ("torch.bincount(x.int(), minlength=8)", "(x[:, None] == torch.arange(n)).sum(0)"),
        ("torch.nn.Module()", "namespace 'torch.nn' is not allowed"),
        ("torch.ops.aten.add(x, y)", "is not allowed"),
        ("os.system('true')", "unknown name 'os'"),
        ("x.data", "attribute 'data' is not allowed"),
        ("x._version", "attribute '_version' is not allowed"),
        ("x.add_(1)", "In-place methods are never allowed"),
        ("torch.add(x, y, out=x)", "keyword `out=` is not allowed"),
        ("getattr(x, 'T')", "function 'getattr' is not allowed"),
        ("(lambda: x)()", "lambda is not supported"),
        ("[v for v in x]", "comprehensions are not supported"),
        ("x if n else y", "torch.where"),
        ("x and y", "`and`/`or` are not supported"),
        ("0 < x < 1", "chained comparisons"),
        ("x.to('cuda')", "takes only a dtype"),
        ("10 ** 10 ** 10", "integer power too large"),
        ("'a' * 10 ** 9", "operator needs tensors or numbers"),
        ("torch.zeros(10 ** 12)", "would create 1000000000000 elements"),
        ("x.repeat(100000, 100000)", "would create"),
        ("torch.outer(torch.arange(100000), torch.arange(100000))", "would create"),
        ("x +", "syntax error"),
        ("z * 2", "unknown name 'z'"),
        ("x @ y", "evaluation failed"),
    ],
)
def test_refuses_with_a_located_message(env: dict[str, object], expression: str, message: str) -> None:
    text = _refused(expression, env, max_elements=1 << 24)
    assert message in text
    assert expression.strip() in text  # the expression is echoed with a caret under the offending column
    assert "^" in text or "syntax" in text


def test_column_points_at_the_attribute(env: dict[str, object]) -> None:
    text = _refused("x.sum().__class__", env)
    assert "(column 9)" in text
    caret_line = text.splitlines()[2]
    assert caret_line.index("^") == 2 + 8


def test_size_limits_of_the_text() -> None:
    with pytest.raises(ToolInputError, match="characters; the limit is 10"):
        parse_reference("x + x + x + x", names=["x"], max_chars=10)
    with pytest.raises(ToolInputError, match="syntax nodes"):
        parse_reference(" + ".join(["x"] * 100), names=["x"], max_nodes=50)
    with pytest.raises(ToolInputError, match="levels deep"):
        parse_reference("-" * 60 + "x", names=["x"], max_depth=40)


def test_names_used_and_label() -> None:
    ref = parse_reference("torch.exp(a) + b.sum()", names=["a", "b", "c"], label="reference['out']")
    assert ref.names_used == {"a", "b"}
    with pytest.raises(ToolInputError, match=r"^reference\['out'\]: unknown name 'q'"):
        parse_reference("q", names=["a"], label="reference['out']")


def test_argument_named_like_a_namespace_is_a_value() -> None:
    F = torch.ones(3)
    assert torch.equal(evaluate_expression("F * 2", {"F": F}), F * 2)


def test_the_language_lists_only_what_the_installed_torch_has() -> None:
    """The server validates expressions with the allow-lists alone (tools/reference_language.py imports no
    torch): every function they list must be a callable of its namespace, and every dtype name torch's."""
    from tools import reference_language as lang
    from tools.reference import DTYPES

    objects = {"torch": torch, "torch.nn.functional": torch.nn.functional, "F": torch.nn.functional,
               "torch.special": torch.special, "torch.linalg": torch.linalg, "math": __import__("math")}
    assert set(lang.NAMESPACES) == set(objects)
    for namespace, names in lang.NAMESPACES.items():
        missing = sorted(n for n in names if not callable(getattr(objects[namespace], n, None)))
        assert not missing, f"{namespace}: {missing}"
    assert set(DTYPES) == lang.DTYPE_NAMES


def test_a_listed_name_that_is_not_a_function_is_refused_where_the_server_validates() -> None:
    with pytest.raises(ToolInputError, match="torch.float16 is not an allowed function"):
        parse_reference("torch.float16(x)", names=["x"])
    with pytest.raises(ToolInputError, match="torch.frobnicate is not an allowed function"):
        parse_reference("torch.frobnicate(x)", names=["x"])


@pytest.mark.parametrize("expression", [
    "F.embedding(torch.arange(4), w, max_norm=1.0)",  # renormalizes the rows of its weight in place
    "F.relu(w, True)",  # inplace given by position
    "F.embedding(torch.arange(4), w, None, 0.5)",  # max_norm given by position
])
def test_a_call_that_writes_into_its_argument_is_refused_and_the_argument_kept(expression: str) -> None:
    """A reference runs on the launch's own inputs before the kernel does: a call that changed one
    in place would change what the kernel reads and what it is checked against."""
    w = torch.randn(4, 3) * 10
    kept = w.clone()
    with pytest.raises(ToolInputError, match="changed its argument in place") as info:
        evaluate_expression(expression, {"w": w})
    assert "inplace=True, or F.embedding's max_norm" in str(info.value)
    assert torch.equal(w, kept)  # refused by the sizing pass, on meta tensors, before any real call


def test_inplace_keyword_is_refused_by_the_validator() -> None:
    with pytest.raises(ToolInputError, match="keyword `inplace=` is not allowed"):
        parse_reference("F.relu(w, inplace=True)", names=["w"])
