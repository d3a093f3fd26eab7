"""Anvil kernels inside torch programs: `op` registers a function that launches Anvil kernels as a
torch custom operator, for torch.compile(fullgraph=True), CUDA graphs and autograd.

    from compiler.torch import op

`torch.compile(model, backend="anvil")` fuses a model's elementwise work and row reductions into
Anvil kernels (backend.py); `fusion_dump(dir)` writes the kernels it generates there.
"""

from .ops import op
from .runner import fusion_dump

__all__ = ["op", "fusion_dump"]
