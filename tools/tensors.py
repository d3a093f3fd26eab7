"""The tensors a tensor spec describes (tools/specs.py), built and read in the workers.

Values are generated on the CPU with a seeded generator and then moved to the device, so every
device sees the same inputs. An output (``init: "empty"``) is poisoned with its dtype's pattern
(tools/specs.py: ``DType.poison_bits``) so that elements the kernel never wrote can be counted.
"""

from __future__ import annotations

import math

import torch

from tools.errors import ToolInputError
from tools.specs import DTYPES, DType, TensorSpec, flatten_values, resolved_seed

__all__ = ["build_tensor", "poison_", "poison_mask", "count_poison", "poison_possible", "dtype_name"]


def build_tensor(name: str, spec: TensorSpec, device: torch.device | str = "cpu") -> torch.Tensor:
    """Create the tensor a spec describes. Values are generated on the CPU, then moved to ``device``.
    A value the dtype cannot hold (a bound, a fill value, a listed value) is the caller's error."""
    try:
        return _build_tensor(name, spec, device)
    except ToolInputError:
        raise
    except (RuntimeError, ValueError, OverflowError, TypeError) as exc:
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if "out of memory" in detail.lower() or "CUDA" in detail:
            raise
        raise ToolInputError(
            f"args[{name!r}]: cannot build a {spec.dtype} tensor from this spec ({detail}); give bounds and values "
            f"that {spec.dtype} can hold."
        ) from None


def _build_tensor(name: str, spec: TensorSpec, device: torch.device | str) -> torch.Tensor:
    dt = DTYPES[spec.dtype]
    shape = list(spec.shape or [])
    init = spec.init
    if init in ("zeros", "ones", "full", "empty"):  # the same values wherever they are made: made in place
        if init == "full":
            return torch.full(shape, spec.value if spec.value is not None else 0, dtype=dt.torch_dtype, device=device)
        if init == "empty":  # poisoned so that unwritten elements are visible
            return poison_(torch.empty(shape, dtype=dt.torch_dtype, device=device))
        return (torch.zeros if init == "zeros" else torch.ones)(shape, dtype=dt.torch_dtype, device=device)
    gen = torch.Generator().manual_seed(resolved_seed(name, spec))
    if isinstance(init, list):
        flat = flatten_values(init, [])
        base = torch.tensor(flat, dtype=torch.float64 if dt.is_float else torch.int64)
        t = base.reshape(shape).to(dt.torch_dtype)
    elif init == "randn":
        t = (torch.randn(shape, generator=gen) * spec.std + spec.mean).to(dt.torch_dtype)
    elif init == "rand":
        low, high = spec.low if spec.low is not None else 0.0, spec.high if spec.high is not None else 1.0
        t = (torch.rand(shape, generator=gen) * (high - low) + low).to(dt.torch_dtype)
    elif init == "randint":
        low_i = int(spec.low) if spec.low is not None else 0
        high_i = int(spec.high) if spec.high is not None else (2 if dt.torch_dtype == torch.bool else 10)
        if not -(2**63) <= low_i < high_i <= 2**63 - 1:
            raise ToolInputError(f"args[{name!r}]: randint needs -2**63 <= low < high <= 2**63-1 "
                                 f"(got low={low_i}, high={high_i}).")
        if high_i <= low_i:
            raise ToolInputError(f"args[{name!r}]: randint needs high > low (got low={low_i}, high={high_i}).")
        t = torch.randint(low_i, high_i, shape, generator=gen, dtype=torch.int64).to(dt.torch_dtype)
    else:  # "arange"
        start = spec.low or 0
        t = (torch.arange(math.prod(shape), dtype=torch.float64) + start).reshape(shape).to(dt.torch_dtype)
    return t.to(device)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill ``t`` in place with its dtype's poison pattern."""
    dt = _dtype_by_torch(t.dtype)
    if t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.view(dt.bits_view).fill_(dt.poison_bits)
    return t


def poison_mask(t: torch.Tensor) -> torch.Tensor:
    """Where ``t`` holds its dtype's poison pattern bit for bit (never written); all False for bool."""
    if t.dtype == torch.bool:
        return torch.zeros_like(t)
    dt = _dtype_by_torch(t.dtype)
    return t.view(dt.bits_view) == dt.poison_bits


def count_poison(t: torch.Tensor) -> int:
    """Elements of ``t`` still holding the poison pattern bit for bit (never written)."""
    return 0 if t.dtype == torch.bool else int(poison_mask(t).sum().item())


def poison_possible(dtype: torch.dtype, lo: float, hi: float) -> bool:
    """Whether an integer tensor whose values span [lo, hi] can hold its poison (the extreme value)."""
    if dtype == torch.bool:
        return False
    poison = _dtype_by_torch(dtype).poison_bits
    return lo <= poison <= hi


_BY_TORCH: dict[torch.dtype, DType] = {d.torch_dtype: d for d in DTYPES.values()}


def _dtype_by_torch(dtype: torch.dtype) -> DType:
    found = _BY_TORCH.get(dtype)
    if found is None:
        raise ToolInputError(f"unsupported dtype {dtype}")
    return found


def dtype_name(dtype: torch.dtype) -> str:
    return _dtype_by_torch(dtype).name
