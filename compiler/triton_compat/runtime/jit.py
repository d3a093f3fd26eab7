"""`triton.runtime.jit`: Triton's JITFunction API on top of Anvil's, plus TensorWrapper/reinterpret."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable
from typing import Any

from ... import errors as E
from ...ir import types as T
from ...runtime.function import ConstexprFunction, DeviceFunction, constexpr_function
from ...runtime.jit import JITFunction as _AnvilJITFunction
from ...runtime.jit import KernelInterface
from ...runtime.specialize import spec_for

__all__ = ["JITFunction", "JITCallable", "KernelInterface", "jit", "TensorWrapper", "reinterpret", "MockTensor",
           "ConstexprFunction", "constexpr_function",
           "type_canonicalisation_dict"]

_DEF = re.compile(r"^def\s+\w+\s*\(", re.MULTILINE)


class JITFunction(_AnvilJITFunction):
    """A `@triton.jit` function: Anvil's JITFunction with Triton's extra attributes.

    `src` is the dedented source from `def` on; `_unsafe_update_src` swaps it (Triton's test
    suites patch kernels this way); `params`, `starting_line_number` and `__call__` behave as
    Triton's.
    """

    def __init__(self, fn: Callable[..., Any], version: Any = None,
                 do_not_specialize: Iterable[int | str] | None = None,
                 do_not_specialize_on_alignment: Iterable[int | str] | None = None, debug: bool | None = None,
                 noinline: bool | None = None, repr: Any = None, launch_metadata: Any = None) -> None:
        super().__init__(fn, debug=debug, do_not_specialize=tuple(do_not_specialize or ()),
                         noinline=bool(noinline))
        self.do_not_specialize = list(do_not_specialize or ())
        self.do_not_specialize_on_alignment = list(do_not_specialize_on_alignment or ())
        self.version = version
        self._repr = repr
        self.launch_metadata = launch_metadata
        m = _DEF.search(textwrap.dedent(self.text))
        self._def_offset = textwrap.dedent(self.text)[:m.start()].count("\n") if m else 0

    @property
    def src(self) -> str:
        dedented = textwrap.dedent(self.text)
        m = _DEF.search(dedented)
        return dedented[m.start():] if m else dedented

    @property
    def starting_line_number(self) -> int:
        return self.first_line + self._def_offset

    def _unsafe_update_src(self, new_src: str) -> None:
        """Replace the kernel's source (what Triton's tests do to template kernels)."""
        self.first_line = self.starting_line_number
        self._def_offset = 0
        self.text = new_src
        self._source = None
        self._deep_hash = None
        self._launcher = None
        self.cache = {}

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        _check_options(kwargs)
        try:
            return super().run(*args, grid=grid, **kwargs)
        except E.CompilationError as e:
            raise e from _cause(e)

    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        _check_options(kwargs)
        try:
            ck = super().warmup(*args, grid=grid, **kwargs)
        except E.CompilationError as e:
            raise e from _cause(e)
        if self._repr is not None:
            ck.name = self._repr(self._specialization(args, kwargs))
        return ck

    def _specialization(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """What `repr=` receives: the signature types and the constants of a launch."""
        launcher = self.launcher
        vals, _ = launcher.bind(args, dict(kwargs))
        signature, constants = {}, {}
        for p, v in zip(launcher.params, vals, strict=True):
            s = spec_for(p, v, self.__name__)
            if s.constant:
                signature[p.name] = "constexpr"
                constants[p.name] = s.value
            else:
                t = s.type
                signature[p.name] = f"*{t.elem}" if isinstance(t, T.PointerType) else str(t)
        return _Specialization(self.__name__, signature, constants)

    @property
    def params(self) -> list[Any]:
        cexpr = self.constexpr_names
        return [_Param(n, i, n in cexpr) for i, n in enumerate(self.arg_names)]

    @property
    def cache_key(self) -> str:
        return self.deep_hash

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Cannot call @triton.jit'd outside of the scope of a kernel")

    def __repr__(self) -> str:
        return f"JITFunction({getattr(self.fn, '__module__', '?')}:{getattr(self.fn, '__qualname__', self.__name__)})"


JITCallable = JITFunction


def _check_options(kwargs: dict[str, Any]) -> None:
    """Drop other backends' launch options; check num_warps as Triton does (an AssertionError)."""
    for k in _FOREIGN_LAUNCH_OPTIONS.intersection(kwargs):
        del kwargs[k]
    nw = kwargs.get("num_warps")
    if nw is not None:
        assert int(nw) > 0 and int(nw) & (int(nw) - 1) == 0, "num_warps must be a power of 2"


def _cause(e: E.CompilationError) -> Exception:
    """Triton raises a CompilationError *from* the error of the failing operation, and code
    (Triton's tests among it) reads the message from `__cause__`: give it one."""
    return ValueError(e.message)

# Launch options of other Triton backends (triton-cpu's thread count, AMD's MFMA knobs, ...):
# accepted and ignored, so code written for those backends launches unchanged.
_FOREIGN_LAUNCH_OPTIONS = frozenset({
    "num_cpu_threads", "kpack", "matrix_instr_nonkdim", "waves_per_eu", "instruction_sched_variant",
    "schedule_hint", "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer",
    "extern_libs", "sanitize_overflow", "arch", "enable_reflect_ftz", "ir_override",
})


class _Specialization:
    def __init__(self, name: str, signature: dict[str, str], constants: dict[str, Any]) -> None:
        self.name = name
        self.signature = signature
        self.constants = constants
        self.attrs: dict[str, Any] = {}
        self.options: dict[str, Any] = {}


class _Param:
    def __init__(self, name: str, num: int, is_constexpr: bool) -> None:
        self.name = name
        self.num = num
        self.is_constexpr = is_constexpr
        self.do_not_specialize = False


def jit(fn: Any = None, *, version: Any = None, repr: Any = None, launch_metadata: Any = None,
        do_not_specialize: Iterable[int | str] | None = None,
        do_not_specialize_on_alignment: Iterable[int | str] | None = None, debug: bool | None = None,
        noinline: bool | None = None) -> Any:
    """`@triton.jit`: compile the function with Anvil when it is launched (or called from a kernel)."""

    def decorator(f: Callable[..., Any]) -> JITFunction:
        if isinstance(f, DeviceFunction):  # one of ours: a kernel, or a function of the language's library
            if f.fn is None:
                raise E.AnvilError("@triton.jit needs a Python function")
            f = f.fn
        return JITFunction(f, version=version, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment, debug=debug,
                           noinline=noinline, repr=repr, launch_metadata=launch_metadata)

    return decorator(fn) if fn is not None else decorator


# ---------------------------------------------------------------------- reinterpreted tensors
class TensorWrapper:
    """A torch tensor viewed as another dtype (e.g. int8 storage read as tl.uint8 or fp8)."""

    def __init__(self, base: Any, dtype: Any) -> None:
        self.dtype = dtype
        self.base = base
        self.data = base.data
        self.device = base.device
        self.shape = self.base.shape

    def data_ptr(self) -> int:
        return int(self.base.data_ptr())

    def stride(self, *args: Any) -> Any:
        return self.base.stride(*args)

    def storage_offset(self) -> int:
        return int(self.base.storage_offset())

    def untyped_storage(self) -> Any:
        return self.base.untyped_storage()

    def numel(self) -> int:
        return int(self.base.numel())

    def dim(self) -> int:
        return int(self.base.dim())

    def size(self, *args: Any) -> Any:
        return self.base.size(*args)

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"

    def element_size(self) -> int:
        return int(self.base.element_size())

    def cpu(self) -> TensorWrapper:
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other: TensorWrapper) -> None:
        self.base.copy_(other.base)

    def clone(self) -> TensorWrapper:
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device: Any) -> TensorWrapper:
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes: Any) -> TensorWrapper:
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)

    def __getattr__(self, name: str) -> Any:
        # Everything but the dtype is the base tensor's (is_cuda, storage, nbytes, ...).
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)


def reinterpret(tensor: Any, dtype: Any) -> Any:
    """View `tensor`'s storage as `dtype` (a tl dtype) when passed to a kernel."""
    if isinstance(tensor, TensorWrapper):
        if dtype == tensor.base.dtype:
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"Cannot reinterpret a {type(tensor)}.")


class MockTensor:
    """Stands in for a tensor argument when only its dtype matters (Triton's warm-up helper)."""

    def __init__(self, dtype: Any, shape: Any = None) -> None:
        self.dtype = dtype
        self.shape = shape or [1]

    @staticmethod
    def wrap_dtype(arg: Any) -> Any:
        if arg.__class__.__name__ == "dtype" and arg.__module__ == "torch":
            return MockTensor(arg)
        return arg

    @staticmethod
    def data_ptr() -> int:
        return 0

    def stride(self) -> tuple[int, ...]:
        return (0,) * len(self.shape)


type_canonicalisation_dict: dict[str, str] = {
    "bool": "u1", "int1": "u1", "uint1": "u1", "i1": "u1",
    "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "float8e4b15": "fp8e4b15", "float8_e4m3fn": "fp8e4nv",
    "float8e4b8": "fp8e4b8", "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2": "fp8e5", "float8e5b16": "fp8e5b16",
    "float8_e5m2fnuz": "fp8e5b16", "half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32",
    "float32": "fp32", "double": "fp64", "float64": "fp64", "int8": "i8", "int16": "i16", "int": "i32",
    "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "void": "void",
}
for _v in list(type_canonicalisation_dict.values()):
    type_canonicalisation_dict[_v] = _v
