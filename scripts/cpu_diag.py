"""Diagnose the CPU backend on a machine: host CPU as LLVM sees it, and a few launches."""

import faulthandler
import sys

import torch

faulthandler.enable()
if "--cuda" in sys.argv:
    sys.argv.remove("--cuda")
    torch.cuda.init()
    torch.zeros(1, device="cuda")
if "--triton" in sys.argv:
    sys.argv.remove("--triton")
    import triton  # noqa: F401
import llvmlite.binding as llvm  # noqa: E402

import compiler.language as tl  # noqa: E402
from compiler import cdiv, jit  # noqa: E402
from compiler.backends.cpu.engine import host  # noqa: E402

llvm.initialize_native_target()
print("host", llvm.get_host_cpu_name(), "using", host().cpu, host().features[:200], flush=True)


@jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


for n in (int(a) for a in sys.argv[1:] or ["1", "1000", "4096", "100003"]):
    x, y = torch.randn(n), torch.randn(n)
    o = torch.empty(n)
    print("n", n, flush=True)
    add[(cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    print("  ok", bool(torch.equal(o, x + y)), flush=True)
