"""generate_kernel: a fused kernel from a torch expression in the reference language (tool.py)."""

from tools.generate.models import GeneratedLaunch, GenerateRequest, GenerateResult
from tools.generate.tool import generate_kernel

__all__ = ["generate_kernel", "GenerateRequest", "GenerateResult", "GeneratedLaunch"]
