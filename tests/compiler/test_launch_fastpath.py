"""The warm launch path (compiler/runtime/fastpath.py) on the CPU backend: every property that
changes the binary changes the key, and the general path's errors are unchanged."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import errors as E
from compiler import jit


@jit
def axpy(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr, FLAG: tl.constexpr = 0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m) * alpha
    if FLAG:
        v = v + 1
    tl.store(out_ptr + offs, v, mask=m)


def _run(x: torch.Tensor, n: int, **kw: object) -> tuple[object, torch.Tensor]:
    out = torch.full_like(x, float("nan"))
    ck = axpy[(triton_cdiv(n, 64),)](x, out, n, 2.0, BLOCK=64, **kw)
    return ck, out


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def test_dtype_change_recompiles_and_the_first_kernel_comes_back() -> None:
    n = 1000
    x32 = torch.randn(n)
    x64 = torch.randn(n, dtype=torch.float64)
    k32, o32 = _run(x32, n)
    k64, o64 = _run(x64, n)
    assert k64 is not k32
    torch.testing.assert_close(o32, x32 * 2)
    torch.testing.assert_close(o64, x64 * 2)
    k32b, o32b = _run(x32, n)
    assert k32b is k32
    torch.testing.assert_close(o32b, x32 * 2)


def test_misaligned_pointer_gets_its_own_kernel() -> None:
    n = 999
    base = torch.randn(n + 1)
    aligned, _ = _run(base[:n].clone(), n)
    x = base[1:]  # 4 bytes past a 16-byte boundary
    assert x.data_ptr() % 16
    mis, out = _run(x, n)
    assert mis is not aligned
    assert "divisibility=16" in aligned.asm["tir"].split("\n")[0]
    assert "%x_ptr: !ptr<f32> {divisibility=16}" not in mis.asm["tir"]
    torch.testing.assert_close(out, x * 2)


def test_int_specialization_one_and_multiple_of_16() -> None:
    x = torch.randn(64)
    ks = {n: _run(x, n)[0] for n in (1, 16, 17, 32)}
    assert ks[16] is ks[32]  # both divisible by 16
    assert len({id(ks[1]), id(ks[16]), id(ks[17])}) == 3
    _, out = _run(x, 17)
    torch.testing.assert_close(out[:17], x[:17] * 2)
    assert out[17:].isnan().all()


def test_constexpr_values_of_different_types_are_different_kernels() -> None:
    x = torch.randn(100)
    k0, o0 = _run(x, 100, FLAG=0)
    k1, o1 = _run(x, 100, FLAG=1)
    kt, ot = _run(x, 100, FLAG=True)
    kf, of = _run(x, 100, FLAG=1.0)
    assert len({id(k0), id(k1), id(kt), id(kf)}) == 4
    torch.testing.assert_close(o0, x * 2)
    for o in (o1, ot, of):
        torch.testing.assert_close(o, x * 2 + 1)
    assert _run(x, 100, FLAG=True)[0] is kt and _run(x, 100, FLAG=1)[0] is k1
    # bools and strings (their tokens made in the front itself): False is not 0, "" is not "1"
    kF, oF = _run(x, 100, FLAG=False)
    ke, oe = _run(x, 100, FLAG="")
    ks, os_ = _run(x, 100, FLAG="1")
    assert len({id(k0), id(k1), id(kt), id(kf), id(kF), id(ke), id(ks)}) == 7
    torch.testing.assert_close(oF, x * 2)
    torch.testing.assert_close(oe, x * 2)
    torch.testing.assert_close(os_, x * 2 + 1)
    assert _run(x, 100, FLAG=False)[0] is kF and _run(x, 100, FLAG="")[0] is ke and _run(x, 100, FLAG="1")[0] is ks


def test_num_warps_and_positional_or_keyword_calls() -> None:
    x = torch.randn(200)
    k4, _ = _run(x, 200)
    k2, o2 = _run(x, 200, num_warps=2)
    assert k2 is not k4 and k2.metadata["num_warps"] == 2
    out = torch.full_like(x, float("nan"))
    k = axpy[(4,)](x_ptr=x, out_ptr=out, n=200, alpha=2.0, BLOCK=64)  # all by keyword: another binder
    assert k is k4
    torch.testing.assert_close(out, x * 2)
    torch.testing.assert_close(o2, x * 2)
    kr, o3 = _run(x, 200, maxnreg=64)  # another key (on the CPU the option changes nothing else)
    assert kr is not k4 and kr.options.maxnreg == 64 and _run(x, 200, maxnreg=64)[0] is kr
    torch.testing.assert_close(o3, x * 2)
    assert "pop('maxnreg'" in axpy.launcher.front.__anvil_source__


def test_cluster_dims_is_a_warm_launch_option_with_a_checked_grid() -> None:
    """cluster_dims (thread block clusters on the GPU; programs run as usual on the CPU) is part of
    the key, a list is the same key as the tuple, the grid must be a multiple of it (on the warm
    path too) and bad values are LaunchErrors."""
    x = torch.randn(256)
    kc, o1 = _run(x, 256, cluster_dims=(2, 1, 1))  # grid 4
    assert kc.options.cluster_dims == (2, 1, 1) and kc is not _run(x, 256)[0]
    torch.testing.assert_close(o1, x * 2)
    assert _run(x, 256, cluster_dims=[2, 1, 1])[0] is kc and _run(x, 256, cluster_dims=(2,))[0] is kc
    assert _run(x, 256, cluster_dims=(1, 1, 1))[0] is _run(x, 256)[0]  # one program per cluster: none
    assert "pop('cluster_dims'" in axpy.launcher.front.__anvil_source__
    with pytest.raises(E.LaunchError, match=r"grid \(3, 1, 1\) is not a multiple of cluster_dims \(2, 1, 1\)"):
        _run(x, 190, cluster_dims=(2, 1, 1))  # grid 3, same key: the warm path checks it
    for bad, msg in (((4, 4, 1), "16 programs in a cluster; at most 8"), ((0, 1), "1 to 3 positive ints"),
                     ("2", "1 to 3 positive ints"), ((2, 1, 1, 1), "1 to 3 positive ints"), ({2: 1}, "positive ints"),
                     ((1, [2]), "positive ints"), ([2.0], "positive ints")):
        with pytest.raises(E.LaunchError, match=msg):
            _run(x, 256, cluster_dims=bad)


def test_grids_callable_2d_and_empty() -> None:
    x = torch.randn(300)
    out = torch.full_like(x, float("nan"))
    axpy[lambda meta: (triton_cdiv(meta["n"], meta["BLOCK"]),)](x, out, 300, 3.0, BLOCK=64)
    torch.testing.assert_close(out, x * 3)
    out2 = torch.full_like(x, float("nan"))
    axpy[(5, 1)](x, out2, 300, 3.0, BLOCK=64)
    torch.testing.assert_close(out2, x * 3)
    out3 = torch.full_like(x, float("nan"))
    axpy[(0,)](x, out3, 300, 3.0, BLOCK=64)
    assert out3.isnan().all()
    with pytest.raises(E.LaunchError, match="grid dimensions must be non-negative"):
        axpy[(-1,)](x, out3, 300, 3.0, BLOCK=64)


def test_bad_calls_keep_their_errors() -> None:
    x = torch.randn(10)
    with pytest.raises(E.LaunchError, match="missing argument 'alpha'"):
        axpy[(1,)](x, x, 10, BLOCK=64)
    with pytest.raises(E.LaunchError, match="unexpected keyword argument 'bogus'"):
        axpy[(1,)](x, x, 10, 1.0, BLOCK=64, bogus=1)
    # Python's own binding refuses an argument given twice, before any of Anvil's code runs;
    # kernel.run reports it as a LaunchError
    with pytest.raises(TypeError, match=r"axpy\(\) got multiple values for argument 'n'"):
        axpy[(1,)](x, x, 10, 1.0, n=3, BLOCK=64)
    with pytest.raises(E.LaunchError, match="multiple values for argument 'n'"):
        axpy.run(x, x, 10, 1.0, n=3, BLOCK=64, grid=(1,))
    with pytest.raises(E.LaunchError, match="takes 6 arguments"):
        axpy[(1,)](x, x, 10, 1.0, 64, 0, 7)
    meta = torch.empty(10, device="meta")
    _run(x, 10)  # a CPU kernel is cached for this key shape (get_device() is -1 for meta tensors too):
    # a meta tensor must not reach it; a launch with one (tracing a torch op for shapes) runs nothing
    before = x.clone()
    assert axpy[(1,)](x, meta, 10, 1.0, BLOCK=64) is None
    assert axpy[(1,)](meta, x, 10, 1.0, BLOCK=64) is None
    assert axpy[(1,)](meta, meta, 10, 1.0, BLOCK=64) is None
    assert torch.equal(x, before)
    with pytest.raises(E.LaunchError, match="missing argument 'alpha'"):  # the arguments are still bound
        axpy[(1,)](meta, meta, 10, BLOCK=64)


def test_binder_reads_each_pointer_once() -> None:
    calls = []

    class Counting(torch.Tensor):
        def data_ptr(self) -> int:
            calls.append(1)
            return super().data_ptr()

    x = torch.randn(64)
    _run(x, 64)
    src = axpy.launcher.front.__anvil_source__
    # one read in each non-constexpr parameter's tensor branch, shared by the key and the launch
    assert src.count(".data_ptr()") == 4
    y = x.as_subclass(Counting)  # not exactly torch.Tensor: the generic path, still correct
    o = torch.full_like(x, float("nan"))
    axpy[(1,)](y, o, 64, 2.0, BLOCK=64)
    torch.testing.assert_close(o, x * 2)
    assert calls


def test_grid_binding_is_remembered_for_int_grids_only() -> None:
    x = torch.randn(130)
    out = torch.full_like(x, float("nan"))
    assert axpy[(3,)] is axpy[(3,)] and axpy[3] is axpy[3]
    lam = lambda meta: (3,)  # noqa: E731
    assert axpy[lam] is not axpy[lam] and axpy[[3]] is not axpy[[3]]
    for grid in ((3,), 3, [3], (3.0,), lam, (3, 1, 1)):
        out.fill_(float("nan"))
        axpy[grid](x, out, 130, 2.0, BLOCK=64)
        torch.testing.assert_close(out, x * 2)


def test_arguments_by_keyword_missing_and_extra_reach_the_general_path() -> None:
    x = torch.randn(100)
    out = torch.full_like(x, float("nan"))
    axpy[(2,)](x, out_ptr=out, alpha=3.0, n=100, BLOCK=64)
    torch.testing.assert_close(out, x * 3)
    with pytest.raises(E.LaunchError, match="missing argument 'n'"):
        axpy[(2,)](x, out_ptr=out, alpha=3.0, BLOCK=64)
    with pytest.raises(E.LaunchError, match="missing argument 'BLOCK'"):
        axpy[(2,)](x, out, 100, 3.0)
    with pytest.raises(E.LaunchError, match="unexpected keyword argument 'num_threads'"):
        axpy[(2,)](x, out, 100, 3.0, BLOCK=64, num_threads=4)
    out.fill_(float("nan"))
    k = axpy[(2,)](x, out, 100, 3.0, BLOCK=64, num_stages=2, num_ctas=1)  # another option: general path
    assert k.metadata["num_stages"] == 2
    torch.testing.assert_close(out, x * 3)
    out.fill_(float("nan"))
    axpy.run(x, out, 100, 4.0, grid=(2,), BLOCK=64, num_warps=2)
    torch.testing.assert_close(out, x * 4)


def test_unusual_parameter_names() -> None:
    src = '''
import triton
import triton.language as tl

@triton.jit
def k(_A0, num_warps, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(_A0 + offs) * num_warps)
'''
    from compiler import compile_source

    k = compile_source(src, filename="<unusual names>")
    x = torch.randn(16)
    for _ in range(2):
        out = torch.full_like(x, float("nan"))
        k[(1,)](x, 3, out, BLOCK=16)  # `num_warps` is a parameter here, not the launch option
        torch.testing.assert_close(out, x * 3)
    assert not hasattr(k.launcher.front, "__anvil_source__")  # names with the front's prefix: general path
    k2 = compile_source(src.replace("_A0", "x_ptr"), filename="<option as a parameter>")
    out = torch.full_like(x, float("nan"))
    for _ in range(2):
        k2[(1,)](x, num_warps=5, out_ptr=out, BLOCK=16)
    torch.testing.assert_close(out, x * 5)
    front = k2.launcher.front.__anvil_source__
    assert "pop('num_warps'" not in front and "pop('num_stages'" in front
