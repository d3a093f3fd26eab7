"""Everyday kernel-author tasks: a seeded dropout, an argmax per row, a histogram with atomics, an int8
weight dequantized inside a matmul, a 2-D convolution as loops, and a block size found by autotune."""

from __future__ import annotations

import pytest
from scripted import Agent

pytestmark = pytest.mark.anyio

HEADER = "import triton\nimport triton.language as tl\n\n\n"

DROPOUT = HEADER + """\
@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)
"""


async def test_seeded_dropout(agent: Agent) -> None:
    """Task: dropout with p=0.3 from a seed. No reference can say which elements drop, so the agent reads
    the stats of x = ones: the dropped fraction is zero_count / n, the kept values are 1 / (1 - p); the
    same seed gives the same output, another seed another one, and p = 0 is the identity."""
    n, p = 20000, 0.3
    args = {"x_ptr": {"shape": [n], "init": "ones"}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n, "p": p}
    launch = {"source": DROPOUT, "constexprs": {"BLOCK": 1024}, "grid": ["cdiv(n, BLOCK)"]}
    first = await agent.call("launch_kernel", args={**args, "seed": 1234}, **launch)
    out = first["outputs"]["out_ptr"]
    assert out["unwritten_count"] == 0 and out["nan_count"] == 0
    assert abs(out["zero_count"] / n - p) < 0.02
    assert out["max"] == pytest.approx(1 / (1 - p), rel=1e-6) and out["min"] == 0.0
    again = await agent.call("launch_kernel", args={**args, "seed": 1234}, **launch)
    other = await agent.call("launch_kernel", args={**args, "seed": 99}, **launch)
    assert again["outputs"]["out_ptr"] == out and other["outputs"]["out_ptr"]["values"] != out["values"]
    identity = await agent.call("launch_kernel", args={**args, "seed": 1234, "p": 0.0, "x_ptr": {"shape": [n]}},
                                reference={"out_ptr": "x_ptr"}, **launch)
    assert identity["passed"] is True and first["signature"]["seed"] == "i32"


ARGMAX = HEADER + """\
@triton.jit
def row_argmax(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float("inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0))
"""


async def test_argmax_per_row(agent: Agent) -> None:
    """Task: the index of each row's largest value, as int32, rows of 333 (the padding never wins)."""
    R, C = 19, 333
    result = await agent.call(
        "launch_kernel", source=ARGMAX, constexprs={"BLOCK": 512}, grid=[R],
        args={"x_ptr": {"shape": [R, C], "init": "rand", "low": -5, "high": -1},
              "out_ptr": {"shape": [R], "dtype": "int32", "init": "empty"}, "n_cols": C},
        reference={"out_ptr": "x_ptr.argmax(dim=-1).int()"})
    out = result["outputs"]["out_ptr"]
    assert result["passed"] is True and result["checks"]["out_ptr"]["atol"] == 0
    assert out["dtype"] == "int32" and out["max"] < C and out["unwritten_count"] == 0


HISTOGRAM = HEADER + """\
@triton.jit
def histogram_kernel(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + v, 1, mask=mask)
"""


async def test_histogram_with_atomics(agent: Agent) -> None:
    """Task: count 5000 int32 values into 64 bins with atomic adds from 5 programs. torch.bincount is refused
    as a reference (its size depends on the data); the message gives the fixed-size form, which passes."""
    n, bins = 5000, 64
    launch = {"source": HISTOGRAM, "constexprs": {"BLOCK": 1024}, "grid": ["cdiv(n, BLOCK)"],
              "args": {"x_ptr": {"shape": [n], "dtype": "int32", "init": "randint", "low": 0, "high": bins},
                       "hist_ptr": {"shape": [bins], "dtype": "int32", "init": "zeros"}, "n": n}}
    message, _ = await agent.fails("launch_kernel", reference={"hist_ptr": f"torch.bincount(x_ptr, minlength={bins})"},
                                   **launch)
    assert "torch.bincount is not an allowed function" in message and "torch.arange(n)).sum(0)" in message
    result = await agent.call("launch_kernel", **launch,
                              reference={"hist_ptr": f"(x_ptr[:, None] == torch.arange({bins})).sum(0).int()"})
    hist = result["outputs"]["hist_ptr"]
    assert result["passed"] is True and hist["mean"] == pytest.approx(n / bins) and hist["min"] > 0


DEQUANT_MATMUL = HEADER + """\
@triton.jit
def int8_matmul(a_ptr, w_ptr, scale_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, w.to(tl.float32), acc)
    scale = tl.load(scale_ptr + rn, mask=rn < N, other=0.0)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc * scale[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N))
"""


async def test_int8_weight_dequantized_in_a_matmul(agent: Agent) -> None:
    """Task: C = A @ (W_int8 * scale[n]) with the scale applied after the K loop; sizes fit no tile."""
    M, N, K = 50, 70, 90
    result = await agent.call(
        "launch_kernel", source=DEQUANT_MATMUL, constexprs={"BM": 32, "BN": 32, "BK": 32},
        grid=["cdiv(M, BM)", "cdiv(N, BN)"],
        args={"a_ptr": {"shape": [M, K]}, "w_ptr": {"shape": [K, N], "dtype": "int8", "init": "randint",
                                                      "low": -127, "high": 128},
              "scale_ptr": {"shape": [N], "init": "rand", "low": 0.001, "high": 0.01},
              "c_ptr": {"shape": [M, N], "init": "empty"}, "M": M, "N": N, "K": K},
        reference={"c_ptr": "a_ptr @ (w_ptr.float() * scale_ptr)"})
    assert result["passed"] is True and result["signature"]["w_ptr"] == "*i8" and result["grid"] == [2, 3]
    assert result["outputs"]["c_ptr"]["unwritten_count"] == 0


CONV2D = HEADER + """\
@triton.jit
def conv2d_kernel(x_ptr, w_ptr, y_ptr, W, OH, OW, KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < OH * OW
    oh = offs // OW
    ow = offs % OW
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(KH):
        for j in tl.static_range(KW):
            acc += tl.load(x_ptr + (oh + i) * W + (ow + j), mask=mask, other=0.0) * tl.load(w_ptr + i * KW + j)
    tl.store(y_ptr + offs, acc, mask=mask)
"""


async def test_conv2d_as_loops_over_the_filter(agent: Agent) -> None:
    """Task: a valid 3 x 5 convolution of a 31 x 45 image, one output pixel per lane, the filter loops
    unrolled; checked against F.conv2d."""
    H, W, KH, KW = 31, 45, 3, 5
    OH, OW = H - KH + 1, W - KW + 1
    result = await agent.call(
        "launch_kernel", source=CONV2D, constexprs={"KH": KH, "KW": KW, "BLOCK": 256}, grid=["cdiv(OH * OW, BLOCK)"],
        args={"x_ptr": {"shape": [H, W]}, "w_ptr": {"shape": [KH, KW]}, "y_ptr": {"shape": [OH, OW], "init": "empty"},
              "W": W, "OH": OH, "OW": OW},
        reference={"y_ptr": "F.conv2d(x_ptr[None, None], w_ptr[None, None])[0, 0]"})
    assert result["passed"] is True and result["grid"] == [-(-OH * OW // 256)]
    assert result["outputs"]["y_ptr"]["unwritten_count"] == 0


ADD = HEADER + """\
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""


async def test_block_size_found_by_autotune(agent: Agent) -> None:
    """Task: which BLOCK_SIZE suits a 100003-element add here? benchmark(autotune=true) tries block sizes
    around the given one, checks each, and names the fastest; that kernel_id launches as it is."""
    n = 100003
    args = {"x_ptr": {"shape": [n]}, "y_ptr": {"shape": [n]}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n}
    bench = await agent.call("benchmark", source=ADD, constexprs={"BLOCK_SIZE": 1024}, grid=["cdiv(n, BLOCK_SIZE)"],
                             args=args, reference={"out_ptr": "x_ptr + y_ptr"}, baseline="x_ptr + y_ptr",
                             autotune=True, warmup_ms=2, rep_ms=5, cache="warm")
    tried = [r["config"]["constexprs"]["BLOCK_SIZE"] for r in bench["results"]]
    assert tried[0] == 1024 and {256, 512, 2048, 4096} <= set(tried) and all(r["passed"] for r in bench["results"])
    best = bench["results"][bench["best"]]
    assert best["timing"]["median_us"] == min(r["timing"]["median_us"] for r in bench["results"])
    assert bench["best_kernel_id"] == best["kernel_id"] and bench["autotune"] and bench["speedup"] > 0
    again = await agent.call("launch_kernel", kernel_id=bench["best_kernel_id"], grid=["cdiv(n, BLOCK_SIZE)"],
                             args=args, reference={"out_ptr": "x_ptr + y_ptr"})
    assert again["passed"] is True and again["constexprs"]["BLOCK_SIZE"] == tried[bench["best"]]
