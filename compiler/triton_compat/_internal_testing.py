"""`triton._internal_testing`: the helpers Triton's own test suites import, for the CPU backend.

Written to Triton's behaviour (same dtype lists, same random streams, same conversions), so
that test files like `python/test/unit/language/test_core.py` compute the same inputs and
references as on a GPU. The target reports backend "cpu": `is_cpu()` is true, every GPU
predicate false.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np
import pytest
import torch
from numpy.random import RandomState

from . import knobs
from . import language as tl
from .runtime.driver import driver
from .runtime.jit import TensorWrapper, reinterpret, type_canonicalisation_dict

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


def is_interpreter() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def get_current_target() -> Any:
    return None if is_interpreter() else driver.active.get_current_target()


def is_cpu() -> bool:
    return not is_interpreter()


def _false(*_: Any) -> bool:
    return False


is_cuda = is_hip = is_xpu = _false
is_ampere_or_newer = is_blackwell = is_blackwell_ultra = is_hopper_or_newer = is_hopper = is_sm12x = _false
is_hip_cdna = is_hip_cdna2 = is_hip_cdna3 = is_hip_cdna4 = is_hip_cdna3_or_newer = _false
is_hip_rdna = is_hip_rdna3 = is_hip_rdna4 = is_hip_gfx11 = is_hip_gfx12 = is_hip_gfx1250 = _false


def get_arch() -> str:
    t = get_current_target()
    return "" if t is None else str(t.arch)


def get_hip_lds_size() -> int:
    return 65536


def numpy_random(shape: Any, dtype_str: str, rs: RandomState | None = None, low: Any = None,
                 high: Any = None) -> Any:
    """Random numpy data of `dtype_str` (Triton's stream: seed 17 unless `rs` is given; no zeros
    for integers, so division tests never divide by zero)."""
    if isinstance(shape, int):
        shape = (shape,)
    if rs is None:
        rs = RandomState(seed=17)
    if dtype_str in int_dtypes + uint_dtypes:
        iinfo = np.iinfo(getattr(np, dtype_str))
        low = iinfo.min if low is None else max(low, iinfo.min)
        high = iinfo.max if high is None else min(high, iinfo.max)
        x = rs.randint(low, high, shape, dtype=getattr(np, dtype_str))
        x[x == 0] = 1
        return x
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        return (rs.normal(0, 1, shape).astype("float32").view("uint32") & np.uint32(0xFFFF0000)).view("float32")
    if dtype_str in ["bool", "int1", "bool_"]:
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"Unknown dtype {dtype_str}")


def to_triton(x: Any, device: Any, dst_type: str | None = None) -> Any:
    """A numpy array as a kernel argument: a torch tensor, or for unsigned and fp8 types the
    same bits in a signed tensor wrapped with the intended dtype."""
    t = x.dtype.name
    if t in uint_dtypes:
        signed = x.astype(getattr(np, t.lstrip("u")))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, t))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if t == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


def str_to_triton_dtype(x: str) -> Any:
    return tl.str_to_ty(type_canonicalisation_dict[x], None)


def torch_dtype_name(dtype: Any) -> str:
    if isinstance(dtype, tl.dtype):
        return str(dtype.name)
    if isinstance(dtype, torch.dtype):
        m = re.match(r"^torch\.(\w+)$", str(dtype))
        assert m is not None
        return m.group(1)
    raise TypeError(f"not a triton or torch dtype: {type(dtype)}")


def to_numpy(x: Any) -> Any:
    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.bfloat16:
            return x.cpu().float().numpy()
        return x.cpu().numpy()
    raise ValueError(f"Not a triton-compatible tensor: {x}")


def supports_tma(byval_only: bool = False) -> bool:
    return is_interpreter()


def supports_ws() -> bool:
    return is_interpreter()


def tma_skip_msg(byval_only: bool = False) -> str:
    return "Requires TMA (NVIDIA Hopper or newer); the CPU backend has none"


requires_tma = pytest.mark.skipif(not supports_tma(), reason=tma_skip_msg())


def default_alloc_fn(size: int, align: int, _: Any) -> Any:
    return torch.empty(size, dtype=torch.int8)


def unwrap_tensor(t: Any) -> Any:
    return t.base if isinstance(t, TensorWrapper) else t


def _fresh_knobs_impl(skipped_attr: set[str] | None = None) -> Any:
    def fresh() -> Any:
        return knobs

    def reset() -> None:
        return None

    return fresh, reset
