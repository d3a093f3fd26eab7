"""Tasks where the agent writes the kernel: compile, launch against a torch reference, read what failed,
fix it. Sizes are not multiples of the blocks; outputs start poisoned (init 'empty')."""

from __future__ import annotations

import pytest
from scripted import Agent

from server.demo import BROKEN  # scale_kernel, which uses a `scale` it never defines (line 10)

pytestmark = pytest.mark.anyio

HEADER = "import triton\nimport triton.language as tl\n\n\n"

GELU_MUL = HEADER + """\
@triton.jit
def gelu_mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    gelu = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offs, gelu * y, mask=mask)
"""


async def test_fused_gelu_times_y(agent: Agent) -> None:
    """Task: out = GELU(x) * y in one pass over memory."""
    compiled = await agent.call("compile_kernel", source=GELU_MUL, constexprs={"BLOCK": 1024})
    assert compiled["kernel_name"] == "gelu_mul_kernel" and compiled["target"] == "cpu"
    n = 10007
    result = await agent.call(
        "launch_kernel", kernel_id=compiled["kernel_id"], grid=["cdiv(n, BLOCK)"], reference={
            "out_ptr": "F.gelu(x_ptr) * y_ptr"},
        args={"x_ptr": {"shape": [n]}, "y_ptr": {"shape": [n]}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n})
    check = result["checks"]["out_ptr"]
    assert result["passed"] is True and result["grid"] == [10]
    assert check["mismatched"] == 0 and check["max_abs_error"] < 1e-5
    assert result["outputs"]["out_ptr"]["unwritten_count"] == 0


RAGGED_LOG_SOFTMAX = HEADER + """\
@triton.jit
def ragged_log_softmax(x_ptr, len_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    n = tl.load(len_ptr + row)
    offs = tl.arange(0, BLOCK)
    valid = offs < n
    x = tl.load(x_ptr + row * n_cols + offs, mask=valid, other=-float("inf"))
    z = x - tl.max(x, axis=0)
    lse = tl.log(tl.sum(tl.where(valid, tl.exp(z), 0.0), axis=0))
    tl.store(out_ptr + row * n_cols + offs, tl.where(valid, z - lse, 0.0), mask=offs < n_cols)
"""


async def test_log_softmax_on_ragged_rows(agent: Agent) -> None:
    """Task: log-softmax of each row's first len[r] values (a padded ragged batch); zeros after them."""
    R, C = 37, 300
    valid = "torch.arange(n_cols) < len_ptr[:, None]"
    reference = (f"torch.where({valid}, torch.log_softmax(x_ptr.masked_fill(~({valid}), float('-inf')), dim=-1), "
                 "0.0)")
    result = await agent.call(
        "launch_kernel", source=RAGGED_LOG_SOFTMAX, constexprs={"BLOCK": 512}, grid=[R],
        args={"x_ptr": {"shape": [R, C]}, "len_ptr": {"shape": [R], "dtype": "int32", "init": "randint", "low": 1,
                                                     "high": C + 1},
              "out_ptr": {"shape": [R, C], "init": "empty"}, "n_cols": C},
        reference={"out_ptr": reference})
    assert result["passed"] is True, result["checks"]
    stats = result["outputs"]["out_ptr"]
    assert stats["unwritten_count"] == 0 and stats["max"] == 0.0 and stats["min"] < -3


RMSNORM_BF16 = HEADER + """\
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = x * tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps) * w
    tl.store(out_ptr + row * n_cols + offs, y.to(tl.bfloat16), mask=mask)
"""


async def test_rmsnorm_in_bf16(agent: Agent) -> None:
    """Task: RMSNorm * weight on bf16 activations, statistics in float32, the result rounded to bf16."""
    R, C = 64, 1000
    result = await agent.call(
        "launch_kernel", source=RMSNORM_BF16, constexprs={"BLOCK": 1024}, grid=[R],
        args={"x_ptr": {"shape": [R, C], "dtype": "bf16"}, "w_ptr": {"shape": [C], "dtype": "bf16"},
              "out_ptr": {"shape": [R, C], "dtype": "bf16", "init": "empty"}, "n_cols": C, "eps": 1e-6},
        reference={"out_ptr": "F.rms_norm(x_ptr.float(), (n_cols,), w_ptr.float(), 1e-6).bfloat16()"})
    assert result["passed"] is True and result["outputs"]["out_ptr"]["dtype"] == "bfloat16"
    assert result["checks"]["out_ptr"]["max_rel_error"] < 2e-2


MATMUL = HEADER + """\
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
"""


async def test_ragged_matmul(agent: Agent) -> None:
    """Task: C = A @ B for sizes that fit no block; the same kernel_id on a second shape."""
    compiled = await agent.call("compile_kernel", source=MATMUL, constexprs={"BLOCK_M": 32, "BLOCK_N": 32,
                                                                            "BLOCK_K": 16})
    for M, N, K in ((100, 70, 45), (33, 129, 17)):
        result = await agent.call(
            "launch_kernel", kernel_id=compiled["kernel_id"], grid=["cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)"],
            args={"a_ptr": {"shape": [M, K]}, "b_ptr": {"shape": [K, N]}, "c_ptr": {"shape": [M, N], "init": "empty"},
                  "M": M, "N": N, "K": K},
            reference={"c_ptr": "a_ptr @ b_ptr"})
        assert result["passed"] is True and result["outputs"]["c_ptr"]["unwritten_count"] == 0
        assert result["checks"]["c_ptr"]["max_abs_error"] < 1e-4


SLIDING_WINDOW = HEADER + """\
@triton.jit
def swa_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T, scale, W: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr):
    start = tl.program_id(0) * BLOCK_M
    rm = start + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :], mask=rm[:, None] < T, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    lo = (tl.maximum(start - W + 1, 0) // BLOCK_N) * BLOCK_N
    hi = tl.minimum(start + BLOCK_M, T)
    for n0 in range(lo, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + rn[:, None] * D + rd[None, :], mask=rn[:, None] < T, other=0.0)
        v = tl.load(v_ptr + rn[:, None] * D + rd[None, :], mask=rn[:, None] < T, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        diff = rm[:, None] - rn[None, :]
        s = tl.where((diff >= 0) & (diff < W) & (rn[None, :] < T), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc / l_i[:, None], mask=rm[:, None] < T)
"""


async def test_sliding_window_attention(agent: Agent) -> None:
    """Task: causal attention over the last W=16 positions, one pass of online softmax over key blocks."""
    T, D = 77, 32
    band = ("torch.where(((torch.arange(T)[:, None] - torch.arange(T)[None, :]) >= 0) & "
            "((torch.arange(T)[:, None] - torch.arange(T)[None, :]) < 16), 0.0, float('-inf'))")
    result = await agent.call(
        "launch_kernel", source=SLIDING_WINDOW, constexprs={"W": 16, "D": D, "BLOCK_M": 16, "BLOCK_N": 16},
        grid=["cdiv(T, BLOCK_M)"],
        args={"q_ptr": {"shape": [T, D]}, "k_ptr": {"shape": [T, D]}, "v_ptr": {"shape": [T, D]},
              "o_ptr": {"shape": [T, D], "init": "empty"}, "T": T, "scale": D ** -0.5},
        reference={"o_ptr": f"torch.softmax((q_ptr @ k_ptr.T) * scale + {band}, dim=-1) @ v_ptr"})
    assert result["passed"] is True, result["checks"]
    assert result["outputs"]["o_ptr"]["nan_count"] == 0 and result["outputs"]["o_ptr"]["unwritten_count"] == 0


async def test_compile_error_fixed_from_its_message(agent: Agent) -> None:
    """Task: scale a vector; the first draft forgets the parameter. The diagnostic says where and what."""
    message, details = await agent.fails("compile_kernel", source=BROKEN, constexprs={"BLOCK": 256})
    diag = details["diagnostics"][0]
    assert diag["line"] == 10 and "scale" in diag["message"] and "x * scale" in diag["source_line"]
    assert f"<source>:{diag['line']}:{diag['column']}" in message and "^" in message
    # the fix the message points at: scale becomes a parameter of the kernel
    fixed = BROKEN.replace("out_ptr, n, BLOCK", "out_ptr, n, scale, BLOCK")
    n = 3001
    result = await agent.call(
        "launch_kernel", source=fixed, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"],
        args={"x_ptr": {"shape": [n]}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n, "scale": 2.5},
        reference={"out_ptr": "x_ptr * scale"})
    assert result["passed"] is True and result["checks"]["out_ptr"]["max_abs_error"] == 0


UNMASKED = HEADER + """\
@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0))
"""


async def test_out_of_bounds_crash_recovered(agent: Agent) -> None:
    """Task: ReLU of 1000 values with blocks of 256. The draft reads and writes past the end; the error says
    so, the debug relaunch says where, the masked kernel passes and the server carries on."""
    args = {"x_ptr": {"shape": [1000]}, "out_ptr": {"shape": [1000], "init": "empty"}, "n": 1000}
    launch = {"grid": ["cdiv(n, BLOCK)"], "args": args, "reference": {"out_ptr": "torch.relu(x_ptr)"},
              "constexprs": {"BLOCK": 256}}
    message, _ = await agent.fails("launch_kernel", source=UNMASKED, **launch)
    assert "relu_kernel" in message and "bounds" in message.lower()
    located, _ = await agent.fails("launch_kernel", source=UNMASKED, debug=True, **launch)
    assert "relu_kernel" in located and ":8" in located and "program id" in located
    masked_load = "    mask = offs < n\n    x = tl.load(x_ptr + offs, mask=mask)"
    fixed = (UNMASKED.replace("    x = tl.load(x_ptr + offs)", masked_load)
             .replace("tl.maximum(x, 0.0))", "tl.maximum(x, 0.0), mask=mask)"))
    result = await agent.call("launch_kernel", source=fixed, **launch)
    assert result["passed"] is True and result["outputs"]["out_ptr"]["min"] == 0.0
