"""Specialization: how each launch argument shapes the compiled kernel (Triton's rules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import errors as E
from .. import knobs
from ..backends.contract import parse_signature_type
from ..frontend.descriptor import DescriptorArg
from ..frontend.kernel import ParamSpec
from ..ir import types as T
from ..language import core as lc

try:
    from torch import Tensor as _Tensor
    from torch.nn import Parameter as _Parameter  # a module's weights: plain tensors on the warm path too
except ImportError:  # pragma: no cover - torch is a dependency
    _Tensor = _Parameter = type(None)  # type: ignore[assignment,misc]
try:
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
except ImportError:  # pragma: no cover - every supported torch has it
    class _FakeTensor:  # type: ignore[no-redef]
        pass

__all__ = ["ParamInfo", "LaunchOptions", "arg_key", "spec_for", "parse_signature_type", "torch_elem", "NO_DATA",
           "without_data"]


class _NoData:
    def __repr__(self) -> str:
        return "<fake tensor>"


# A fake tensor's key token. No launch entry or compiled kernel is ever registered under a key that
# holds it, so a launch with a fake tensor always misses and reaches the general path, which runs
# nothing for it (Launcher._run).
NO_DATA: Any = _NoData()


def without_data(vals: Any) -> bool:
    """Whether any of `vals` is a tensor without memory: a fake tensor (FakeTensorMode, torch.compile's
    tracing) or a meta tensor. Its shape, dtype and device are known; there is nothing to run a kernel
    on, and its data_ptr is no address. (torch's is_fake also sees through wrapper subclasses, at a
    microsecond a call; none of those reach a launch.)"""
    return any(isinstance(v, _FakeTensor) or (type(v) is _Tensor and v.is_meta) for v in vals)


@dataclass(frozen=True)
class ParamInfo:
    name: str
    constexpr: bool
    no_specialize: bool


@dataclass(frozen=True)
class LaunchOptions:
    num_warps: int = 4
    num_stages: int = 3
    debug: bool = False
    maxnreg: int | None = None  # registers per thread at most (NVIDIA: `.maxnreg`); None: ptxas chooses
    # programs per thread block cluster (x, y, z) on NVIDIA sm_90+ (`.reqnctapercluster`); None: no clusters
    cluster_dims: tuple[int, int, int] | None = None
    # check every load, store and atomic against the tensor it addresses, as debug mode does, without
    # debug's other effects (tl.device_assert stays off); what the server's tool launches use
    bounds_check: bool = False

    @property
    def checked(self) -> bool:
        """Whether the binary checks its accesses (debug mode or bounds_check)."""
        return self.debug or self.bounds_check

    @staticmethod
    def from_kwargs(kw: dict[str, Any], fn_debug: bool | None) -> LaunchOptions:
        debug = kw.get("debug")
        if debug is None:
            debug = fn_debug if fn_debug is not None else knobs.debug()
        nw = int(kw.get("num_warps", 4))
        if nw <= 0 or nw & (nw - 1):
            raise E.LaunchError(f"num_warps must be a power of two, got {nw}")
        maxnreg = kw.get("maxnreg")
        if maxnreg is not None and (isinstance(maxnreg, bool) or not isinstance(maxnreg, int)
                                    or not 24 <= maxnreg <= 255):
            raise E.LaunchError(f"maxnreg must be None or an int from 24 to 255 (registers per thread), "
                                f"got {maxnreg!r}")
        return LaunchOptions(nw, int(kw.get("num_stages", 3)), bool(debug), maxnreg,
                             cluster_shape(kw.get("cluster_dims")), bool(kw.get("bounds_check", False)))


def cluster_shape(value: Any) -> tuple[int, int, int] | None:
    """The cluster_dims launch option checked: 1 to 3 positive ints (x, y, z), at most 8 programs
    per cluster (the portable limit); None or (1, 1, 1): no clusters."""
    dims = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    if dims is None:
        return None
    if (not isinstance(dims, (tuple, list)) or not 1 <= len(dims) <= 3
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims)):
        raise E.LaunchError(f"cluster_dims must be None or 1 to 3 positive ints (programs per cluster along x, y, "
                            f"z), got {value!r}")
    x, y, z = (*dims, 1, 1)[:3]
    if x * y * z > 8:
        raise E.LaunchError(f"cluster_dims {value!r} puts {x * y * z} programs in a cluster; at most 8 are allowed")
    return None if x * y * z == 1 else (x, y, z)


def check_cluster_grid(grid: tuple[int, int, int], dims: tuple[int, int, int], name: str) -> None:
    """A launch in clusters of `dims` programs needs a grid that is a multiple of them."""
    if grid[0] % dims[0] or grid[1] % dims[1] or grid[2] % dims[2]:
        raise E.LaunchError(f"{name}: grid {tuple(grid)} is not a multiple of cluster_dims {dims}: launch a grid "
                            "whose size along each axis is a multiple of the cluster's")


_TORCH_NAMES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
    "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
}


def torch_elem(dtype: Any) -> T.ScalarType:
    name = str(dtype).removeprefix("torch.")
    t = _TORCH_NAMES.get(name)
    if t is None and not name.startswith("torch"):
        # A tensor reinterpreted as another dtype (`triton.reinterpret` / TensorWrapper): the
        # dtype is a language dtype, ours or the real triton.language's.
        d = lc.to_dtype(dtype)
        if d is not None and isinstance(d.ir, T.ScalarType):
            return d.ir
    if t is None:
        raise E.LaunchError(f"tensors of dtype {dtype} are not supported by kernels")
    return T.SCALARS[t]


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "dtype")


def arg_key(p: ParamInfo, v: Any) -> Any:
    """The part of the cache key contributed by one argument (cheap: runs on every launch)."""
    if (type(v) is _Tensor or type(v) is _Parameter) and not p.constexpr:
        # the device is part of the key: the same dtypes on CPU and GPU are different kernels, and
        # a tensor on an unsupported device must reach the general path's error
        return (v.dtype, v.device, p.no_specialize or v.data_ptr() & 15 == 0)
    if p.constexpr:
        # the type is part of the token: True == 1 == 1.0 in Python, but each compiles differently
        v = v.value if isinstance(v, lc.constexpr) else v
        return ("c", type(v).__name__, _hashable(v))
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "i1"
    if isinstance(v, int):
        if p.no_specialize:
            return "i32" if -(2**31) <= v < 2**31 else "i64"
        if v == 1:
            return "one"
        if -(2**31) <= v < 2**31:
            return "i32/16" if v % 16 == 0 else "i32"
        if -(2**63) <= v < 2**63:
            return "i64/16" if v % 16 == 0 else "i64"
        return "u64" if 0 <= v < 2**64 else ("overflow", v)
    if isinstance(v, float):
        return "fp32"
    desc = getattr(v, "__anvil_descriptor__", None)
    if desc is not None:
        return ("desc", desc)
    if _is_tensor(v):
        if type(v) is _FakeTensor:  # no memory (and a data_ptr that warns): see NO_DATA. The exact type (torch
            # has no subclass of it) costs a tensor subclass such as nn.Parameter less than isinstance
            return NO_DATA
        # the device is part of the key: the same dtypes on CPU and GPU are different kernels
        return (v.dtype, getattr(v, "device", None), p.no_specialize or v.data_ptr() % 16 == 0)
    return ("?", type(v).__name__)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def spec_for(p: ParamInfo, v: Any, kernel: str) -> ParamSpec:
    """How to compile for argument value `v` of parameter `p`."""
    if p.constexpr:
        return ParamSpec(p.name, True, v.value if isinstance(v, lc.constexpr) else v)
    if v is None:
        return ParamSpec(p.name, True, None)
    if isinstance(v, bool):
        return ParamSpec(p.name, False, None, T.i1)
    if isinstance(v, int):
        if v == 1 and not p.no_specialize:
            return ParamSpec(p.name, True, 1)
        div = 16 if (v % 16 == 0 and not p.no_specialize) else 1
        if -(2**31) <= v < 2**31:
            return ParamSpec(p.name, False, None, T.i32, div)
        if -(2**63) <= v < 2**63:
            return ParamSpec(p.name, False, None, T.i64, div)
        if 0 <= v < 2**64:
            return ParamSpec(p.name, False, None, T.u64, div)
        raise E.ArgumentOverflowError(f"argument {p.name!r} of {kernel} = {v} does not fit in 64 bits")
    if isinstance(v, float):
        return ParamSpec(p.name, False, None, T.fp32)
    desc = getattr(v, "__anvil_descriptor__", None)
    if desc is not None:  # a host tensor descriptor: (torch dtype, block shape, padding)

        dt, block, padding = desc
        return ParamSpec(p.name, False, DescriptorArg(torch_elem(dt), tuple(block), padding), T.PointerType(T.i64),
                         16)
    if _is_tensor(v):
        div = 16 if (v.data_ptr() % 16 == 0 and not p.no_specialize) else 1
        return ParamSpec(p.name, False, None, T.PointerType(torch_elem(v.dtype)), div)
    raise E.LaunchError(f"argument {p.name!r} of {kernel} has unsupported type {type(v).__name__}; "
                        "pass torch tensors, ints, floats, bools or None")
