"""generate_kernel: a reference expression and tensor specs -> a fused kernel's source, compiled,
launched against the expression itself and, on request, timed against torch.

The text is parsed and validated as references are (program.py), translated into the fusion
library's ops (translate.py, lowerings.py, rowwise.py), laid out as one group (group.py) and written
by the torch.compile backend's code generator (compiler/fusion: emit.py, matmul.py), with the
arguments' names, sizes and strides as parameters and the block sizes as constexprs. The kernel then
goes through compile_kernel, launch_kernel and benchmark like any other, so its kernel_id serves
every tool.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from compiler.fusion.emit import Kernel, Names, emit, is_free_name
from compiler.fusion.graph import Group
from compiler.fusion.matmul import emit_matmul, matmul_config
from compiler.torch.runner import layout_values, pointwise_config, rows_config
from tools.bench import benchmark
from tools.compile import compile_kernel
from tools.errors import ToolInputError
from tools.executor import Progress, gpu_available, noop_progress, resolve_target
from tools.generate.group import Fused, build_group
from tools.generate.lowerings import LOWERINGS
from tools.generate.models import GeneratedLaunch, GenerateRequest, GenerateResult
from tools.generate.translate import Translator
from tools.launch import launch_kernel
from tools.models import BenchmarkRequest, CompileRequest, LaunchRequest
from tools.reference_program import Program, inline, parse_program
from tools.specs import DTYPES, ConstexprValue, TensorSpec, check_args_limits, signature_of

if TYPE_CHECKING:
    from tools.runtime import Runtime

__all__ = ["generate_kernel"]

MAX_ARGS = 32
_ROOTS = frozenset({"torch", "F", "math"})
# functions whose name says what a kernel computing them does (others are named by their ops)
_NAMED = frozenset({"softmax", "log_softmax", "softmin", "layer_norm", "rms_norm", "normalize", "logsumexp",
                    "vector_norm", "norm", "linear", "gelu", "silu", "softplus", "mish", "var", "std"})


def _called(node: ast.AST) -> str | None:
    """The function a call node calls by attribute (F.gelu -> 'gelu'), else None."""
    return node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None


async def generate_kernel(rt: Runtime, req: GenerateRequest, progress: Progress | None = None) -> GenerateResult:
    """The generate_kernel tool."""
    progress = progress or noop_progress
    target = resolve_target(req.target)
    await progress(0, 4, "translating the expression")
    # parsing and translating are pure CPU work (shapes on the meta device): off the event loop
    plan, kernel = await anyio.to_thread.run_sync(functools.partial(_write, rt, req, target))
    fused = plan.fused
    await progress(1, 4, f"compiling {kernel.name}")
    blocks: dict[str, ConstexprValue] = dict(plan.blocks)
    compiled = await compile_kernel(rt, CompileRequest(
        source=kernel.source, kernel_name=kernel.name, signature=plan.signature(kernel), constexprs=blocks,
        target=target, num_warps=plan.num_warps, num_stages=plan.num_stages))
    launch = GeneratedLaunch(kernel_id=compiled.kernel_id, grid=plan.grid, args=plan.launch_args(kernel),
                             reference=plan.references, constexprs=plan.blocks, num_warps=plan.num_warps,
                             num_stages=plan.num_stages)
    check_wanted = req.check if req.check is not None else (target == "cpu" or gpu_available())
    atol, rtol = plan.tolerance(req, target)
    check = bench = None
    if check_wanted:
        await progress(2, 4, "launching and checking against the expression")
        check = await launch_kernel(rt, LaunchRequest(kernel_id=compiled.kernel_id, grid=launch.grid,
                                                      args=launch.args, reference=launch.reference, atol=atol,
                                                      rtol=rtol, target=target))
        if req.benchmark:
            await progress(3, 4, "timing against torch")
            bench = await benchmark(rt, BenchmarkRequest(
                kernel_id=compiled.kernel_id, grid=launch.grid, args=launch.args, reference=launch.reference,
                baseline=plan.baseline, flops=plan.flops, atol=atol, rtol=rtol, target=target,
                warmup_ms=min(10.0, req.rep_ms), rep_ms=req.rep_ms))
    elif req.benchmark:
        raise ToolInputError(f"benchmark needs the check's launch, and check is off (or {target} has no device "
                             "here); pass check=true on a machine with that device.")
    notes = plan.notes(target, check_wanted)
    return GenerateResult(
        kernel_id=compiled.kernel_id, kernel_name=kernel.name, target=compiled.target,
        template=fused.group.kind,  # type: ignore[arg-type]
        ops=[op.name for op in fused.group.ops], source=kernel.source, launch=launch, compile=compiled,
        check=check, benchmark=bench, passed=check.passed if check else None, notes=notes,
        summary=_summary(kernel.name, fused, compiled.target, check, bench),
    )


def _write(rt: Runtime, req: GenerateRequest, target: str) -> tuple[_Plan, Kernel]:
    """The expression -> the kernel's plan and text, every input and output checked against the limits."""
    _check_args(rt, req)
    limits = rt.limits
    program = parse_program(req.expression, arg_names=list(req.args), outputs=req.outputs,
                            max_chars=limits.max_reference_chars, max_nodes=limits.max_reference_nodes,
                            max_depth=limits.max_reference_depth)
    tr = Translator(req.args, LOWERINGS)
    fused = build_group(tr, tr.run(program))
    plan = _Plan(req, program, fused, "cpu" if target == "cpu" else "cuda", limits.max_reference_nodes)
    kernel = plan.emit()
    check_args_limits(plan.launch_args(kernel), limits)  # the outputs too, before anything is compiled
    return plan, kernel


def _check_args(rt: Runtime, req: GenerateRequest) -> None:
    if len(req.args) > MAX_ARGS:
        raise ToolInputError(f"{len(req.args)} args; the limit is {MAX_ARGS}.")
    for name, value in req.args.items():
        if not name.isidentifier() or name.startswith("_") or name in _ROOTS or len(name) > 64:
            raise ToolInputError(
                f"args: {name!r} cannot name an argument; use an identifier of at most 64 characters that does "
                "not start with '_' and is not torch, F or math."
            )
        if isinstance(value, TensorSpec) and value.init == "empty":
            raise ToolInputError(f"args[{name!r}] has init 'empty': list inputs only; the tool makes the outputs.")
    check_args_limits(dict(req.args), rt.limits)


def _summary(name: str, fused: Fused, target: str, check: Any, bench: Any) -> str:
    text = f"generated {name} ({fused.group.kind}: {', '.join(dict.fromkeys(op.name for op in fused.group.ops))}) " \
           f"for {target}"
    if check is not None:
        worst = max((c.max_abs_error or 0.0 for c in check.checks.values()), default=0.0)
        text += f"; check {'PASSED' if check.passed else 'FAILED'} (max abs error {worst:.3g})"
    if bench is not None and bench.best is not None:
        timing = bench.results[bench.best].timing
        text += f"; {timing.median_us:.1f} us" if timing else ""
        text += f", {bench.speedup:.2f}x vs torch" if bench.speedup else ""
        text += " (NOISY timings: see benchmark.summary)" if "NOISY" in bench.summary else ""
    return text


def _free(base: str, taken: set[str]) -> str:
    """`base`, or the first of `{base}_1`, `{base}_2`, ... (then `a_{base}`, ...) that the kernel does not use
    itself and `taken` does not hold; added to `taken`."""
    for stem in (base, f"a_{base}"):
        for i in range(len(taken) + 2):
            candidate = stem if i == 0 else f"{stem}_{i}"
            if is_free_name(candidate) and candidate not in taken:
                taken.add(candidate)
                return candidate
    raise ToolInputError(f"no parameter name can be made from {base!r}; rename that argument or output.")


class _Plan:
    """Names, configuration and launch values of one generated kernel."""

    def __init__(self, req: GenerateRequest, program: Program, fused: Fused, device: str, max_nodes: int) -> None:
        self.req, self.program, self.fused = req, program, fused
        self.device = device
        self.params = self._params()
        kind, sizes = fused.group.kind, fused.sizes
        self.num_stages: int | None = None
        if kind == "matmul":
            a = req.args[fused.inputs[0]]
            itemsize = DTYPES[a.dtype].torch_dtype.itemsize if isinstance(a, TensorSpec) else 2
            bm, bn, bk, self.num_warps, stages = matmul_config(sizes["M"], sizes["N"], sizes["K"], device, itemsize)
            self.num_stages = stages if device != "cpu" else None
            self.blocks: dict[str, int | float | bool] = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
            self.grid: list[int | str] = ["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"]
        elif kind == "rows":
            per_prog, self.num_warps = rows_config(sizes["R"], sizes["C"], device)
            block_c = 1 << max(0, (sizes["C"] - 1).bit_length())
            self.blocks, self.grid = {"ROWS": per_prog, "BLOCK_C": block_c}, ["cdiv(R, ROWS)"]
        else:
            block, self.num_warps = pointwise_config(sizes["n"], device)
            self.blocks, self.grid = {"BLOCK": block}, ["cdiv(n, BLOCK)"]
        self.references = {self.params[o]: inline(program, o, self.params, max_nodes=max_nodes)
                           for o, _ in fused.outputs}
        refs = list(self.references.values())
        self.baseline = refs[0] if len(refs) == 1 else f"({', '.join(refs)},)"
        self.flops = 2 * math.prod(sizes.values()) if kind == "matmul" else None

    def _params(self) -> dict[str, str]:
        """Argument and output name -> kernel parameter name: pointers end in _ptr, scalars keep their
        names unless the kernel body uses them itself."""
        out: dict[str, str] = {}
        taken: set[str] = set()
        tensors = [n for n, v in self.req.args.items() if isinstance(v, TensorSpec)] + [o for o, _ in
                                                                                         self.fused.outputs]
        for name in [*self.req.args, *(o for o, _ in self.fused.outputs)]:
            out[name] = _free((name.removesuffix("_ptr") + "_ptr") if name in tensors else name, taken)
        return out

    def names(self) -> Names:
        f = self.fused
        stems = [self.params[n].removesuffix("_ptr") for n in f.inputs]
        taken = set(self.params.values())
        values = [_free(stem, taken) for stem in stems]
        return Names(inputs=tuple(self.params[n] for n in f.inputs),
                     outputs=tuple(self.params[o] for o, _ in f.outputs),
                     values=tuple(values), prefixes=tuple(stems), scalars=tuple(self.params[s] for s in f.scalars))

    def kernel_name(self) -> str:
        name = self.req.kernel_name
        if name is not None:
            if not is_free_name(name) or name in self.params.values() or len(name) > 64:
                raise ToolInputError(f"kernel_name {name!r} is not usable: give an identifier of at most 64 "
                                     "characters that is not a parameter's name or a word the kernel uses.")
            return name
        last = self.program.statements[-1].tree
        words = list(dict.fromkeys(op.name for op in self.fused.group.ops if op.name not in ("convert", "copy")))
        if self.fused.group.kind == "matmul":
            words = ["matmul"] + [w for w in words if w != "dot"]
        called = _called(last)
        if called not in _NAMED and self.fused.group.kind == "rows":
            # a row reduction under an elementwise epilogue (F.rms_norm(x, ...) * w) is named for the reduction
            called = next((c for c in map(_called, ast.walk(last)) if c in _NAMED and c != "linear"), called)
        if called in _NAMED and (self.fused.group.kind != "matmul") == (called != "linear"):
            words = [called]
        stem = "_".join(words[:3]) or "copy"
        candidate = f"{stem}_kernel"
        return candidate if is_free_name(candidate) and candidate not in self.params.values() else "generated_kernel"

    def emit(self) -> Kernel:
        f = self.fused
        names = self.names()
        renamed = {s: self.params[s] for s in f.scalars}
        group = Group(f.group.kind, list(f.group.inputs), [
            dataclasses.replace(op, args=tuple(renamed.get(a, a) if isinstance(a, str) else a for a in op.args))
            for op in f.group.ops], list(f.group.outputs))
        comments = [f"{s.target} = {s.text}" for s in self.program.statements]
        comments.append({
            "pointwise": "each program computes BLOCK consecutive elements of the n-element result",
            "rows": "each program holds ROWS rows of C values (BLOCK_C >= C) and reduces each row in registers",
            "matmul": "each program computes a BLOCK_M x BLOCK_N tile of the (M, N) result, walking K in steps "
                      "of BLOCK_K",
        }[group.kind])
        name = self.kernel_name()
        if group.kind == "matmul":
            kernel = emit_matmul(group, f.layouts, name, wide=f.wide, names=names, comments=comments)
        else:
            kernel = emit(group, f.layouts, name, wide=f.wide, names=names, comments=comments)
        every = [*names.inputs, *names.outputs, *kernel.params, *names.values, name]
        clash = sorted({p for p in every if every.count(p) > 1})
        if clash:
            raise ToolInputError(f"the kernel would use the name(s) {', '.join(clash)} twice; rename the argument "
                                 "that leads to them (e.g. one ending in _stride0).")
        return kernel

    def values(self, kernel: Kernel) -> dict[str, int | float | bool]:
        """Every runtime parameter after the pointers: scalars, sizes, strides."""
        f = self.fused
        values: dict[str, int | float | bool] = dict(f.sizes)
        prefixes = self.names().prefixes
        for k, lay in enumerate(f.layouts):
            values.update(layout_values(k, lay, prefixes[k]))
        for s in f.scalars:
            v = self.req.args[s]
            assert not isinstance(v, TensorSpec)
            values[self.params[s]] = v
        return {p: values[p] for p in kernel.params}

    def launch_args(self, kernel: Kernel) -> dict[str, Any]:
        f = self.fused
        args: dict[str, Any] = {self.params[n]: self.req.args[n] for n in f.inputs}
        for name, meta in f.outputs:
            args[self.params[name]] = TensorSpec(shape=[int(s) for s in meta.shape],
                                                 dtype=str(meta.dtype).removeprefix("torch."),  # type: ignore[arg-type]
                                                 init="empty")
        args.update(self.values(kernel))
        return args

    def signature(self, kernel: Kernel) -> dict[str, str]:
        return {name: signature_of(value) for name, value in self.launch_args(kernel).items()}

    def tolerance(self, req: GenerateRequest, target: str) -> tuple[float | None, float | None]:
        """fp32 matmuls run on tf32 tensor cores on GPUs (as Triton's tl.dot does): a looser check there."""
        a = self.req.args[self.fused.inputs[0]] if self.fused.inputs else None
        if (self.fused.group.kind == "matmul" and target != "cpu" and isinstance(a, TensorSpec)
                and a.dtype == "float32"):
            return (req.atol if req.atol is not None else 2e-2), (req.rtol if req.rtol is not None else 2e-2)
        return req.atol, req.rtol

    def notes(self, target: str, checked: bool) -> list[str]:
        f = self.fused
        sizes = ", ".join(f.sizes)
        notes = [f"Sizes ({sizes}) and strides are parameters: the same kernel runs other shapes with launch.args "
                 "changed to match; block sizes are constexprs (part of the kernel_id)."]
        if f.group.kind == "rows":
            notes.append("A program holds whole rows: BLOCK_C must be a power of two >= C; pass a larger BLOCK_C "
                         "in constexprs for wider rows (up to 16384).")
        if f.group.kind == "matmul":
            notes.append("tl.dot accumulates in float32; fp32 operands run as tf32 on NVIDIA GPUs (pass "
                         "input_precision='ieee' to tl.dot for full fp32), so GPU checks of fp32 matmuls use "
                         "atol=rtol=2e-2.")
        unused = [n for n in self.req.args if n not in f.inputs and n not in f.scalars]
        if unused:
            notes.append(f"Not read by the kernel (left out of its parameters): {', '.join(unused)}.")
        if not checked:
            notes.append(f"Not launched: no {target} device here; run launch_kernel with launch's arguments "
                         "where there is one.")
        return notes
