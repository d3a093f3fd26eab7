"""`triton.runtime`: the driver, JIT and autotuner classes and runtime errors, Anvil-backed."""

from __future__ import annotations

from ...runtime.autotune import Autotuner, Config, Heuristics
from ..errors import InterpreterError, OutOfResources
from . import driver as _driver_module
from .jit import JITFunction, KernelInterface, MockTensor, TensorWrapper, reinterpret

driver = _driver_module.driver

__all__ = ["driver", "Autotuner", "Config", "Heuristics", "JITFunction", "KernelInterface", "MockTensor",
           "TensorWrapper", "reinterpret", "InterpreterError", "OutOfResources"]
