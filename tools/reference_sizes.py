"""How big a reference expression's work is, known before anything real is computed.

:func:`tools.reference.evaluate` first runs the whole expression on torch's meta device: tensors
there carry shapes, dtypes and strides but no data, so every intermediate result's size is known
for the cost of a few Python calls. This module holds what that pass needs: meta copies of the
arguments, the byte budget of all intermediates together, the work space some functions take
beyond their result (a broadcast matmul's expanded operands, attention's score matrix, a
convolution's unfolded input), cheap bounds of the elements a size-taking call would create,
and the test for errors that mean "this size depends on tensor values".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict

import torch


class SizeLimits(TypedDict):
    """The limits of the sizing pass, as keyword arguments of evaluate and check_sizes."""

    max_elements: int
    max_bytes: int


# torch functions that create a tensor from sizes alone: on the meta pass they are told device="meta".
CREATION_FUNCTIONS = frozenset({"zeros", "ones", "full", "eye", "arange", "linspace"})
SIZE_METHODS = frozenset({"repeat", "tile", "expand"})

DATA_DEPENDENT_HINT = (
    "Sizes, counts and Python numbers must be plain numbers (literals, scalar arguments, x.shape, "
    "x.numel()), not computed from tensor values; e.g. write x / x.sum() instead of x / float(x.sum())."
)

# Fragments of torch's messages when a meta tensor would need its values.
_DATA_DEPENDENT_MARKERS = (
    "item() cannot be called on meta",
    "without output_size",
    "data-dependent",
    "data dependent",
    "nonzero",
    "cannot be called on meta tensors",
)


def is_data_dependent(exc: BaseException) -> bool:
    """Whether a failure on the meta device came from needing tensor values (a data-dependent size)."""
    text = str(exc)
    return any(marker in text for marker in _DATA_DEPENDENT_MARKERS)


def to_meta(env: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with every tensor replaced by a data-less meta tensor of the same shape, dtype, strides."""
    return {
        name: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta")
        if isinstance(v, torch.Tensor)
        else v
        for name, v in env.items()
    }


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """The tensors of a result: itself, or the members of a tuple or list (sort, topk, chunk, max(dim))."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


class ByteBudget:
    """Bytes of the tensors an expression allocates, summed over all its intermediates.

    A result that is an argument or an earlier result (``x.float()`` of a float ``x``) or a view of
    one (slices, transposes, ``expand``) allocates nothing and is not counted.
    """

    def __init__(self, limit: int, env: Mapping[str, Any]) -> None:
        self.limit = limit
        self.used = 0
        self._seen: dict[int, torch.Tensor] = {id(v): v for v in env.values() if isinstance(v, torch.Tensor)}

    def add(self, value: Any) -> int | None:
        """Count ``value``'s new tensors; return the total if it is now over the limit, else None."""
        for tensor in tensors_in(value):
            if id(tensor) in self._seen:
                continue
            self._seen[id(tensor)] = tensor  # kept alive so that its id is not reused
            if tensor._base is not None:  # a view: shares its base's storage
                continue
            self.used += tensor.numel() * tensor.element_size()
        return self.used if self.used > self.limit else None


def ints(values: list[Any]) -> list[int]:
    flat: list[Any] = []
    for v in values:
        flat.extend(v if isinstance(v, tuple | list | torch.Size) else [v])
    return [int(v) for v in flat if isinstance(v, int) and not isinstance(v, bool)]


def creation_elements(name: str, args: list[Any], kwargs: dict[str, Any]) -> float:
    """Upper bound of the elements a size-taking torch function would create (positional or keyword sizes)."""
    if name == "arange":
        nums = [kwargs.get(k) for k in ("start", "end", "step")]
        positional = [a for a in args if isinstance(a, int | float) and not isinstance(a, bool)]
        if len(positional) == 1:
            nums[1] = positional[0]
        else:
            nums[: len(positional)] = positional[:3]
        start, end, step = (v if isinstance(v, int | float) and not isinstance(v, bool) else None for v in nums)
        if end is None:
            return 0
        return abs(float(end) - float(start or 0)) / (abs(float(step)) if step else 1.0)
    if name == "linspace":
        steps = kwargs.get("steps", args[2] if len(args) > 2 else 0)
        return float(steps) if isinstance(steps, int | float) else 0
    if name == "eye":
        n = kwargs.get("n", args[0] if args else 0)
        m = kwargs.get("m", args[1] if len(args) > 1 else n)
        dims = ints([n, m])
        return float(math.prod(max(d, 0) for d in dims)) if dims else 0
    sizes = args[:1] if name == "full" else args
    size_kw = kwargs.get("size")
    dims = ints([size_kw] if size_kw is not None else sizes)
    return float(math.prod(max(d, 0) for d in dims))


def repeat_elements(method: str, tensor: torch.Tensor, args: list[Any]) -> float:
    dims = ints(args)
    if method in ("repeat", "tile"):
        return float(tensor.numel()) * float(math.prod(max(d, 1) for d in dims))
    return float(math.prod(max(d, 1) for d in dims))


def workspace_elements(name: str, args: list[Any], kwargs: dict[str, Any]) -> float:
    """Elements a function allocates inside itself beyond its result (0 when nothing notable).

    Arguments are meta tensors. Covered: matmul whose batch dimensions broadcast (torch copies
    each operand out to the full batch), attention (the query-by-key score matrix), convolution
    (the unfolded input of the im2col path) and einsum (its pairwise contractions left to right).
    """
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ("matmul", "@") and len(tensors) >= 2:
        a, b = tensors[0], tensors[1]
        if a.dim() >= 3 or b.dim() >= 3:
            batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.dim() >= 2 and b.dim() >= 2 else ()
            size = math.prod(batch)
            return float(size * (math.prod(a.shape[-2:]) + math.prod(b.shape[-2:])))
        return 0
    if name == "scaled_dot_product_attention":
        q = tensors[0] if tensors else kwargs.get("query")
        k = tensors[1] if len(tensors) > 1 else kwargs.get("key")
        if isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and q.dim() >= 2 and k.dim() >= 2:
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
            return float(math.prod(batch)) * q.shape[-2] * k.shape[-2] * 2  # scores and their softmax
        return 0
    if name in ("conv1d", "conv2d"):
        x = tensors[0] if tensors else kwargs.get("input")
        w = tensors[1] if len(tensors) > 1 else kwargs.get("weight")
        if isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor) and w.dim() >= 3:
            spatial = w.dim() - 2
            out_positions = math.prod(max(int(s), 1) for s in x.shape[-spatial:])
            batch = x.shape[0] if x.dim() == w.dim() else 1
            return float(batch) * math.prod(w.shape[1:]) * out_positions
        return 0
    if name == "einsum" and args and isinstance(args[0], str):
        return _einsum_elements(args[0], tensors)
    return 0


def _einsum_elements(equation: str, operands: list[torch.Tensor]) -> float:
    """Largest pairwise intermediate of an einsum contracted left to right (its work space, roughly)."""
    spec = equation.replace(" ", "")
    if "..." in spec or "->" not in spec:
        return 0  # torch sizes these itself; the result is still checked
    inputs, output = spec.split("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        return 0
    sizes: dict[str, int] = {}
    for term, op in zip(terms, operands, strict=True):
        if len(term) != op.dim():
            return 0
        for letter, n in zip(term, op.shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), int(n))
    largest = 0.0
    held: set[str] = set()
    for i, term in enumerate(terms):
        held |= set(term)
        held &= set(output).union(*terms[i + 1 :])  # letters no later operand or the output needs are summed out
        if i > 0:  # the result of contracting the operands so far with this one
            largest = max(largest, float(math.prod(sizes[c] for c in held)))
    return largest
