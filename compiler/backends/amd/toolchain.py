"""Linking the object file LLVM emits into an HSA code object (a shared ELF): `ld.lld -shared`.

Search order for the linker: $ANVIL_LD_LLD, ROCm's ($ROCM_PATH/llvm/bin, /opt/rocm/llvm/bin,
/opt/rocm-*/llvm/bin), `ld.lld` on PATH, then the `ziglang` package, whose `python -m ziglang
ld.lld` is LLVM's lld with every target (`pip install anvil[amd]` installs it).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

from ... import knobs
from ...errors import AnvilError

__all__ = ["find_linker", "link", "LinkerNotFoundError", "LinkError", "INSTALL_HINT"]

INSTALL_HINT = ("install ROCm (its ld.lld is in /opt/rocm/llvm/bin), an LLVM ld.lld on PATH, or the ziglang "
                "package (`pip install 'anvil[amd]'`), or set ANVIL_LD_LLD to an ld.lld")


class LinkerNotFoundError(AnvilError):
    """No ld.lld to link an AMD code object with (or none this process may start)."""


class LinkError(AnvilError):
    """ld.lld rejected the object file (a compiler bug)."""


def _candidates() -> list[str]:
    out = [knobs.ld_lld()]
    for root in (os.environ.get("ROCM_PATH", ""), "/opt/rocm"):
        if root:
            out.append(os.path.join(root, "llvm", "bin", "ld.lld"))
    out += sorted(glob.glob("/opt/rocm-*/llvm/bin/ld.lld"), reverse=True)
    out.append(shutil.which("ld.lld") or "")
    return out


@cache
def find_linker() -> tuple[str, ...] | None:
    """The command that runs ld.lld (a path, or the ziglang package's entry), or None."""
    for c in _candidates():
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return (c,)
    if importlib.util.find_spec("ziglang") is not None:
        return (sys.executable, "-m", "ziglang", "ld.lld")
    return None


def link(obj: bytes, arch: str) -> bytes:
    """The code object (`ld.lld -shared`) of the relocatable object `obj` for `arch`."""
    cmd = find_linker()
    if cmd is None:
        raise LinkerNotFoundError(f"no ld.lld to link the amd:{arch} code object: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="anvil-amd-") as d:
        src, out = os.path.join(d, "k.o"), os.path.join(d, "k.hsaco")
        Path(src).write_bytes(obj)
        try:
            proc = subprocess.run([*cmd, "-shared", src, "-o", out], capture_output=True, text=True, timeout=120)
        except OSError as e:  # a sandboxed worker may not start processes
            raise LinkerNotFoundError(f"could not run {cmd[0]} to link the amd:{arch} code object ({e})") from None
        if proc.returncode != 0:
            raise LinkError(f"ld.lld failed for amd:{arch}:\n{(proc.stderr or proc.stdout).strip()}")
        return Path(out).read_bytes()
