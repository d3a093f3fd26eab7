"""Shared code of the security tests and fuzzers: canaries, a sandboxed compile child, kernel generators,
source mutators and a generator of tool arguments from JSON schemas.

The tests in this directory and ``scripts/fuzz.py`` import this module; every check returns a finding
(a one-line description plus the input that reproduces it) or None, so the same checks serve a
bounded CI run that asserts and a long run that collects.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

# --- canaries: secrets put in the server's environment that must never appear in any answer ---------------

CANARY_TOKEN = "anvil-canary-" + secrets.token_hex(8)
CANARY_SECRET = "anvil-secret-" + secrets.token_hex(8)
CANARIES = (CANARY_TOKEN, CANARY_SECRET)


def canary_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) plus the canary secrets."""
    env = dict(os.environ if base is None else base)
    env["ANVIL_TOKEN"] = CANARY_TOKEN
    env["ANVIL_SECRET_CANARY"] = CANARY_SECRET
    return env


def leaked(text: str) -> str | None:
    """The canary ``text`` contains, if any (also as a prefix, in case an answer is truncated)."""
    for canary in CANARIES:
        if canary in text or canary[:20] in text:
            return canary
    return None


# --- a compile child: sandboxed enough that an attack that works hurts nobody -------------------------------


@dataclass
class Outcome:
    """What compiling one source gave: ``ok``, ``compilation_error``, ``exception``, ``crash`` or ``hang``."""

    outcome: str
    type: str = ""
    message: str = ""
    line: int = 0
    col: int = 0
    traceback: str = ""
    seconds: float = 0.0

    @property
    def located(self) -> bool:
        return self.outcome == "compilation_error" and self.line > 0 and self.col > 0


# Errors about the source as a whole or about the caller's signature (a mutation may drop a parameter the
# fuzzer still passes), which have no line to point at.
WHOLE_SOURCE_ERRORS = ("defines no @jit", "several kernels", "no @jit function named", "the signature names unknown")


class CompileChild:
    """A long-lived ``compile_child.py`` process; a request past ``deadline_s`` kills and replaces it."""

    def __init__(self, deadline_s: float = 20.0, memory_mb: int = 1024, env: dict[str, str] | None = None) -> None:
        self.deadline_s = deadline_s
        self.memory_mb = memory_mb
        self.env = canary_env() if env is None else env
        # the child imports the compiler of this checkout, not whatever the interpreter has installed
        self.env["PYTHONPATH"] = os.pathsep.join([str(REPO), self.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.proc: subprocess.Popen[str] | None = None
        self.restarts = 0
        self.compiles = 0

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "compile_child.py"), "--memory-mb", str(self.memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            cwd=REPO, env=self.env, start_new_session=True,
        )  # fmt: skip
        assert proc.stdout is not None
        ready = self._read_line(proc, 120.0)
        if ready is None or "ready" not in ready:
            proc.kill()
            raise RuntimeError("the compile child did not start")
        return proc

    @staticmethod
    def _read_line(proc: subprocess.Popen[str], timeout: float) -> str | None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        return proc.stdout.readline()

    def compile(self, source: str, signature: dict[str, str], constexprs: dict[str, Any] | None = None,
                kernel: str | None = None, debug: bool = False) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None
        request = {"source": source, "signature": signature, "constexprs": constexprs or {}, "kernel": kernel,
                   "debug": debug, "target": "cpu"}
        start = time.monotonic()
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._read_line(proc, self.deadline_s)
        seconds = time.monotonic() - start
        if not line:
            hung = proc.poll() is None
            self.kill()
            self.restarts += 1
            if hung:
                return Outcome("hang", message=f"no answer within {self.deadline_s:.0f} s", seconds=seconds)
            return Outcome("crash", message=f"the compile process died (exit status {proc.returncode})",
                           seconds=seconds)
        data = json.loads(line)
        self.compiles += 1
        if self.compiles % 2000 == 0:  # like the server's workers, which retire as compiled code piles up
            self.kill()
        return Outcome(**data, seconds=seconds)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def judge_compile(outcome: Outcome) -> str | None:
    """None if ``outcome`` is an acceptable answer to untrusted source, else what is wrong with it."""
    if outcome.outcome == "ok":
        return None
    if outcome.outcome == "compilation_error":
        canary = leaked(outcome.message)
        if canary:
            return f"the error text holds the canary secret {canary!r}"
        if "Traceback (most recent call last)" in outcome.message:
            return "the error text holds an internal traceback"
        if not outcome.located and not any(s in outcome.message for s in WHOLE_SOURCE_ERRORS):
            return f"{outcome.type} without a line and column: {outcome.message.splitlines()[0][:200]}"
        return None
    first = (outcome.message.splitlines() or [""])[0][:200]
    return f"{outcome.outcome}: {outcome.type} {first}".strip()


# --- kernels from a small grammar ----------------------------------------------------------------------------

KERNEL_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}

_HEADER = "import triton\nimport triton.language as tl\n\n\n"
_HELPER = "@triton.jit\ndef helper(a, b):\n    return a * 2.0 + b\n\n\n"

_TILE_ATOMS = ["x", "y", "acc", "offs.to(tl.float32)", "tl.zeros([BLOCK], dtype=tl.float32)", "1.5", "n", "pid",
               "SCALE"]
_UNARY = ["tl.exp({})", "tl.abs({})", "tl.sqrt(tl.abs({}))", "-({})", "({}).to(tl.float16).to(tl.float32)",
          "tl.sum({}, axis=0)", "tl.max({}, axis=0)", "helper({}, x)", "tl.cumsum({}, axis=0)"]
_BINARY = ["+", "-", "*", "/", "//", "%", "<", ">=", "==", "&", "|", "<<"]
_CALL2 = ["tl.maximum({}, {})", "tl.minimum({}, {})", "tl.where(mask, {}, {})", "tl.where({} > 0, {}, 0.0)"]


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> str:
    """An expression over the kernel's values; most are well typed, some are not."""
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(_TILE_ATOMS))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(st.sampled_from(_UNARY)).format(draw(expressions(depth - 1)))
    if kind == 1:
        op = draw(st.sampled_from(_BINARY))
        return f"({draw(expressions(depth - 1))} {op} {draw(expressions(depth - 1))})"
    return draw(st.sampled_from(_CALL2)).format(draw(expressions(depth - 1)), draw(expressions(depth - 1)))


@st.composite
def statements(draw: st.DrawFn, indent: int = 1, depth: int = 2) -> list[str]:
    pad = "    " * indent
    kind = draw(st.integers(0, 5 if depth > 0 else 2))
    if kind <= 1:
        return [f"{pad}acc = {draw(expressions())}"]
    if kind == 2:
        mask = draw(st.sampled_from(["mask", "offs < n", "None"]))
        other = draw(st.sampled_from(["", ", other=0.0"]))
        return [f"{pad}x = tl.load(x_ptr + offs, mask={mask}{other})"]
    body = draw(st.lists(statements(indent + 1, depth - 1), min_size=1, max_size=3))
    lines = [line for stmt in body for line in stmt]
    if kind == 3:
        loop = draw(st.sampled_from(["range(0, 3)", "range(0, n, 64)", "tl.static_range(4)", "range(K)"]))
        return [f"{pad}for i in {loop}:", *lines]
    if kind == 4:
        cond = draw(st.sampled_from(["pid == 0", "n > 7", "K > 2", "tl.sum(x, axis=0) > 0"]))
        other = draw(st.lists(statements(indent + 1, depth - 1), min_size=1, max_size=2))
        return [f"{pad}if {cond}:", *lines, f"{pad}else:", *[line for stmt in other for line in stmt]]
    return [f"{pad}while acc_n < K:", f"{pad}    acc_n += 1", *lines]


@st.composite
def generated_kernels(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A kernel of the language's common constructs, and its constexprs."""
    body = draw(st.lists(statements(), min_size=1, max_size=6))
    store_mask = draw(st.sampled_from(["mask", "offs < n"]))
    lines = [
        "@triton.jit",
        "def fuzz_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, K: tl.constexpr, SCALE: tl.constexpr):",
        "    pid = tl.program_id(0)",
        "    offs = pid * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n",
        "    x = tl.load(x_ptr + offs, mask=mask, other=0.0)",
        "    y = tl.load(y_ptr + offs, mask=mask, other=0.0)",
        "    acc = x + y",
        "    acc_n = 0",
        *[line for stmt in body for line in stmt],
        f"    tl.store(out_ptr + offs, acc, mask={store_mask})",
    ]
    constexprs = {"BLOCK": draw(st.sampled_from([1, 16, 64, 128])), "K": draw(st.integers(0, 4)),
                  "SCALE": draw(st.sampled_from([0.5, 2, -1]))}
    return _HEADER + _HELPER + "\n".join(lines) + "\n", constexprs


# --- mutations of valid sources --------------------------------------------------------------------------------

HOSTILE_NAMES = [
    "__class__", "__dict__", "__globals__", "__builtins__", "__import__", "__subclasses__", "__mro__", "type",
    "getattr", "setattr", "vars", "globals", "eval", "exec", "open", "breakpoint", "triton.sys", "tl.core.sys",
    "triton.os", "math.__loader__", "compiler.runtime", 'triton.sys.modules["os"].environ', "print", "input",
    "tl.static_print", "tl.device_print", "x.__class__.__mro__[-1].__subclasses__()",
]
HOSTILE_NUMBERS = ["0", "-1", "1 << 62", "2 ** 64", "10 ** 10", "1e308", "float('nan')", "-2 ** 31", "65536",
                   "'A' * 100000", "(0,) * 100000", "True", "None", "1.5"]

_CORPUS_GLOBS = ["examples/*.py", "tests/compiler/*_kernels.py"]


@dataclass(frozen=True)
class Seed:
    """A valid source of the corpus: the kernel to compile, its signature and constexprs."""

    name: str
    source: str
    kernel: str
    signature: dict[str, str] = field(hash=False)
    constexprs: dict[str, Any] = field(hash=False)


def _is_jit(node: ast.FunctionDef) -> bool:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "jit":
            return True
    return False


def load_corpus() -> list[Seed]:
    """The @jit kernels of examples/ and tests/compiler/*_kernels.py, with guessed signatures."""
    seeds = []
    for pattern in _CORPUS_GLOBS:
        for path in sorted(REPO.glob(pattern)):
            text = path.read_text()
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in tree.body:
                if not isinstance(node, ast.FunctionDef) or not _is_jit(node):
                    continue
                signature: dict[str, str] = {}
                constexprs: dict[str, Any] = {}
                for arg in node.args.args:
                    if arg.annotation is not None and "constexpr" in ast.unparse(arg.annotation):
                        constexprs[arg.arg] = 16
                    else:
                        signature[arg.arg] = "*fp32" if "ptr" in arg.arg.lower() else "i32"
                seeds.append(Seed(f"{path.name}:{node.name}", text, node.name, signature, constexprs))
    return seeds


def _tokens(line: str) -> list[str]:
    out: list[str] = []
    word = ""
    for ch in line:
        if ch.isalnum() or ch in "_.":
            word += ch
            continue
        if word:
            out.append(word)
            word = ""
        out.append(ch)
    if word:
        out.append(word)
    return out


@st.composite
def mutated_sources(draw: st.DrawFn, corpus: list[Seed]) -> tuple[Seed, str]:
    """A seed and its text after 1-4 mutations: lines deleted, duplicated or swapped, tokens deleted,
    duplicated or swapped, names and numbers replaced with hostile ones."""
    seed = draw(st.sampled_from(corpus))
    lines = seed.source.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["del_line", "dup_line", "swap_lines", "del_tok", "dup_tok", "swap_tok",
                                   "hostile_name", "hostile_number", "insert_stmt"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "del_line":
            del lines[i]
        elif op == "dup_line":
            lines.insert(i, lines[i])
        elif op == "swap_lines":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "insert_stmt":
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            target = draw(st.sampled_from(HOSTILE_NAMES + HOSTILE_NUMBERS))
            lines.insert(i, f"{indent}fz = {target}")
        else:
            toks = _tokens(lines[i])
            if not toks:
                continue
            k = draw(st.integers(0, len(toks) - 1))
            if op == "del_tok":
                del toks[k]
            elif op == "dup_tok":
                toks.insert(k, toks[k])
            elif op == "swap_tok":
                m = draw(st.integers(0, len(toks) - 1))
                toks[k], toks[m] = toks[m], toks[k]
            else:
                numeric = toks[k][:1].isdigit()
                if (op == "hostile_number") == numeric or op == "hostile_name":
                    toks[k] = draw(st.sampled_from(HOSTILE_NUMBERS if numeric else HOSTILE_NAMES))
            lines[i] = "".join(toks)
        if not lines:
            lines = [""]
    return seed, "\n".join(lines) + "\n"


# --- tool arguments from JSON schemas ----------------------------------------------------------------------------

JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from([10**30, -(2**63), 2**64, "\x00", "A" * 5000, "../../etc/passwd", "/dev/zero", "{}"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
HOSTILE_STRINGS = [
    "", "\x00", "A" * 100000, "../" * 50 + "etc/passwd", "/proc/self/environ", "/dev/zero", "x_ptr + y_ptr",
    "__import__('os').system('true')", "x_ptr.__class__.__mro__", "torch.eye(n=40000, m=40000)",
    "torch.arange(end=2**40)", "cdiv(n, 0)", "10**10**10", "(" * 500 + "1" + ")" * 500, "float32", "cpu", "tir",
    "*fp32", "k" + "0" * 15, "anvil://kernels/x/tir", "\ud800",
]


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _resolve(defs.get(ref.split("/")[-1], {}), defs)
    return schema


def from_schema(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for ``schema``: mostly valid ones (edges of the bounds included), sometimes junk."""
    schema = _resolve(schema, defs)
    if depth > 4:
        return JUNK
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return st.one_of([from_schema(o, defs, depth + 1) for o in options])
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | st.text(max_size=10)
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "string":
        return st.text(max_size=40) | st.sampled_from(HOSTILE_STRINGS)
    if kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        edges = [v for v in (lo, hi, 0, -1, 1, 2**31, 2**63, 10**30) if v is not None]
        return st.integers(min_value=lo, max_value=hi) | st.sampled_from(edges)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -1.0, 1e308, 1e-308])
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs, depth + 1)
        return st.lists(items, max_size=4)
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        keys = st.text(max_size=10) | st.sampled_from(["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"])
        free = (st.dictionaries(keys, from_schema(extra, defs, depth + 1), max_size=3)
                if isinstance(extra, dict) else st.just({}))
        if not props:
            return free
        return st.fixed_dictionaries({}, optional={k: from_schema(v, defs, depth + 1) for k, v in props.items()})
    return JUNK


def tool_arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for a tool with ``inputSchema`` ``schema``: from the schema, with junk keys and values mixed in."""
    defs = schema.get("$defs", {})
    valid = from_schema(schema, defs)
    junk = st.dictionaries(st.sampled_from([*schema.get("properties", {}), "zz", "__class__"]), JUNK, max_size=4)
    return st.one_of(valid, valid, junk).map(lambda v: v if isinstance(v, dict) else {"value": v})


INTERNAL_ERROR_MARKS = ("Traceback (most recent call last)", "Error calling tool", "internal error",
                        'File "/', "[Errno", "embedded null byte")


def judge_tool_answer(tool: str, is_error: bool, text: str) -> str | None:
    """None if a tool's answer (its whole text) is acceptable for untrusted arguments, else what is wrong."""
    canary = leaked(text)
    if canary:
        return f"{tool}: the answer holds the canary secret {canary!r}"
    for mark in INTERNAL_ERROR_MARKS:
        if mark in text:
            return f"{tool}: the answer holds {mark!r}: {text[:300]!r}"
    if is_error and len(text.strip()) < 10:
        return f"{tool}: an error without a message: {text!r}"
    return None


# --- the fuzz properties, shared by the bounded tests and scripts/fuzz.py -----------------------------------------


@dataclass
class Findings:
    """Examples run and problems found; each problem with the input that reproduces it."""

    examples: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)

    def add(self, problem: str | None, reproducer: str) -> None:
        self.examples += 1
        if problem is not None and all(problem != p for p, _ in self.problems):
            self.problems.append((problem, reproducer))


def fuzz_generated_kernel(child: CompileChild, findings: Findings, case: tuple[str, dict[str, Any]]) -> None:
    source, constexprs = case
    outcome = child.compile(source, KERNEL_SIGNATURE, constexprs, kernel="fuzz_kernel")
    findings.add(judge_compile(outcome), json.dumps({"source": source, "constexprs": constexprs}))


def fuzz_mutated_source(child: CompileChild, findings: Findings, case: tuple[Seed, str]) -> None:
    seed, source = case
    outcome = child.compile(source, seed.signature, seed.constexprs, kernel=seed.kernel)
    findings.add(judge_compile(outcome), json.dumps({"seed": seed.name, "kernel": seed.kernel, "source": source,
                                                     "signature": seed.signature, "constexprs": seed.constexprs}))


class ToolCaller:
    """Calls the tools of an app through an in-memory client from synchronous code, each call bounded."""

    def __init__(self, app: Any, timeout_s: float = 60.0) -> None:
        import anyio.from_thread
        from fastmcp import Client

        self.timeout_s = timeout_s
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._client_cm = Client(app)
        self.client = self.portal.call(self._client_cm.__aenter__)
        self.tools = {t.name: t.inputSchema for t in self.portal.call(self.client.list_tools)}

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bool, str] | None:
        """(is_error, whole answer text), or None if no answer came within the bound."""
        import functools

        call = functools.partial(self.client.call_tool, tool, args, raise_on_error=False)
        future = self.portal.start_task_soon(call)
        try:
            result = future.result(timeout=self.timeout_s)
        except TimeoutError:
            future.cancel()
            return None
        parts = [getattr(block, "text", "") for block in result.content]
        if result.structured_content is not None:
            parts.append(json.dumps(result.structured_content))
        return bool(result.is_error), "\n".join(parts)

    def close(self) -> None:
        self.portal.call(self._client_cm.__aexit__, None, None, None)
        self._portal_cm.__exit__(None, None, None)


VALID_COMPILE = {"source": "", "constexprs": {"BLOCK": 128}}


def fuzz_tool_call(caller: ToolCaller, findings: Findings, case: tuple[str, dict[str, Any]]) -> None:
    tool, args = case
    reproducer = json.dumps({"tool": tool, "args": args}, default=repr)[:20000]
    answer = caller.call(tool, args)
    if answer is None:
        findings.add(f"{tool}: no answer within {caller.timeout_s:.0f} s", reproducer)
        return
    problem = judge_tool_answer(tool, *answer)
    if problem is None:
        from server.demo import VECTOR_ADD

        after = caller.call("compile_kernel", {**VALID_COMPILE, "source": VECTOR_ADD})
        if after is None or after[0]:
            problem = f"{tool}: a valid compile_kernel failed afterwards: {after and after[1][:200]!r}"
    findings.add(problem, reproducer)


def tool_cases(tools: dict[str, dict[str, Any]]) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(tool name, arguments) for every tool of the server."""
    return st.one_of([st.tuples(st.just(name), tool_arguments(schema)) for name, schema in sorted(tools.items())])
