"""torch's compiler stack beside the `triton` stand-in: torch keeps the real triton (or none).

Each case runs in a fresh interpreter: install() and torch's cached probes are process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A finder that hides any real triton, as on a machine without it.
NO_TRITON = """
import importlib.abc, sys
class _NoTriton(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoTriton())
"""

KERNEL = '''
import triton
import triton.language as tl

@triton.jit
def affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)

@torch.compiler.disable
def eager_only(x):
    return x + 1
'''


def _run(tmp_path: Path, body: str, *, hide_triton: bool = False) -> str:
    """Run `body` after install(), with a user module (`userlib`) that imports triton at import time."""
    (tmp_path / "userlib.py").write_text("import torch\n" + KERNEL)
    script = (NO_TRITON if hide_triton else "") + textwrap.dedent("""
        import compiler.triton_compat as tc
        tc.install()
        import torch
        import userlib
    """) + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "ind"))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_torch_dynamo_imports_and_user_code_binds_the_stand_in(tmp_path: Path) -> None:
    out = _run(tmp_path, """
        import torch._dynamo, torch._inductor  # the probes torch makes at import see the real triton
        from torch.utils._triton import has_triton_package
        import triton
        assert triton.__version__.endswith("+anvil"), triton.__version__
        assert userlib.triton is triton and type(userlib.affine).__module__.startswith("compiler.")
        assert userlib.eager_only(torch.ones(2)).tolist() == [2.0, 2.0]
        print("torch sees triton:", has_triton_package())
    """)
    assert "torch sees triton: True" in out  # the real package is a dev dependency


def test_torch_sees_no_triton_where_none_is_installed(tmp_path: Path) -> None:
    out = _run(tmp_path, """
        import torch._dynamo
        from torch.utils._triton import has_triton, has_triton_package
        import triton  # the user still gets the stand-in
        assert triton.__version__.endswith("+anvil")
        print("torch sees triton:", has_triton_package(), has_triton())
    """, hide_triton=True)
    assert "torch sees triton: False False" in out


@pytest.mark.parametrize("hide_triton", [False, True], ids=["real-triton", "no-triton"])
def test_default_backend_and_anvil_launches_under_torch_compile(tmp_path: Path, hide_triton: bool) -> None:
    """inductor (C++ on the CPU) still compiles; an Anvil launch inside the compiled function is one clean
    graph break and runs eagerly."""
    _run(tmp_path, """
        import torch._dynamo

        def f(x):
            y = torch.empty_like(x)
            userlib.affine[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
            return torch.sin(y) + x

        import triton
        for n in (100, 1000):
            x = torch.randn(n)
            want = torch.sin(x * 2 + 1) + x
            torch.testing.assert_close(torch.compile(f, backend="aot_eager")(x), want)
            explained = torch._dynamo.explain(f)(x)
            assert explained.graph_break_count == 1, explained.break_reasons
            assert "compiler.torch.op" in str(explained.break_reasons[0].reason)
        g = torch.compile(lambda x: torch.nn.functional.gelu(x) * 2)  # the default backend, inductor
        x = torch.randn(333)
        torch.testing.assert_close(g(x), torch.nn.functional.gelu(x) * 2)
    """, hide_triton=hide_triton)


def test_uninstall_gives_back_the_real_triton(tmp_path: Path) -> None:
    out = _run(tmp_path, """
        import builtins
        import torch._dynamo
        tc.uninstall()
        assert builtins.__import__.__module__ == "builtins"
        import triton
        print("after:", triton.__version__)
    """)
    assert "after: 3.6" in out and "+anvil" not in out.split("after:")[1]


@pytest.mark.gpu
def test_default_backend_on_cuda_after_install(tmp_path: Path) -> None:
    """inductor generates and compiles Triton kernels with the real triton while user code has the stand-in."""
    _run(tmp_path, """
        import torch._dynamo
        import triton
        assert triton.__version__.endswith("+anvil")
        x = torch.randn(4099, device="cuda")
        f = torch.compile(lambda x: torch.nn.functional.gelu(x) * torch.sigmoid(x) + 1)
        torch.testing.assert_close(f(x), torch.nn.functional.gelu(x) * torch.sigmoid(x) + 1)
        y = torch.empty_like(x)
        userlib.affine[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)  # Anvil's NVIDIA backend
        torch.testing.assert_close(y, x * 2 + 1)
        g = torch.compile(lambda x: userlib.eager_only(torch.cos(x)) * 2)
        torch.testing.assert_close(g(x), (torch.cos(x) + 1) * 2)
    """)


# A `triton_op` around stand-in kernels (plain and autotuned), called eagerly and under torch.compile.
TRITON_OP = """
import torch._dynamo
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton

tuned = triton.autotune([triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 128})], key=["n"])(
    userlib.affine)

@triton_op("anviltest::affine", mutates_args={})
def affine(x: torch.Tensor, tune: bool) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    if tune:
        wrap_triton(tuned)[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
    else:
        wrap_triton(userlib.affine)[(triton.cdiv(n, 64),)](x, y, n, BLOCK=64)
    return y

def f(x, tune):
    return torch.sin(affine(x, tune)) + x

from compiler.torch.backend import anvil as anvil_backend

for n in (100, 1000):
    x = torch.randn(n, device=DEV)
    want = torch.sin(x * 2 + 1) + x
    for tune in (False, True):
        torch.testing.assert_close(f(x, tune), want)
        # the backend itself, not its registered name: the name needs the package installed (its entry
        # point, tested in test_backend.py), and this runs where the tree may only be on PYTHONPATH
        for backend in ("aot_eager", anvil_backend):
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(f, backend=backend, fullgraph=True)(x, tune), want)
assert torch._dynamo.explain(f)(torch.randn(100, device=DEV), True).graph_break_count == 0
"""


@pytest.mark.parametrize("hide_triton", [False, True], ids=["real-triton", "no-triton"])
def test_triton_op_wraps_the_stand_ins_kernels(tmp_path: Path, hide_triton: bool) -> None:
    """`torch.library.triton_op` + `wrap_triton` around a stand-in kernel: eager launches it through Anvil;
    traced (aot_eager, the anvil backend), it is one graph with no break."""
    _run(tmp_path, 'DEV = "cpu"\n' + TRITON_OP, hide_triton=hide_triton)


@pytest.mark.gpu
def test_triton_op_wraps_the_stand_ins_kernels_on_cuda(tmp_path: Path) -> None:
    _run(tmp_path, 'DEV = "cuda"\n' + TRITON_OP)
