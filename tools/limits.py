"""Limits on what one tool call may ask for, with defaults and environment overrides.

Every field is a plain number with a default chosen for a shared development machine. Each can
be set with an environment variable ``ANVIL_<FIELD NAME IN CAPITALS>`` (e.g.
``ANVIL_MAX_SOURCE_BYTES=65536``) or from the command line of ``anvil serve``. A request beyond
a limit is refused with a tool error that names the limit and its value, before any work
starts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

_ENV_PREFIX = "ANVIL_"


@dataclass(frozen=True)
class Limits:
    """Per-call limits of the tools. Field docs double as the documentation of the knobs."""

    max_source_bytes: int = 256 * 1024
    """Size of a kernel's source text."""
    max_tensor_elements: int = 1 << 26
    """Elements of one tensor argument (64 Mi)."""
    max_call_elements: int = 1 << 27
    """Elements of all tensor arguments of one call together."""
    max_call_bytes: int = 1 << 30
    """Bytes of all tensor arguments of one call together (inputs of every benchmark set count)."""
    max_explicit_values: int = 4096
    """Values of an explicit ``init`` list."""
    max_tensor_rank: int = 8
    """Dimensions of one tensor."""
    max_grid_programs: int = 1 << 22
    """Program instances of one launch (product of the grid)."""
    max_reference_chars: int = 2000
    """Characters of one reference or baseline expression."""
    max_reference_nodes: int = 400
    """Syntax nodes of one reference expression."""
    max_reference_depth: int = 40
    """Nesting depth of one reference expression."""
    max_reference_elements: int = 1 << 27
    """Elements of any intermediate tensor a reference or baseline expression creates (or a function's work space)."""
    max_reference_bytes: int = 1 << 30
    """Bytes of all intermediate tensors of one reference or baseline expression together (sized before it runs)."""
    compile_timeout_s: float = 120.0
    """Wall time of one compilation before its worker is stopped."""
    launch_timeout_s: float = 30.0
    """Wall time of one launch call (building inputs, the kernel, the checks)."""
    benchmark_time_s: float = 10.0
    """Measured time a benchmark may spend per config (warm-up plus repetitions)."""
    benchmark_timeout_s: float = 120.0
    """Wall time of one benchmark call before its worker is stopped."""
    max_benchmark_configs: int = 16
    """Configs of one benchmark call."""
    max_concurrent_calls: int = 32
    """Tool calls in flight at once; more are refused with a "busy" error."""
    max_kernels: int = 512
    """Compiled kernels kept in memory (least recently used are dropped)."""
    max_kernel_bytes: int = 1 << 30
    """Bytes of the kept kernels' source and artifacts (PTX, LLVM IR, ...) together; past it the least
    recently used are dropped."""
    artifact_page_lines: int = 200
    """Lines of an artifact returned per page unless the caller asks for fewer."""
    max_artifact_page_lines: int = 2000
    """Most lines of an artifact returned in one page."""
    spare_workers: int = 1
    """1: each device's worker keeps a second worker started, confined and warmed up beside it, which takes over
    at once when a kernel crashes or hangs the first (or a benchmark retires it); 0: a replacement starts then."""
    compile_workers: int = 2
    """Processes compiling in parallel (started on demand)."""
    max_client_compiles: int = 0
    """Compiles one client (MCP session) may run at once; 0: one fewer than compile_workers (at least 1), so
    that one client's slow compiles always leave a worker for the others."""
    worker_memory_bytes: int = 8 << 30
    """Data memory (RLIMIT_DATA: heap and private mappings) of the CPU launch/benchmark worker (0: none)."""
    compile_memory_bytes: int = 2 << 30
    """Data memory (RLIMIT_DATA) of each compile worker (0: none)."""
    gpu_worker_memory_bytes: int = 0
    """Data memory (RLIMIT_DATA) of a GPU worker (0: none, the default: the CUDA driver maps large private
    regions of host memory, so a limit must be measured on the machine before it is set)."""
    worker_sandbox: int = 1
    """1: workers confine themselves with seccomp and Landlock where the kernel has them; 0: only the scrubbed
    environment and the memory limits (for debugging a worker with tools that need ptrace)."""
    allow_inline_asm: int = 0
    """1: kernels may use tl.inline_asm_elementwise (GPU assembly addresses memory the launch checks cannot
    see, so it can read or change other data of the GPU worker); 0: such kernels are refused at compile."""
    max_quantize_bytes: int = 16 << 30
    """Size of the .safetensors file one quantize_weights call may read (it is loaded into memory whole)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Limits:
        """Defaults, then ``ANVIL_*`` variables, then explicit ``overrides``."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(_ENV_PREFIX + f.name.upper())
            if raw is None:
                continue
            caster = float if f.type in ("float", float) else int
            try:
                values[f.name] = caster(raw)
            except ValueError as exc:
                raise ValueError(f"{_ENV_PREFIX}{f.name.upper()}={raw!r} is not a number") from exc
        values.update({k: v for k, v in overrides.items() if v is not None})
        return dataclasses.replace(cls(), **values)

    def to_dict(self) -> dict[str, Any]:
        """Plain values, for sending to worker processes and for ``device_info``."""
        return dataclasses.asdict(self)
