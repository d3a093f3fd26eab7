"""`triton.tools.tensor_descriptor.TensorDescriptor`: a host-side description of a tiled tensor.

Kernels receive it as one argument; it names the tensor, its shape and strides, and the block
a load or store through it moves. The checks are Triton's (they hold for TMA on GPUs too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["TensorDescriptor"]


def _validate_block_shape(block_shape: list[int]) -> None:
    numel = 1
    for i, d in enumerate(block_shape):
        if d <= 0 or d & (d - 1):
            raise ValueError(f"Shape element {i} must be a power of 2, got {d}")
        numel *= d
    if numel > 1 << 20:
        raise ValueError(f"numel ({numel}) exceeds triton maximum tensor numel ({1 << 20})")


@dataclass
class TensorDescriptor:
    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"

    def __post_init__(self) -> None:
        rank = len(self.shape)
        assert len(self.strides) == rank, f"rank mismatch: {self}"
        assert len(self.block_shape) == rank, f"rank mismatch: {self}"
        assert rank > 0, "rank must not be zero"
        assert rank <= 5, "rank cannot be more than 5"
        assert self.base.data_ptr() % 16 == 0, "base must be 16-byte aligned"
        _validate_block_shape(list(self.block_shape))
        elem_bytes = self.base.element_size()
        for stride in list(self.strides)[:-1]:
            assert (stride * elem_bytes) % 16 == 0, "strides must be 16-byte aligned"
        for shape_dim in self.shape:
            assert shape_dim > 0, "shape must be positive"
        assert self.strides[-1] == 1, "Last dimension must be contiguous"
        assert self.padding in ("zero", "nan"), "Illegal value for padding"
        if self.padding == "nan":
            assert self.base.dtype.is_floating_point, \
                "Padding option `nan` is only supported for floating point tensors"

    @staticmethod
    def from_tensor(tensor: Any, block_shape: list[int], padding: str = "zero") -> TensorDescriptor:
        return TensorDescriptor(tensor, list(tensor.shape), list(tensor.stride()), list(block_shape), padding)

    # How Anvil's launcher passes a descriptor: the compile-time part as the specialization key,
    # the rest as int64 words [base address, shape..., strides...] in the tensor's memory.
    @property
    def __anvil_descriptor__(self) -> tuple[Any, tuple[int, ...], str]:
        return self.base.dtype, tuple(int(b) for b in self.block_shape), self.padding

    def __anvil_packed__(self) -> Any:
        words = [self.base.data_ptr(), *(int(d) for d in self.shape), *(int(s) for s in self.strides)]
        packed = torch.tensor(words, dtype=torch.int64, device=self.base.device)
        packed._anvil_described = self.base  # type: ignore[attr-defined]  # checked launches bound its accesses
        return packed

    @property
    def device(self) -> Any:
        return self.base.device

    def data_ptr(self) -> int:
        return int(self.base.data_ptr())
