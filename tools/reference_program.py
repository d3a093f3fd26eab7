"""Reference text with assignments: one reference expression, or a few assignments in the reference
language, parsed and validated, never executed. generate_kernel takes it as its expression; the
references and baselines of launch_kernel and benchmark take it too (:func:`parse_reference_text`).

    torch.softmax(x * scale + mask, dim=-1)
    mu = x.mean(-1, keepdim=True); xc = x - mu; y = xc * torch.rsqrt((xc * xc).mean(-1, keepdim=True) + eps)

Statements are separated by newlines or `;`. Each is `name = expression`, except that the last may
be a bare expression (its value is called `out`). Every expression passes the reference evaluator's
validator (tools/reference_language.py: allowed names, functions and attributes, size limits) over the
arguments and the names assigned before it. Nothing else is accepted: no other statement kinds, no
augmented or tuple assignment, no name assigned twice, no assignment to an argument or a namespace.

The reference a generated kernel is checked against is each output's expression with the earlier
assignments written into it (:func:`inline`), over the kernel's parameter names.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tools.errors import ToolInputError
from tools.reference_language import Reference, measure_tree, parse_reference

__all__ = ["Statement", "Program", "parse_program", "inline", "parse_reference_text", "setup_names",
           "setup_program", "MAX_STATEMENTS",
           "MAX_PROGRAM_CHARS", "DEFAULT_OUTPUT"]

MAX_STATEMENTS = 16
MAX_PROGRAM_CHARS = 4000
MAX_OUTPUTS = 4
DEFAULT_OUTPUT = "out"
_RESERVED_TARGETS = frozenset({"torch", "F", "math"})


@dataclass(frozen=True)
class Statement:
    """`target = tree`; `label` names it in messages ("expression", or "line 2")."""

    target: str
    tree: ast.expr
    label: str
    text: str  # the expression as validated (one line)


@dataclass(frozen=True)
class Program:
    statements: tuple[Statement, ...]
    outputs: tuple[str, ...]


def _refuse(stmt: ast.stmt, what: str, hint: str) -> ToolInputError:
    return ToolInputError(f"expression line {stmt.lineno}: {what}\n{hint}")


def parse_program(
    text: str,
    *,
    arg_names: Collection[str],
    outputs: list[str] | None,
    max_chars: int,
    max_nodes: int,
    max_depth: int,
) -> Program:
    """Parse and validate the expression text; raise ToolInputError saying what to change.

    `max_chars`, `max_nodes`, `max_depth`: the reference limits, applied to each statement."""
    if not isinstance(text, str) or not text.strip():
        raise ToolInputError("expression is empty; write e.g. 'torch.softmax(x, dim=-1)'.")
    if len(text) > MAX_PROGRAM_CHARS:
        raise ToolInputError(f"expression has {len(text)} characters; the limit is {MAX_PROGRAM_CHARS}.")
    try:
        module = ast.parse(text.strip(), mode="exec")
    except SyntaxError as exc:
        line = (exc.text or "").rstrip("\n")
        caret = " " * max((exc.offset or 1) - 1, 0) + "^"
        raise ToolInputError(
            f"expression: syntax error (line {exc.lineno}, column {exc.offset}): {exc.msg}\n  {line}\n  {caret}\n"
            "Write one expression, or assignments `name = expression` separated by ';' or newlines."
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise ToolInputError("expression: too deeply nested or invalid.") from None
    count, depth = measure_tree(module)
    if count > max_nodes * MAX_STATEMENTS or depth > max_depth + 2:
        raise ToolInputError(
            f"expression has {count} syntax nodes nested {depth} deep; the limits are {max_nodes} nodes and "
            f"{max_depth} levels per statement."
        )
    body = module.body
    if not body:
        raise ToolInputError("expression has no statements; write e.g. 'torch.softmax(x, dim=-1)'.")
    if len(body) > MAX_STATEMENTS:
        raise ToolInputError(f"expression has {len(body)} statements; the limit is {MAX_STATEMENTS}.")
    args = set(arg_names)
    known = set(args)
    statements: list[Statement] = []
    for i, stmt in enumerate(body):
        last = i == len(body) - 1
        target, value = _split(stmt, last, args, known)
        label = "expression" if len(body) == 1 else f"line {stmt.lineno}"
        try:
            line = ast.unparse(value)
        except (RecursionError, ValueError):
            raise _refuse(stmt, "the expression cannot be read back", "Write it more simply.") from None
        ref = parse_reference(line, names=sorted(known), label=label, max_chars=max_chars, max_nodes=max_nodes,
                              max_depth=max_depth)
        statements.append(Statement(target, ref.tree.body, label, ref.expression))
        known.add(target)
    assigned = [s.target for s in statements]
    wanted = list(outputs) if outputs else [assigned[-1]]
    if len(wanted) > MAX_OUTPUTS:
        raise ToolInputError(f"outputs names {len(wanted)} values; at most {MAX_OUTPUTS} can be written.")
    for name in wanted:
        if name not in assigned:
            raise ToolInputError(
                f"outputs names {name!r}, which the expression does not assign; assigned: {', '.join(assigned)}."
            )
    if len(set(wanted)) != len(wanted):
        raise ToolInputError("outputs names a value twice.")
    return Program(tuple(statements), tuple(wanted))


def _split(stmt: ast.stmt, last: bool, args: set[str], known: set[str]) -> tuple[str, ast.expr]:
    """(target, value) of one statement, or the reason it is refused."""
    if isinstance(stmt, ast.Expr):
        if not last:
            raise _refuse(stmt, "a bare expression can only be the last statement",
                          "Assign it to a name (`h = ...`) or move it to the end.")
        if DEFAULT_OUTPUT in known:
            raise _refuse(stmt, f"the last expression's value is called {DEFAULT_OUTPUT!r}, which is already taken",
                          "Assign the value to a new name instead: `y = ...`.")
        return DEFAULT_OUTPUT, stmt.value
    if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        raise _refuse(stmt, "only plain assignments `name = expression` are supported",
                      "Write `y = y + z` with a new name: `y2 = y + z`.")
    if not isinstance(stmt, ast.Assign):
        raise _refuse(stmt, f"{type(stmt).__name__} statements are not supported",
                      "Write expressions and assignments `name = expression` only.")
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        raise _refuse(stmt, "assign to one plain name", "Write `a = ...` (no tuples, subscripts or chains).")
    name = stmt.targets[0].id
    if name.startswith("_") or name in _RESERVED_TARGETS:
        raise _refuse(stmt, f"{name!r} cannot be assigned", "Choose another name.")
    if name in args:
        raise _refuse(stmt, f"{name!r} is an argument; arguments are never assigned",
                      "Give the new value its own name.")
    if name in known:
        raise _refuse(stmt, f"{name!r} is assigned twice", "Give each value its own name.")
    return name, stmt.value


class _Substitute(ast.NodeTransformer):
    """Names of assigned values replaced by their expressions; arguments renamed."""

    def __init__(self, values: Mapping[str, ast.expr], rename: Mapping[str, str]) -> None:
        self.values = values
        self.rename = rename

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.values:
            return self.values[node.id]
        if node.id in self.rename:
            return ast.copy_location(ast.Name(self.rename[node.id], ast.Load()), node)
        return node


def inline(program: Program, output: str, rename: Mapping[str, str], *, max_nodes: int) -> str:
    """The expression computing `output` with every earlier assignment written into it and the
    arguments renamed (`rename`: argument -> kernel parameter): the reference of that output.

    Its size is counted before it is built (a chain of assignments that each use the last one twice
    doubles at every step): over `max_nodes` syntax nodes it is refused."""
    sizes: dict[str, int] = {}
    for stmt in program.statements:
        size = 0
        for node in ast.walk(stmt.tree):
            size += sizes.get(node.id, 1) if isinstance(node, ast.Name) else 1
        sizes[stmt.target] = size
        if stmt.target == output:
            break
    if sizes[output] > max_nodes:
        raise ToolInputError(
            f"the reference for {output!r} (its expression with the assignments before it written in) would have "
            f"{sizes[output]} syntax nodes; the limit is {max_nodes}. Use each assigned value fewer times."
        )
    done: dict[str, ast.expr] = {}
    for stmt in program.statements:
        tree = _Substitute(done, rename).visit(ast.parse(stmt.text, mode="eval").body)
        done[stmt.target] = tree
        if stmt.target == output:
            return ast.unparse(tree)
    raise KeyError(output)


def parse_reference_text(
    text: str, *, names: Collection[str], label: str, max_chars: int = 2000, max_nodes: int = 400,
    max_depth: int = 40,
) -> Reference:
    """A reference or baseline: one expression, or assignments `name = expression` separated by ';' or
    newlines whose last statement is the value (`m = x.amax(-1, keepdim=True); torch.exp(x - m)`). The
    assignments are written into the last expression, which is then validated as one reference."""
    if not isinstance(text, str) or ("\n" not in text.strip() and ";" not in text):
        return parse_reference(text, names=names, label=label, max_chars=max_chars, max_nodes=max_nodes,
                               max_depth=max_depth)
    try:
        ast.parse(text.strip(), mode="eval")
        single = True
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        single = False
    if single:  # one expression on several lines (or with ';' inside a string): read as it is
        return parse_reference(" ".join(text.split()), names=names, label=label, max_chars=max_chars,
                               max_nodes=max_nodes, max_depth=max_depth)
    try:
        program = parse_program(text, arg_names=names, outputs=None, max_chars=max_chars, max_nodes=max_nodes,
                                max_depth=max_depth)
        expression = inline(program, program.outputs[0], {}, max_nodes=max_nodes)
    except ToolInputError as exc:
        raise ToolInputError(f"{label}: {exc.message}", data=exc.data) from None
    # each statement passed the limits; the inlined whole is bounded by the node count just checked
    return parse_reference(expression, names=names, label=label, max_chars=max(max_chars, len(expression)),
                           max_nodes=max_nodes, max_depth=max_depth * MAX_STATEMENTS)


def setup_program(text: str, names: Collection[str], max_chars: int) -> Program:
    """A baseline_setup's statements, validated over the argument ``names``."""
    try:
        return parse_program(text, arg_names=names, outputs=None, max_chars=max_chars, max_nodes=400, max_depth=40)
    except ToolInputError as exc:
        raise ToolInputError(f"baseline_setup: {exc.message}", data=exc.data) from None


def setup_names(text: str | None, names: Collection[str], max_chars: int = 2000) -> list[str]:
    """The names a baseline_setup assigns (validated over the argument ``names``); [] without one."""
    if text is None:
        return []
    return [s.target for s in setup_program(text, names, max_chars).statements]
