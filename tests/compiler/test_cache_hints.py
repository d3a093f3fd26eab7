"""tl.load / tl.store cache hints (cache_modifier, eviction_policy) do on NVIDIA what Triton's do:
the modifier or policy is on the sm_90a (and sm_80) instruction, which keeps its 16-byte vectors and
its masks, and ptxas assembles it; plain accesses are unchanged. On the CPU they change no result.
Strings Triton does not accept are errors that say what to write. The GPU run:
tests/gpu/test_gpu_cache_hints.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from compiler import errors as E
from compiler.backends.nvidia.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_hint_kernels import block_copy, copy, scale  # noqa: E402
from test_errors import expect  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

NO_HINTS = {"LOAD_CM": "", "LOAD_EV": "", "STORE_CM": "", "STORE_EV": ""}


def copy_ptx(masked: bool, arch: str = "sm_90a", dtype: str = "fp32", block: int = 1024, volatile: bool = False,
             **hints: str) -> str:
    """The PTX of `copy` (n a multiple of 16, so masked accesses keep their vectors), assembled."""
    sig = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n": "i32:16"}
    ck = copy.compile(sig, {"BLOCK": block, "MASKED": masked, "VOLATILE": volatile, **NO_HINTS, **hints},
                      target=f"cuda:{arch}", num_warps=4)
    assert "cubin" in ck.asm  # type: ignore[attr-defined]  # ptxas accepted it
    return str(ck.asm["ptx"])  # type: ignore[attr-defined]


def accesses(ptx: str, kind: str) -> list[str]:
    """The opcodes of the global loads (`kind` "ld") or stores ("st"), in order."""
    return re.findall(rf"\b{kind}(?:\.volatile)?\.global[\w.:]*", ptx)


def policies(ptx: str) -> list[str]:
    return re.findall(r"createpolicy\.fractional\.L2::\w+\.b64 %rd\d+, 1\.0;", ptx)


def without_name(ptx: str) -> str:
    return re.sub(r"\banvil_copy_\w+", "anvil_copy", ptx)


# ------------------------------------------------------------------ PTX (sm_90a)
@needs_ptxas
@pytest.mark.parametrize("masked", [False, True])
def test_cg_load_keeps_16_byte_vectors(masked: bool) -> None:
    ptx = copy_ptx(masked, LOAD_CM=".cg")
    assert accesses(ptx, "ld") == ["ld.global.cg.v4.b32"] * 2
    assert accesses(ptx, "st") == ["st.global.v4.b32"] * 2
    # the load is predicated (a constant-true predicate without a mask), the store stays as it was
    assert len(re.findall(r"@%p\d+ ld\.global\.cg\.v4\.b32", ptx)) == 2
    assert ("@%p" in ptx.split("st.global")[0].splitlines()[-1]) == masked


@needs_ptxas
@pytest.mark.parametrize("masked", [False, True])
def test_plain_accesses_are_unchanged(masked: bool) -> None:
    """No hint, and the default hints ('.ca' loads, '.wb' stores), give the very same PTX: unmasked,
    LLVM's vector loads and stores, no predicate and no policy."""
    plain = copy_ptx(masked)
    assert accesses(plain, "ld") == ["ld.global.v4.b32"] * 2 and accesses(plain, "st") == ["st.global.v4.b32"] * 2
    assert "createpolicy" not in plain and "cache_hint" not in plain
    if not masked:
        assert "@%p" not in plain and "ld.global.v4.b32 \t{" in plain
    assert without_name(copy_ptx(masked, LOAD_CM=".ca", STORE_CM=".wb")) == without_name(plain)


@needs_ptxas
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("load_ev,store_ev", [("evict_first", "evict_last"), ("evict_last", "evict_first")])
def test_eviction_policy(masked: bool, load_ev: str, store_ev: str) -> None:
    """An L1 eviction priority and an L2 policy register (one per load or store, however many
    vectors it moves: 2048 floats are 4 vectors per thread here)."""
    ptx = copy_ptx(masked, block=2048, LOAD_EV=load_ev, STORE_EV=store_ev)
    assert accesses(ptx, "ld") == [f"ld.global.L1::{load_ev}.L2::cache_hint.v4.b32"] * 4
    assert accesses(ptx, "st") == [f"st.global.L1::{store_ev}.L2::cache_hint.v4.b32"] * 4
    pols = policies(ptx)
    assert len(pols) == 2 and {p.split(".")[2].split(" ")[0] for p in pols} == {f"L2::{load_ev}", f"L2::{store_ev}"}
    for ev in (load_ev, store_ev):  # each access passes its op's policy register
        reg = re.search(rf"createpolicy\.fractional\.L2::{ev}\.b64 (%rd\d+)", ptx).group(1)  # type: ignore[union-attr]
        assert len(re.findall(rf"\.L1::{ev}\.L2::cache_hint\.v4\.b32 .*, {reg};", ptx)) == 4


@needs_ptxas
@pytest.mark.parametrize("store_cm", [".cg", ".cs", ".wt"])
@pytest.mark.parametrize("masked", [False, True])
def test_store_cache_modifiers(masked: bool, store_cm: str) -> None:
    ptx = copy_ptx(masked, STORE_CM=store_cm)
    assert accesses(ptx, "st") == [f"st.global{store_cm}.v4.b32"] * 2
    assert accesses(ptx, "ld") == ["ld.global.v4.b32"] * 2


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("masked", [False, True])
def test_cache_operator_with_a_policy(masked: bool, arch: str) -> None:
    """PTX has no L1 eviction priority next to a cache operator (ptxas: "cannot be combined"): the
    policy goes to L2 only."""
    ptx = copy_ptx(masked, arch, LOAD_CM=".cg", LOAD_EV="evict_last", STORE_CM=".cs", STORE_EV="evict_first")
    assert accesses(ptx, "ld") == ["ld.global.cg.L2::cache_hint.v4.b32"] * 2
    assert accesses(ptx, "st") == ["st.global.cs.L2::cache_hint.v4.b32"] * 2
    assert "L1::" not in ptx and len(policies(ptx)) == 2


@needs_ptxas
def test_sm80_takes_the_same_hints() -> None:
    ptx = copy_ptx(True, "sm_80", LOAD_EV="evict_first", STORE_CM=".wt")
    assert accesses(ptx, "ld") == ["ld.global.L1::evict_first.L2::cache_hint.v4.b32"] * 2
    assert accesses(ptx, "st") == ["st.global.wt.v4.b32"] * 2


@needs_ptxas
@pytest.mark.parametrize("how", [{"volatile": True, "LOAD_EV": "evict_first"},
                                 {"LOAD_CM": ".cv", "LOAD_EV": "evict_last"}])
def test_volatile_load_takes_no_other_hint(how: dict[str, Any]) -> None:
    ptx = copy_ptx(False, **how)
    assert accesses(ptx, "ld") == ["ld.volatile.global.v4.b32"] * 2
    assert "cache_hint" not in ptx and "createpolicy" not in ptx and "L1::" not in ptx


@needs_ptxas
@pytest.mark.parametrize("dtype,width", [("fp16", "b32"), ("i8", "b16"), ("i64", "v4.b32")])
def test_every_access_of_other_types(dtype: str, width: str) -> None:
    """Narrow and wide elements, vectors and scalars, masked and not: every access has its hint."""
    sig = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "n_in": "i32", "n_out": "i32"}
    hints = {"LOAD_CM": ".cg", "LOAD_EV": "", "STORE_CM": "", "STORE_EV": "evict_first"}
    ck = scale.compile(sig, {"BLOCK": 256, **hints}, target="cuda:sm_90a", num_warps=4)
    assert "cubin" in ck.asm  # type: ignore[attr-defined]
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    loads, stores = accesses(ptx, "ld"), accesses(ptx, "st")
    assert loads and all(o.startswith("ld.global.cg.") for o in loads), loads
    assert stores and all(o.startswith("st.global.L1::evict_first.L2::cache_hint.") for o in stores), stores
    assert f"ld.global.cg.{width}" in loads  # the unmasked blocks keep their vectors
    assert len(policies(ptx)) <= 3  # one per store op (LLVM may share them)


@needs_ptxas
def test_block_pointers_pass_their_hints() -> None:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride_xm": "i32", "stride_ym": "i32"}
    hints = {"LOAD_CM": ".cg", "LOAD_EV": "", "STORE_CM": ".cs", "STORE_EV": ""}
    ck = block_copy.compile(sig, {"BM": 32, "BN": 32, **hints}, target="cuda:sm_90a", num_warps=4)
    assert "cubin" in ck.asm  # type: ignore[attr-defined]
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    loads, stores = accesses(ptx, "ld"), accesses(ptx, "st")
    assert loads and all(o.startswith("ld.global.cg.") for o in loads), loads
    assert stores and all(o.startswith("st.global.cs.") for o in stores), stores


# ------------------------------------------------------------------ results
HINTS = [
    {"LOAD_CM": ".cg", "LOAD_EV": "", "STORE_CM": ".cs", "STORE_EV": ""},
    {"LOAD_CM": ".ca", "LOAD_EV": "evict_first", "STORE_CM": ".wt", "STORE_EV": "evict_last"},
    {"LOAD_CM": "", "LOAD_EV": "evict_last", "STORE_CM": ".cg", "STORE_EV": "evict_first"},
    {"LOAD_CM": ".cv", "LOAD_EV": "", "STORE_CM": ".wb", "STORE_EV": ""},
]
DTYPES = [torch.float32, torch.float16, torch.int8, torch.int64]


def poison(dtype: torch.dtype) -> float:
    return float("nan") if dtype.is_floating_point else 99


def run_scale(device: str, dtype: torch.dtype, hints: dict[str, str], n_in: int, n_out: int,
              block: int = 256) -> None:
    """scale (cache_hint_kernels.py) on `device` against torch, output poisoned beforehand."""
    g = torch.Generator().manual_seed(n_in * 7 + n_out)
    x = (torch.randn(n_in, generator=g) * 20).to(dtype) if dtype.is_floating_point else \
        torch.randint(-100, 100, (n_in,), generator=g, dtype=dtype)
    grid = (n_out + block - 1) // block
    y = torch.full((n_out + grid,), poison(dtype), dtype=dtype)
    x, y = x.to(device), y.to(device)
    scale[(grid,)](x, y, n_in, n_out, BLOCK=block, **hints)
    want = torch.full((n_out + grid,), -7, dtype=dtype)
    want[:n_in] = x.cpu() * 2 + 1
    want[n_out:] = x.cpu()[torch.clamp(torch.arange(grid) * block, max=n_in - 1)]
    torch.testing.assert_close(y.cpu(), want, rtol=0, atol=0, equal_nan=False)


def run_block_copy(device: str, hints: dict[str, str], m: int, n: int) -> None:
    g = torch.Generator().manual_seed(m * n)
    x = torch.randn(m, n + 3, generator=g)[:, :n]  # strided rows
    y = torch.full((m, n + 5), float("nan"))[:, :n]
    x, y = x.to(device), y.to(device)
    block_copy[((m + 31) // 32, (n + 15) // 16)](x, y, m, n, x.stride(0), y.stride(0), BM=32, BN=16, **hints)
    torch.testing.assert_close(y.cpu(), x.cpu() + 1, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hints", HINTS)
@pytest.mark.parametrize("n_in,n_out", [(1000, 1000), (777, 1000)])
def test_results_on_the_cpu(dtype: torch.dtype, hints: dict[str, str], n_in: int, n_out: int) -> None:
    run_scale("cpu", dtype, hints, n_in, n_out)


@pytest.mark.parametrize("hints", HINTS[:3])
def test_block_pointers_on_the_cpu(hints: dict[str, str]) -> None:
    run_block_copy("cpu", hints, 70, 45)


# ------------------------------------------------------------------ errors
LOAD = """
    @triton.jit
    def k(x_ptr, n):
        offs = tl.arange(0, 16)
        x = tl.load(x_ptr + offs, mask=offs < n, {arg})
        tl.store(x_ptr + offs, x + 1, mask=offs < n)
    """
STORE = """
    @triton.jit
    def k(x_ptr, n):
        offs = tl.arange(0, 16)
        tl.store(x_ptr + offs, 1.0, mask=offs < n, {arg})
    """
BLOCK_PTR = """
    @triton.jit
    def k(x_ptr, n):
        p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))
        tl.store(p, tl.load(p, boundary_check=(0,)), {arg})
    """


@pytest.mark.parametrize("body,arg,message,hint", [
    (LOAD, 'cache_modifier=".cs"', "tl.load cache_modifier='.cs' is not supported: use one of '.ca', '.cg', '.cv'",
     "'.cs' applies to tl.store only"),
    (LOAD, 'cache_modifier=".wb"', "tl.load cache_modifier='.wb'", "leave cache_modifier out (or pass '')"),
    (LOAD, 'cache_modifier="cg"', "tl.load cache_modifier='cg'", "did you mean '.cg'?"),
    (LOAD, 'eviction_policy="evict_normal"',
     "tl.load eviction_policy='evict_normal' is not supported: use one of 'evict_first', 'evict_last'",
     "the normal policy is the default"),
    (LOAD, 'eviction_policy="first"', "eviction_policy='first'", "did you mean 'evict_first'?"),
    (LOAD, "eviction_policy=n", "tl.load eviction_policy=<Tensor>", "compile-time string"),
    (STORE, 'cache_modifier=".cv"', "tl.store cache_modifier='.cv' is not supported: use one of '.wb', '.cg', "
     "'.cs', '.wt'", "'.cv' applies to tl.load only"),
    (STORE, 'cache_modifier=".ca"', "tl.store cache_modifier='.ca'", "'.cs': streaming"),
    (STORE, 'eviction_policy="evict_unchanged"', "tl.store eviction_policy='evict_unchanged'", "'evict_last': "),
    (BLOCK_PTR, 'cache_modifier=".lu"', "tl.store cache_modifier='.lu'", "'.wt': write through"),
])
def test_invalid_hints_are_errors(body: str, arg: str, message: str, hint: str) -> None:
    caret = "tl.load" if body is LOAD else "tl.store"
    e = expect(E.ArgumentError, body.format(arg=arg), 8, message, caret_at=caret)
    assert hint in e.hint, e.hint
