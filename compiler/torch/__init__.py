"""Anvil kernels inside torch programs: `op` registers a function that launches Anvil kernels as a
torch custom operator, for torch.compile(fullgraph=True), CUDA graphs and autograd.

    from compiler.torch import op
"""

from .ops import op

__all__ = ["op"]
