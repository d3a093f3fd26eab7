"""Tasks where the agent edits a generated kernel or writes one: a residual added to a generated layer
norm, a causal softmax in fp16, a tiled transpose, SwiGLU in bf16, a row-wise cumsum. Sizes fit no
block; outputs start poisoned (init 'empty'); each draft's failure is read and fixed."""

from __future__ import annotations

import pytest
from scripted import Agent

pytestmark = pytest.mark.anyio

HEADER = "import triton\nimport triton.language as tl\n\n\n"


async def test_generated_layer_norm_edited_to_add_a_residual(agent: Agent) -> None:
    """Task: LayerNorm(x + res) * w + b: generate the plain layer norm, add a residual input to its source,
    compile the edit, launch it with the generated launch plus the new input, against the new reference."""
    R, C = 33, 517
    gen = await agent.call("generate_kernel", expression="F.layer_norm(x, (x.shape[-1],), w, b)",
                           args={"x": {"shape": [R, C]}, "w": {"shape": [C]}, "b": {"shape": [C]}})
    assert gen["passed"] is True and gen["kernel_name"] == "layer_norm_kernel"
    source = gen["source"]
    load_x = next(line for line in source.splitlines() if line.strip().startswith("x = tl.load(x_ptr"))
    residual = load_x.replace("x = tl.load(x_ptr", "x = x + tl.load(res_ptr")
    edited = (source.replace("def layer_norm_kernel(x_ptr,", "def layer_norm_kernel(x_ptr, res_ptr,")
              .replace(load_x, f"{load_x}\n{residual}"))
    launch = gen["launch"]
    compiled = await agent.call("compile_kernel", source=edited, constexprs=launch["constexprs"])
    assert list(compiled["signature"])[:2] == ["x_ptr", "res_ptr"] and compiled["kernel_id"] != gen["kernel_id"]
    result = await agent.call(
        "launch_kernel", kernel_id=compiled["kernel_id"], grid=launch["grid"],
        args={**launch["args"], "res_ptr": {"shape": [R, C], "std": 0.5}},
        reference={"out_ptr": "F.layer_norm(x_ptr + res_ptr, (x_ptr.shape[-1],), w_ptr, b_ptr)"})
    assert result["passed"] is True and result["outputs"]["out_ptr"]["unwritten_count"] == 0
    # the edit matters: the plain layer norm's reference no longer matches
    plain = await agent.call("launch_kernel", kernel_id=compiled["kernel_id"], grid=launch["grid"],
                             args={**launch["args"], "res_ptr": {"shape": [R, C]}}, reference=launch["reference"])
    assert plain["passed"] is False and plain["checks"]["out_ptr"]["mismatched"] > R * C // 2


CAUSAL_SOFTMAX = HEADER + """\
@triton.jit
def causal_softmax(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    visible = (offs < n_cols) & (offs <= row)
    x = tl.load(x_ptr + row * stride + offs, mask=visible, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + offs, (e / tl.sum(e, axis=0)).to(tl.float16), mask=offs < n_cols)
"""


async def test_causal_softmax_in_fp16(agent: Agent) -> None:
    """Task: softmax of each row of fp16 scores over the positions at or before the row (zeros after),
    statistics in float32."""
    n = 77
    future = "torch.triu(torch.ones(x_ptr.shape[0], x_ptr.shape[1], dtype=torch.bool), diagonal=1)"
    result = await agent.call(
        "launch_kernel", source=CAUSAL_SOFTMAX, constexprs={"BLOCK": 128}, grid=[n],
        args={"x_ptr": {"shape": [n, n], "dtype": "fp16", "std": 3.0},
              "out_ptr": {"shape": [n, n], "dtype": "fp16", "init": "empty"}, "n_cols": n, "stride": n},
        reference={"out_ptr": f"torch.softmax(x_ptr.float().masked_fill({future}, float('-inf')), dim=-1).half()"})
    out = result["outputs"]["out_ptr"]
    assert result["passed"] is True and result["signature"]["x_ptr"] == "*fp16" and out["dtype"] == "float16"
    assert out["values"][:2] == [1.0, 0.0] and out["unwritten_count"] == 0
    assert out["zero_count"] >= n * (n - 1) // 2  # the future of every row


TRANSPOSE_UNMASKED = HEADER + """\
@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    tl.store(y_ptr + rn[None, :] * M + rm[:, None], tile)
"""


async def test_tiled_transpose_of_sizes_that_fit_no_tile(agent: Agent) -> None:
    """Task: y = x.T for a (100, 37) x in 32 x 16 tiles. The draft has no masks: the error names the access
    and its line; the masked kernel passes."""
    M, N = 100, 37
    launch = {"constexprs": {"BM": 32, "BN": 16}, "grid": ["cdiv(M, BM)", "cdiv(N, BN)"],
              "args": {"x_ptr": {"shape": [M, N]}, "y_ptr": {"shape": [N, M], "init": "empty"}, "M": M, "N": N},
              "reference": {"y_ptr": "x_ptr.t()"}}
    message, _ = await agent.fails("launch_kernel", source=TRANSPOSE_UNMASKED, **launch)
    assert "transpose_kernel" in message and "out-of-bounds" in message and "x_ptr" in message
    assert "tl.load(x_ptr + rm[:, None] * N + rn[None, :])" in message and "mask" in message
    mask = "(rm[:, None] < M) & (rn[None, :] < N)"
    fixed = (TRANSPOSE_UNMASKED.replace("rn[None, :])\n", f"rn[None, :], mask={mask})\n")
             .replace("tile)\n", f"tile, mask={mask})\n"))
    result = await agent.call("launch_kernel", source=fixed, **launch)
    assert result["passed"] is True and result["grid"] == [4, 3]
    assert result["outputs"]["y_ptr"]["shape"] == [N, M] and result["outputs"]["y_ptr"]["unwritten_count"] == 0


SWIGLU = HEADER + """\
@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(gate_ptr + offs, mask=mask).to(tl.float32)
    u = tl.load(up_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (g * tl.sigmoid(g) * u).to(tl.bfloat16), mask=mask)
"""


async def test_swiglu_in_bf16(agent: Agent) -> None:
    """Task: SiLU(gate) * up on bf16 activations of a (13, 385) MLP, computed in float32, stored in bf16."""
    shape = [13, 385]
    n = shape[0] * shape[1]
    result = await agent.call(
        "launch_kernel", source=SWIGLU, constexprs={"BLOCK": 1024}, grid=["cdiv(n, BLOCK)"],
        args={"gate_ptr": {"shape": shape, "dtype": "bf16"}, "up_ptr": {"shape": shape, "dtype": "bf16"},
              "out_ptr": {"shape": shape, "dtype": "bf16", "init": "empty"}, "n": n},
        reference={"out_ptr": "F.silu(gate_ptr.float()) * up_ptr.float()"})
    check = result["checks"]["out_ptr"]
    assert result["passed"] is True and result["signature"]["out_ptr"] == "*bf16"
    assert check["rtol"] >= 1e-2 and check["total"] == n and result["outputs"]["out_ptr"]["unwritten_count"] == 0


CUMSUM = HEADER + """\
@triton.jit
def row_cumsum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + offs, tl.cumulative_sum(x, axis=0), mask=mask)
"""


async def test_row_cumsum_after_a_misspelt_scan(agent: Agent) -> None:
    """Task: the running sum along each row. The draft calls a scan the language does not have; the
    diagnostic points at it and names tl.cumsum; the fixed kernel passes."""
    R, C = 13, 300
    message, details = await agent.fails("compile_kernel", source=CUMSUM, constexprs={"BLOCK": 512})
    diag = details["diagnostics"][0]
    assert diag["line"] == 11 and "cumulative_sum" in diag["message"] and "did you mean tl.cumsum" in diag["hint"]
    assert "triton.language" in message and "compiler.language" not in message
    fixed = CUMSUM.replace("tl.cumulative_sum(", "tl.cumsum(")
    result = await agent.call(
        "launch_kernel", source=fixed, constexprs={"BLOCK": 512}, grid=[R],
        args={"x_ptr": {"shape": [R, C]}, "out_ptr": {"shape": [R, C], "init": "empty"}, "n_cols": C},
        reference={"out_ptr": "torch.cumsum(x_ptr, dim=-1)"}, rtol=1e-4, atol=1e-4)
    assert result["passed"] is True and result["outputs"]["out_ptr"]["unwritten_count"] == 0
