"""Finding and running ptxas (PTX -> cubin), and reading its resource report.

Search order for ptxas: $ANVIL_PTXAS, $CUDA_HOME/bin, `ptxas` on PATH, /usr/local/cuda*/bin,
the ptxas bundled with the `triton` package, the `nvidia-cuda-nvcc` wheel.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ...errors import AnvilError

__all__ = ["find_ptxas", "assemble", "PtxasReport", "PtxasError"]


class PtxasError(AnvilError):
    """ptxas rejected the PTX (a compiler bug, or a resource limit)."""


@dataclass(frozen=True)
class PtxasReport:
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int


@cache
def find_ptxas() -> str | None:
    cands: list[str] = []
    if os.environ.get("ANVIL_PTXAS"):
        cands.append(os.environ["ANVIL_PTXAS"])
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            cands.append(os.path.join(os.environ[var], "bin", "ptxas"))
    which = shutil.which("ptxas")
    if which:
        cands.append(which)
    cands += sorted(glob.glob("/usr/local/cuda*/bin/ptxas"), reverse=True)
    try:
        import triton

        cands.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"))
    except Exception:  # noqa: BLE001 - triton is optional
        pass
    try:
        import nvidia.cuda_nvcc as nvcc  # type: ignore[import-not-found]

        cands.append(str(Path(list(nvcc.__path__)[0]) / "bin" / "ptxas"))
    except Exception:  # noqa: BLE001 - the wheel is optional
        pass
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


_RE = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "shared_bytes": re.compile(r"(\d+) bytes smem"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
}


def assemble(ptx: str, arch: str, opt_level: int = 3) -> tuple[bytes, PtxasReport]:
    """PTX -> cubin for `arch` (e.g. 'sm_90a'), with ptxas's resource report."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise PtxasError("ptxas not found: install the CUDA toolkit (or `pip install nvidia-cuda-nvcc`) "
                         "or set ANVIL_PTXAS to its path")
    with tempfile.TemporaryDirectory(prefix="anvil-ptx-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        Path(src).write_text(ptx)
        proc = subprocess.run([ptxas, f"-arch={arch}", "-v", f"-O{opt_level}", src, "-o", out],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise PtxasError(f"ptxas failed for {arch}:\n{proc.stderr.strip()}")
        log = proc.stdout + proc.stderr
        vals = {k: int(m.group(1)) if (m := r.search(log)) else 0 for k, r in _RE.items()}
        return Path(out).read_bytes(), PtxasReport(**vals)
