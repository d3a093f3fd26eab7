"""`op`: a Python function that launches Anvil kernels, registered as a torch custom operator.

torch.compile, torch.export and FX tracing cannot look inside a kernel launch: to them the launch is
foreign Python that reads data pointers. As a custom operator (torch.library.custom_op) the function
becomes one opaque node of the graph, which compiles with fullgraph=True, runs inside CUDA graphs
and takes part in autograd through `register_autograd`.

What `op` adds over torch.library.custom_op: the function is its own fake (meta) implementation.
Tracing calls the fake implementation with fake tensors (or meta tensors) to learn the outputs'
shapes, dtypes and devices; here that runs the function's body itself: its torch allocations make
fake tensors, and every Anvil kernel launch given a fake or meta tensor does nothing (nothing is
compiled or run). A body that needs tensor values (`.item()`, `.tolist()`, a branch on data, an
output shape that depends on data) cannot be traced that way: the error says so, and a fake
registered with `register_fake` takes the body's place.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch._subclasses import fake_tensor

from ..errors import AnvilError

if TYPE_CHECKING:
    from torch._library.custom_ops import CustomOpDef

__all__ = ["op", "DataDependentOpError"]


class DataDependentOpError(AnvilError, RuntimeError):
    """An op's body, run as its own fake implementation, needed the values of a tensor.

    A RuntimeError as well, like torch's own fake-implementation failures ("no fake impl registered"):
    torch.compile stops with it (a TorchRuntimeError that quotes it), with or without fullgraph."""


def op(name: str, *, mutates_args: str | Iterable[str] = (), schema: str | None = None,
       device_types: str | Sequence[str] | None = None) -> Callable[[Callable[..., Any]], CustomOpDef]:
    """Register the decorated function, which launches Anvil kernels, as the torch operator `name`.

    Args:
        name: "namespace::name", e.g. "mylib::gelu_mul"; the op is also `torch.ops.mylib.gelu_mul`.
        mutates_args: the names of the tensor arguments the function writes (in place); every one
            it writes must be listed, or compiled graphs may reorder or drop the writes. "unknown"
            takes every argument as written.
        schema: the operator's schema, e.g. "(Tensor x, Tensor y) -> Tensor"; by default it is
            inferred from the function's type hints, which must then be complete.
        device_types: the device type(s) ("cpu", "cuda") this function implements; None: all.

    The function must:
      - allocate its outputs with torch (`torch.empty`, `torch.empty_like`, `x.new_empty`) on the
        inputs' device and launch Anvil kernels there; return new tensors, never an input or a
        view of one (declare writes to inputs with `mutates_args` and return None instead);
      - not synchronize with the device or read tensor values on the host (`.item()`, `.tolist()`,
        `.cpu()`, `print(x)`): a CUDA graph cannot capture a host synchronization, and the body
        also runs on fake tensors, which hold no values. Sizes, strides, dtypes and devices are fine.

    When the body must read values (e.g. an output size that depends on data), register a fake with
    `@the_op.register_fake`; it receives fake tensors and returns outputs of the right shapes.

    Returns torch's CustomOpDef, so the usual torch API applies: `register_fake`,
    `register_autograd(backward, setup_context=...)`, `register_kernel`, and calling it as a function.

    Example::

        import torch
        import compiler.language as tl
        from compiler import cdiv, jit
        from compiler.torch import op

        @jit
        def scale_kernel(X, Y, n, alpha, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(Y + offs, tl.load(X + offs, mask=mask) * alpha, mask=mask)

        @op("mylib::scale")
        def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
            x = x.contiguous()
            y = torch.empty_like(x)
            scale_kernel[(cdiv(x.numel(), 1024),)](x, y, x.numel(), alpha, BLOCK=1024)
            return y

        fn = torch.compile(lambda x: scale(x.sin(), 2.0) + 1, fullgraph=True)
    """
    namespace, sep, short = name.partition("::")
    if not (sep and namespace.isidentifier() and short.isidentifier()):
        raise ValueError(f"op name {name!r} must be 'namespace::name' with both parts Python identifiers, "
                         f"e.g. 'mylib::{short or namespace or 'my_op'}'")

    def register(fn: Callable[..., Any]) -> CustomOpDef:
        if not callable(fn):
            raise TypeError(f"@op({name!r}) decorates a function that launches Anvil kernels, got {fn!r}")
        custom = torch.library.custom_op(name, fn, mutates_args=mutates_args, device_types=device_types,
                                         schema=schema)
        custom.register_fake(_body_as_fake(name, fn))  # a later register_fake replaces it
        return custom

    return register


def _body_as_fake(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` as the fake implementation of op `name`: its body run on fake or meta tensors, where
    Anvil launches run nothing; a failure to do without tensor values says what to do instead."""
    data_dependent = _data_dependent_errors()

    def fake(*args: Any, **kwargs: Any) -> Any:
        tensors = _tensors(args, kwargs)
        env = next((getattr(t.fake_mode, "shape_env", None) for t in tensors if hasattr(t, "fake_mode")), None)
        before = _unbound_symbols(env)
        try:
            out = fn(*args, **kwargs)
        except data_dependent as e:
            raise _needs_fake(name, fn, _read_at(fn, e)) from e
        except (RuntimeError, NotImplementedError, TypeError) as e:
            if "meta" in str(e) and any(t.is_meta for t in tensors):  # "item() cannot be called on meta tensors"
                raise _needs_fake(name, fn, _read_at(fn, e)) from e
            e.add_note(f"(while running the body of {name} on fake tensors, as its own fake implementation: "
                       f"if it reads tensor values, register a fake with @{fn.__name__}.register_fake)")
            raise
        if before is not None and _reads_values(env, before, out):
            raise _needs_fake(name, fn, " (a value read on the host that no output's shape holds)")
        return out

    fake.__name__ = f"{fn.__name__}_fake"
    fake.__qualname__ = f"{getattr(fn, '__qualname__', fn.__name__)}_fake"
    return fake


def _needs_fake(name: str, fn: Callable[..., Any], detail: str) -> DataDependentOpError:
    return DataDependentOpError(
        f"op {name}: its body runs on fake tensors to infer the outputs' shapes (it is its own fake "
        f"implementation), and it reads tensor values{detail}. Fake tensors hold no values (.item(), "
        f".tolist(), .cpu() data, branches and output sizes that depend on data cannot be traced). Register a "
        f"fake implementation that computes the outputs' shapes without the data: @{fn.__name__}.register_fake, "
        f"returning e.g. x.new_empty(shape); for an output size known only from data use "
        f"torch.library.get_ctx().new_dynamic_size()")


def _read_at(fn: Callable[..., Any], e: BaseException) -> str:
    """' at file:line (`source`): Error: message's first line': the innermost frame of the traceback in
    fn's file (the body or a helper beside it), or no place when none is there."""
    code = getattr(fn, "__code__", None)
    frames = [f for f in traceback.extract_tb(e.__traceback__) if code is not None and f.filename == code.co_filename]
    where = f" at {frames[-1].filename}:{frames[-1].lineno} (`{(frames[-1].line or '').strip()}`)" if frames else ""
    first = (str(e).strip().splitlines() or [""])[0]  # torch's own advice follows; this error gives the way out
    return f"{where}: {type(e).__name__}: {first}"


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    values = [*args, *kwargs.values()]
    values += [v for seq in values if isinstance(seq, (list, tuple)) for v in seq]
    return [v for v in values if isinstance(v, torch.Tensor)]


def _unbound_symbols(env: Any) -> set[Any] | None:
    """The shape environment's unbacked symbols not yet bound to an output: under torch.compile, a value
    read on the host (`.item()`) becomes one instead of an error. None: no environment to ask."""
    pending = getattr(env, "pending_fresh_unbacked_symbols", None)
    return set(pending) if pending is not None else None


def _reads_values(env: Any, before: set[Any], out: Any) -> bool:
    """Whether the body made an unbacked symbol (read a value) that no output's size holds: torch
    would reject the op's output for it with a message that does not say what to do."""
    try:
        # deferred: start-up cost: torch's symbolic shapes import sympy (about 0.7 s); the server imports this module
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

        fresh = (_unbound_symbols(env) or set()) - before - set(getattr(env, "ignorable_fresh_unbacked_symbols", ()))
        return bool(fresh - free_unbacked_symbols(out))
    except Exception:  # noqa: BLE001 - an environment this check does not know: torch checks the outputs itself
        return False


def _data_dependent_errors() -> tuple[type[BaseException], ...]:
    """The exceptions by which torch says that an operation needs a fake tensor's values: a value read
    on the host, an output shape that depends on data, a branch on a value read earlier (under
    torch.compile, where a read value is a symbol)."""
    found = [getattr(fake_tensor, n, None) for n in ("DataDependentOutputException", "DynamicOutputShapeException")]
    try:
        # deferred: start-up cost: torch's symbolic shapes import sympy (about 0.7 s); the server imports this module
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        found.append(GuardOnDataDependentSymNode)
    except ImportError:
        pass
    return tuple(t for t in found if isinstance(t, type) and issubclass(t, BaseException))
