"""The MCP resources and prompts of Anvil's server.

Resources: the kernel language reference, the reference-expression language, the example kernels
of examples/ (each a runnable file: kernels plus host code; compile_kernel takes the file as
source, kernel_name picking one kernel), the compiled kernels (a list, and each one's source and
compiler artifacts by kernel_id, paged). Many hosts show resources only to the user, so each has
a tool path too: language_reference, read_artifact, list_kernels.

Prompts: the three steps of the workflow (write a kernel, check it, benchmark it), each a message
that names the tools and arguments to use.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, get_type_hints

from fastmcp import FastMCP

from tools.compile import get_record, list_kernels
from tools.compile import read_artifact as run_read_artifact
from tools.errors import ToolInputError
from tools.reference_language import reference_language
from tools.runtime import Runtime

_MAX_DOC_CHARS = 100_000
_F = TypeVar("_F", bound=Callable[..., str])


def _prompt(mcp: FastMCP, name: str, description: str) -> Callable[[_F], _F]:
    """Register a prompt whose arguments read as plain strings, described by its docstring's Args.

    This module's annotations are strings (``from __future__ import annotations``); FastMCP takes an
    argument whose annotation is not the type ``str`` for structured and tells clients to send JSON,
    so the annotations are resolved first."""

    def register(fn: _F) -> _F:
        fn.__annotations__ = get_type_hints(fn)
        mcp.prompt(name=name, description=description)(fn)
        return fn

    return register
_MAX_EXAMPLE_BYTES = 256 * 1024
_EXAMPLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def default_examples_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "examples"


def example_names(examples: Path) -> list[str]:
    """The example files that define kernels (a @jit or @triton.jit function), by name without .py."""
    names = []
    for path in sorted(examples.glob("*.py")) if examples.is_dir() else []:
        if not _EXAMPLE_NAME.match(path.stem) or path.stat().st_size > _MAX_EXAMPLE_BYTES:
            continue
        if re.search(r"^@(triton\.)?jit\b", path.read_text(encoding="utf-8", errors="replace"), re.M):
            names.append(path.stem)
    return names


def example_text(examples: Path, name: str) -> str:
    """One example's source; the names are those of :func:`example_names` only (no paths)."""
    if name not in example_names(examples):
        raise ValueError(f"no example {name!r}; the examples: {', '.join(example_names(examples)) or '(none)'}.")
    return (examples / f"{name}.py").read_text(encoding="utf-8", errors="replace")


def language_text(path: Path, section: str | None) -> str:
    """The language reference, or the sections whose heading mentions ``section``."""
    if not path.is_file():
        return (
            "The language reference (docs/language.md) is not installed on this server. Anvil's kernel "
            "language follows Triton's triton.language: tl.program_id, tl.arange, tl.load/tl.store with "
            "mask and other, tl.dot, tl.sum/tl.max/tl.min reductions, tl.where, tl.exp/tl.log/tl.sqrt, "
            "tl.zeros, tl.cdiv, tl.constexpr parameters. compile_kernel reports unsupported constructs "
            "with their line and column."
        )
    text = path.read_text(encoding="utf-8", errors="replace")
    if not section:
        if len(text) <= _MAX_DOC_CHARS:
            return text
        headings = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        return f"The reference is long; ask for a section. Headings:\n{headings}"
    parts = re.split(r"(?m)^(?=#{1,6} )", text)
    wanted = section.strip().lower()
    hits = [p for p in parts if p.startswith("#") and wanted in p.splitlines()[0].lower()]
    if not hits:
        hits = [p for p in parts if wanted in p.lower()][:5]
    if not hits:
        headings = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        return f"No section mentions {section!r}. Headings:\n{headings}"
    return "\n".join(hits)[:_MAX_DOC_CHARS]


def register_resources(mcp: FastMCP, rt: Runtime, docs: Path, examples: Path) -> None:
    """The resources and prompts, on ``mcp``."""

    @mcp.resource("anvil://docs/language", mime_type="text/markdown", name="language_reference")
    def language_resource() -> str:
        """The Anvil kernel language reference (Markdown)."""
        return language_text(docs, None)

    @mcp.resource("anvil://docs/reference-expressions", mime_type="text/plain", name="reference_expressions")
    def reference_resource() -> str:
        """What launch_kernel's references and benchmark's baseline may use: every allowed function."""
        return reference_language()

    @mcp.resource("anvil://examples", mime_type="text/plain", name="examples")
    def examples_index() -> str:
        """The example kernels: read one at anvil://examples/{name}."""
        names = example_names(examples)
        lines = [f"anvil://examples/{n}" for n in names]
        return "Example kernels (runnable files: the kernels and their host code):\n" + "\n".join(lines)

    @mcp.resource("anvil://examples/{name}", mime_type="text/x-python")
    def example(name: str) -> str:
        """One example kernel file; compile_kernel(source=<it>, kernel_name=...) compiles its kernels."""
        return example_text(examples, name)

    @mcp.resource("anvil://kernels", mime_type="text/plain", name="kernels")
    def kernels_index() -> str:
        """The compiled kernels this server keeps, most recently used first."""
        listing = list_kernels(rt)
        lines = [f"{k.kernel_id} {k.kernel_name}({', '.join(f'{a}: {t}' for a, t in k.signature.items())}) "
                 f"{k.target} {k.constexprs}" for k in listing.kernels]
        return listing.summary + "\n" + "\n".join(lines)

    @mcp.resource("anvil://kernels/{kernel_id}/{artifact}{?start,count}", mime_type="text/plain")
    async def kernel_artifact(kernel_id: str, artifact: str, start: int = 1, count: int = 0) -> str:
        """One page of a compiled kernel's source or artifact (source, tir, llir, asm, ptx): lines start ..
        start+count-1."""
        try:
            get_record(rt, kernel_id)
            page = await run_read_artifact(rt, kernel_id, artifact, int(start), int(count) or None)
        except ToolInputError as exc:
            raise ValueError(exc.message) from None
        footer = f"\n\n[lines {page.start_line}-{page.end_line} of {page.total_lines}"
        footer += f"; next: {page.next_page}]" if page.next_page else "]"
        return page.text + footer

    @_prompt(mcp, "write_kernel", "Write an Anvil kernel for a task and check it against torch.")
    def write_kernel(task: str, reference: str = "", target: str = "auto") -> str:
        """The steps of writing a kernel with these tools.

        Args:
            task: What the kernel computes, in words, e.g. 'softmax over the last dim of a (rows, cols) tensor'.
            reference: Its expected output as a torch expression over the kernel's argument names, e.g.
                'torch.softmax(x_ptr, dim=-1)'; empty: the prompt asks for one.
            target: 'auto' (a GPU if present, else the CPU), 'cpu', 'cuda', 'cuda:sm_90a', 'amd:gfx942'.
        """
        check = f" Its expected output, as a torch expression over the argument names: {reference}." if reference \
            else " Write the expected output as a torch expression over the argument names (the reference)."
        return (
            "Write a Triton-style kernel (import triton; import triton.language as tl; @triton.jit) for: "
            f"{task}.{check} Read the language reference first (language_reference, or resource "
            "anvil://docs/language) and, for the idioms, an example (resource anvil://examples). Then: "
            f"compile_kernel(source, constexprs={{'BLOCK': ...}}, target='{target}') and fix what its diagnostics "
            "say (line, column, hint); launch_kernel(kernel_id, grid=['cdiv(n, BLOCK)'], args={...tensor specs, "
            "outputs with init 'empty'...}, reference={output: expression}) on sizes that are not multiples of the "
            "block, until passed is true; then benchmark it."
        )

    @_prompt(mcp, "check_kernel", "Check a compiled kernel against a torch reference.")
    def check_kernel(kernel_id: str, reference: str, sizes: str = "") -> str:
        """The steps of checking a kernel with launch_kernel.

        Args:
            kernel_id: A kernel_id from compile_kernel, generate_kernel or list_kernels.
            reference: The expected output as a torch expression over the argument names, e.g. 'x_ptr + y_ptr'.
            sizes: The sizes to try, in words or numbers, e.g. '1000, 4097 and 65536'.
        """
        what = f"the sizes {sizes}" if sizes else "several sizes, including ones that are not multiples of the block"
        return (
            f"Check kernel {kernel_id} with launch_kernel: build args as tensor specs (outputs with init 'empty', so "
            f"unwritten elements show in unwritten_count), use {what} (the first set in args, the others in "
            f"variants=[...], one call), and pass the reference as a dict from the output argument to the "
            f"expression, e.g. reference={{'out_ptr': {reference!r}}}. "
            "Read checks[...].first_mismatch and max_abs_error when it fails; "
            "read_artifact(kernel_id, 'source') shows the kernel. A crash names the unmasked accesses; launch again "
            "with debug=true to locate an out-of-bounds access."
        )

    @_prompt(mcp, "benchmark_kernel", "Benchmark a kernel against torch and tune its configs.")
    def benchmark_kernel(kernel_id: str, baseline: str = "", flops: str = "") -> str:
        """The steps of benchmarking and tuning a kernel.

        Args:
            kernel_id: A kernel_id from compile_kernel, generate_kernel or list_kernels.
            baseline: A torch expression over the argument names to time against, e.g. 'x_ptr + y_ptr'.
            flops: Floating-point operations per run (a number, e.g. '2*M*N*K' worked out) for TFLOP/s.
        """
        base = f" baseline={baseline!r}," if baseline else " a baseline torch expression,"
        rate = f" flops={flops} (TFLOP/s and % of the matmul peak)," if flops else " flops for compute-bound kernels,"
        return (
            f"Benchmark kernel {kernel_id} with benchmark(kernel_id, grid, args, reference,{base}{rate} "
            "autotune=true): the server searches block sizes (and warps and stages on GPUs) and reports every config "
            "with median/p10/p90, noise, GB/s or TFLOP/s against the device's measured peaks, and the speedup over "
            "the baseline. Report the best config (best_kernel_id) and its percentage of peak."
        )
