"""The import graph of compiler/, tools/ and server/: no cycles, and dependencies point one way.

Every `import` / `from ... import` in a module is an edge of the graph, wherever it stands, with
two exceptions:

- imports under `if TYPE_CHECKING:` (never run);
- a function-level import marked `# deferred: <reason>` on its line or the line above: one that
  is kept out of module import on purpose (an optional dependency, start-up cost, or a plugin
  loaded on first use such as a backend from the registry).

Edges are between modules: `from .. import knobs` is an edge to `compiler.knobs`, while
`from .. import __version__` (an attribute, not a module) is an edge to the package's __init__.
Importing a submodule also runs its parents' __init__, but that is not counted: a child always
imports its parent, so only the parent importing its children would make a cycle, and that one
is an edge of the parent.

`python tests/test_import_layers.py` prints the cycles, the deferred imports and the layering
violations.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("compiler", "tools", "server")
DEFERRED_MARK = "# deferred:"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    path: str  # relative to ROOT
    line: int
    function_level: bool
    deferred: bool  # function-level and marked `# deferred: <reason>`
    type_checking: bool

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the three packages (a package is its __init__)."""
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _marked_deferred(lines: list[str], node: ast.stmt) -> bool:
    """A `# deferred: <reason>` comment on the import's lines or the line above, with a reason."""
    first = node.lineno - 1
    last = (node.end_lineno or node.lineno) - 1
    for i in range(max(first - 1, 0), last + 1):
        at = lines[i].find(DEFERRED_MARK)
        if at >= 0 and lines[i][at + len(DEFERRED_MARK) :].strip():
            return True
    return False


def _resolve_base(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _owner(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in mods:
            return prefix
    return None


def import_edges(mods: dict[str, Path] | None = None, root: Path = ROOT) -> list[Edge]:
    mods = module_files(root) if mods is None else mods
    edges: list[Edge] = []
    for module, path in mods.items():
        edges += _module_edges(module, path, mods, root)
    return edges


def _module_edges(module: str, path: Path, mods: dict[str, Path], root: Path) -> list[Edge]:
    text = path.read_text()
    lines = text.splitlines()
    rel = str(path.relative_to(root))
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []

    def add(target: str | None, node: ast.stmt, in_function: bool, type_checking: bool) -> None:
        if target is None or target == module:
            return
        deferred = in_function and _marked_deferred(lines, node)
        edges.append(Edge(module, target, rel, node.lineno, in_function, deferred, type_checking))

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_owner(alias.name, mods), node, in_function, type_checking)
            return
        if isinstance(node, ast.ImportFrom):
            base = _resolve_base(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                add(sub if sub in mods else _owner(base, mods), node, in_function, type_checking)
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, in_function, True)
            for child in node.orelse:
                visit(child, in_function, type_checking)
            return
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner, type_checking)

    visit(ast.parse(text, filename=rel), False, False)
    return edges


def runtime_graph(edges: list[Edge]) -> dict[str, dict[str, Edge]]:
    """Edges that run when a module is imported or its functions are called, less the deferred."""
    graph: dict[str, dict[str, Edge]] = {}
    for e in edges:
        if e.type_checking or e.deferred:
            continue
        graph.setdefault(e.source, {}).setdefault(e.target, e)
    return graph


def strongly_connected(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Components of more than one module (Tarjan's algorithm, iterative)."""
    nodes = sorted(set(graph) | {t for out in graph.values() for t in out})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, sorted(graph.get(start, {}))))
        while work:
            v, succ = work[-1]
            if succ:
                w = succ.pop(0)
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, sorted(graph.get(w, {}))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found, key=lambda c: (-len(c), c))


def one_cycle(graph: dict[str, dict[str, Edge]], component: list[str]) -> list[Edge]:
    """A shortest cycle through the component's first module, as its edges."""
    members = set(component)
    start = component[0]
    came: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w, e in sorted(graph.get(v, {}).items()):
            if w not in members or w in came:
                continue
            came[w] = e
            if w == start:
                path = [e]
                while path[0].source != start:
                    path.insert(0, came[path[0].source])
                return path
            queue.append(w)
    raise AssertionError(f"{component} is not a cycle")


def describe(graph: dict[str, dict[str, Edge]], component: list[str]) -> str:
    lines = [f"{len(component)} modules: {', '.join(component)}", "  for example:"]
    for e in one_cycle(graph, component):
        kind = " (function-level)" if e.function_level else ""
        lines.append(f"    {e.source} -> {e.target}  at {e.where()}{kind}")
    return "\n".join(lines)


@dataclass(frozen=True)
class AllowedCycle:
    """A cycle still there: the modules of its strongly connected component (exactly, or any
    component inside the package `within`); the edges that close it (without them the graph must be
    acyclic); and why it is not cut yet."""

    modules: frozenset[str]
    edges: frozenset[tuple[str, str]]
    reason: str
    within: str = ""  # a package: any component of its modules, closed by any edge from `edges`' sources

    def matches(self, component: list[str]) -> bool:
        if self.within:
            return all(_within(m, self.within) for m in component)
        return frozenset(component) == self.modules

    def closing(self, graph: dict[str, dict[str, Edge]]) -> list[tuple[str, str]]:
        if not self.within:
            return sorted(self.edges)
        sources = {s for s, _ in self.edges}
        return [(s, t) for s in sorted(sources) for t in sorted(graph.get(s, {})) if _within(t, self.within)]


# Every component found must be one of these, module for module (a module joining one fails, so
# does a new component), and the graph less these edges must have no cycle at all (a new cycle
# that does not go through them fails). An entry no longer found fails too: drop it, so the list
# only shrinks.
ALLOWED_CYCLES: tuple[AllowedCycle, ...] = ()


def test_no_import_cycles() -> None:
    graph = runtime_graph(import_edges())
    components = strongly_connected(graph)
    unexpected = [c for c in components if not any(a.matches(c) for a in ALLOWED_CYCLES)]
    stale = [a.within or sorted(a.modules) for a in ALLOWED_CYCLES if not any(a.matches(c) for c in components)]
    report = "\n".join(describe(graph, c) for c in unexpected)
    assert not unexpected, f"import cycles (cut an edge of each; docs/architecture.md, Import layers):\n{report}"
    assert not stale, f"allowed cycles no longer found, drop them from ALLOWED_CYCLES: {stale}"
    # less the edges that close the allowed cycles, nothing may be left
    cut = {m: dict(out) for m, out in graph.items()}
    for a in ALLOWED_CYCLES:
        for source, target in a.closing(graph):
            assert target in cut.get(source, {}), f"allowed edge {source} -> {target} no longer exists"
            del cut[source][target]
    rest = strongly_connected(cut)
    report = "\n".join(describe(cut, c) for c in rest)
    assert not rest, f"import cycles besides the allowed edges:\n{report}"


# Function-level imports (of any module) not marked `# deferred: <reason>`: each is either a
# dependency that belongs at the top of its module or one kept out of module import on purpose,
# which then needs the mark and its reason (an optional dependency, start-up cost, the worker's
# sandbox coming first). None is left unmarked.
MAX_UNMARKED_FUNCTION_IMPORTS = 0


def unmarked_function_imports(root: Path = ROOT) -> list[str]:
    """file:line of every import statement inside a function (of any module, ours or not) without a
    `# deferred:` mark, outside `if TYPE_CHECKING:`."""
    sites: list[str] = []
    for path in module_files(root).values():
        sites += _unmarked_in(path, str(path.relative_to(root)))
    return sites


def _unmarked_in(path: Path, rel: str) -> list[str]:
    text = path.read_text()
    lines = text.splitlines()
    sites: list[str] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if in_function and not _marked_deferred(lines, node):
                sites.append(f"{rel}:{node.lineno}")
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child, in_function)
            return
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(text, filename=rel), False)
    return sites


UNCOUNTED: tuple[str, ...] = ()


def test_function_level_imports_are_marked() -> None:
    sites = [s for s in unmarked_function_imports() if not s.startswith(UNCOUNTED)]
    assert len(sites) <= MAX_UNMARKED_FUNCTION_IMPORTS, (
        f"{len(sites)} function-level imports without a `# deferred: <reason>` mark, the most allowed is "
        f"{MAX_UNMARKED_FUNCTION_IMPORTS}: move new ones to the top of the module, or mark why they wait "
        "(optional dependency, start-up cost, a plugin loaded on use)"
    )


def test_deferred_imports_are_function_level() -> None:
    """A `# deferred:` mark only exempts imports inside functions; at module level it means nothing."""
    misplaced = []
    for e in import_edges():
        if e.function_level or e.type_checking:
            continue
        lines = (ROOT / e.path).read_text().splitlines()
        if DEFERRED_MARK in lines[e.line - 1]:
            misplaced.append(e.where())
    assert not misplaced, misplaced


def _top(module: str) -> str:
    return module.split(".")[0]


# Layering, from docs: server -> tools -> compiler, and the IR with the libraries over it (linear
# layouts, Tile IR passes) below the rest of the compiler. Every edge counts here, deferred or
# type-only alike: a deferred import still depends on its target.
LOWER_LAYERS = {
    "compiler.ir": ("compiler.ir",),
    "compiler.layouts": ("compiler.layouts", "compiler.ir", "compiler.passes"),
    "compiler.passes": ("compiler.passes", "compiler.ir", "compiler.layouts"),
}

# Known exceptions to LOWER_LAYERS, as (source, target) with the reason.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_violations(edges: list[Edge]) -> list[str]:
    bad = []
    for e in edges:
        src, dst = _top(e.source), _top(e.target)
        if src == "compiler" and dst in ("tools", "server") or src == "tools" and dst == "server":
            bad.append(f"{e.source} -> {e.target} at {e.where()}")
            continue
        for layer, allowed in LOWER_LAYERS.items():
            if not _within(e.source, layer) or (e.source, e.target) in LAYER_EXCEPTIONS:
                continue
            if not any(_within(e.target, a) for a in allowed):
                bad.append(f"{e.source} -> {e.target} at {e.where()} ({layer} may import only {allowed})")
    return bad


def test_layering() -> None:
    bad = layer_violations(import_edges())
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_checker_finds_cycles_and_marks(tmp_path: Path) -> None:
    """The checker itself: a planted cycle through a parent-package attribute, a deferred mark,
    a TYPE_CHECKING import and a package attribute that is not a module."""
    pkg = tmp_path / "compiler"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '1'\n")
    (pkg / "knobs.py").write_text("def f():\n    from .sub import a\n    return a\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .. import knobs, __version__\n"
        "if TYPE_CHECKING:\n"
        "    from . import b\n"
        "def g():\n"
        "    # deferred: start-up cost\n"
        "    from . import b\n"
        "    return b\n"
    )
    (pkg / "sub" / "b.py").write_text("from compiler.sub import a\n")
    for other in ("tools", "server"):
        (tmp_path / other).mkdir()
    edges = import_edges(root=tmp_path)
    graph = runtime_graph(edges)
    assert set(graph["compiler.sub.a"]) == {"compiler.knobs", "compiler"}
    assert strongly_connected(graph) == [["compiler.knobs", "compiler.sub.a"]]
    cycle = one_cycle(graph, ["compiler.knobs", "compiler.sub.a"])
    assert [(e.source, e.target, e.line) for e in cycle] == [
        ("compiler.knobs", "compiler.sub.a", 2),
        ("compiler.sub.a", "compiler.knobs", 2),
    ]
    # drop the deferred mark: b -> a -> b becomes a second cycle
    (pkg / "sub" / "a.py").write_text((pkg / "sub" / "a.py").read_text().replace("# deferred: start-up cost", ""))
    graph = runtime_graph(import_edges(root=tmp_path))
    assert strongly_connected(graph) == [["compiler.knobs", "compiler.sub.a", "compiler.sub.b"]]


if __name__ == "__main__":
    all_edges = import_edges()
    g = runtime_graph(all_edges)
    for comp in strongly_connected(g):
        print(describe(g, comp))
    print("function-level imports:", sum(e.function_level for e in all_edges))
    print("deferred:", sum(e.deferred for e in all_edges))
    for line in layer_violations(all_edges):
        print("layer:", line)
    sys.exit(0)
