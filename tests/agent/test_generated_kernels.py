"""Tasks that start from generate_kernel: a torch expression becomes a checked kernel, which the agent
relaunches on other shapes, edits, benchmarks and inspects."""

from __future__ import annotations

from typing import Any

import pytest
from scripted import Agent

pytestmark = pytest.mark.anyio


async def test_row_l2_distance_on_two_shapes(agent: Agent) -> None:
    """Task: the L2 distance between matching rows of x and y, then the same kernel on a longer batch."""
    gen = await agent.call("generate_kernel", expression="torch.linalg.vector_norm(x - y, dim=-1)",
                           args={"x": {"shape": [100, 70]}, "y": {"shape": [100, 70]}})
    assert gen["passed"] is True and gen["template"] == "rows" and gen["ops"][:3] == ["sub", "square", "sum"]
    launch = gen["launch"]
    args = dict(launch["args"])
    R, C = 333, 70
    args.update({"x_ptr": {"shape": [R, C]}, "y_ptr": {"shape": [R, C]}, "out_ptr": {"shape": [R], "init": "empty"},
                 "R": R})
    again = await agent.call("launch_kernel", kernel_id=launch["kernel_id"], grid=launch["grid"], args=args,
                             reference=launch["reference"])
    assert again["passed"] is True and again["grid"] == [-(-R // launch["constexprs"]["ROWS"])]
    assert again["outputs"]["out_ptr"]["shape"] == [R] and again["outputs"]["out_ptr"]["min"] > 0


async def test_generated_softmax_edited_and_relaunched(agent: Agent) -> None:
    """Task: softmax(x * scale + mask) with an extra output gain the generator does not know about: take
    the generated source, add a parameter, relaunch the edited source with the generated launch."""
    gen = await agent.call("generate_kernel", expression="torch.softmax(x * scale + mask, dim=-1)",
                           args={"x": {"shape": [48, 200]}, "mask": {"shape": [200], "init": "randint", "low": -2,
                                                                     "high": 1}, "scale": 0.125})
    assert gen["passed"] is True and "def softmax_kernel(x_ptr, mask_ptr, out_ptr, scale, R, C," in gen["source"]
    store = next(line for line in gen["source"].splitlines() if "tl.store(out_ptr" in line)
    value = store.split(", ")[1]  # e.g. v6.to(tl.float32)
    edited = (gen["source"].replace("scale, R, C,", "scale, gain, R, C,")
              .replace(store, store.replace(value, f"({value.split('.to(')[0]} * gain).to(tl.float32)")))
    launch = gen["launch"]
    reference = {"out_ptr": f"gain * ({launch['reference']['out_ptr']})"}
    result = await agent.call("launch_kernel", source=edited, constexprs=launch["constexprs"], grid=launch["grid"],
                              args={**launch["args"], "gain": 3.0}, reference=reference)
    assert result["passed"] is True and result["kernel_id"] != gen["kernel_id"]
    assert result["outputs"]["out_ptr"]["max"] <= 3.0 and result["outputs"]["out_ptr"]["unwritten_count"] == 0


async def test_matmul_epilogue_generated_then_tiles_swept(agent: Agent) -> None:
    """Task: y = GELU(x @ w + b) in bf16, then a sweep of tile sizes with benchmark."""
    args: dict[str, Any] = {"x": {"shape": [96, 64], "dtype": "bf16"}, "w": {"shape": [64, 80], "dtype": "bf16"},
                            "b": {"shape": [80], "dtype": "bf16"}}
    gen = await agent.call("generate_kernel", expression="h = x @ w + b; y = F.gelu(h)", args=args)
    assert gen["passed"] is True and gen["template"] == "matmul" and "tl.dot(a_tile, b_tile, acc)" in gen["source"]
    launch = gen["launch"]
    assert launch["reference"] == {"y_ptr": "F.gelu(x_ptr @ w_ptr + b_ptr)"}
    configs = [{"constexprs": {"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 32}} for m, n in ((16, 16), (32, 64))]
    bench = await agent.call("benchmark", kernel_id=launch["kernel_id"], grid=launch["grid"], args=launch["args"],
                             reference=launch["reference"], configs=configs, warmup_ms=2, rep_ms=10,
                             flops=2 * 96 * 64 * 80)
    assert [r["passed"] for r in bench["results"]] == [True, True]
    medians = [r["timing"]["median_us"] for r in bench["results"]]
    assert bench["best"] == medians.index(min(medians)) and all(r["tflops"] > 0 for r in bench["results"])


async def test_generated_layer_norm_and_its_compiler_output(agent: Agent) -> None:
    """Task: layer norm with its statistics as extra outputs, then read the kernel's Tile IR."""
    gen = await agent.call(
        "generate_kernel", outputs=["y", "mu", "rstd"],
        expression="mu = x.mean(-1, keepdim=True); xc = x - mu; "
                   "rstd = torch.rsqrt((xc * xc).mean(-1, keepdim=True) + 1e-5); y = xc * rstd * w + b",
        args={"x": {"shape": [64, 384]}, "w": {"shape": [384]}, "b": {"shape": [384]}})
    assert gen["passed"] is True and set(gen["check"]["checks"]) == {"y_ptr", "mu_ptr", "rstd_ptr"}
    assert gen["launch"]["args"]["rstd_ptr"]["shape"] == [64, 1]
    page = await agent.call("read_artifact", kernel_id=gen["kernel_id"], artifact="tir", max_lines=400)
    assert gen["kernel_name"] in page["text"] and page["total_lines"] > 10


async def test_benchmark_a_generated_kernel_against_torch(agent: Agent) -> None:
    """Task: how does a fused GELU(x) * y compare with torch computing it op by op?"""
    gen = await agent.call("generate_kernel", expression="F.gelu(x) * y", benchmark=True, rep_ms=20,
                           args={"x": {"shape": [1 << 18]}, "y": {"shape": [1 << 18]}})
    bench = gen["benchmark"]
    assert gen["passed"] is True and bench["passed"] is True
    timing = bench["results"][0]["timing"]
    assert timing["n"] >= 3 and timing["p10_us"] <= timing["median_us"] <= timing["p90_us"]
    assert bench["baseline"]["median_us"] > 0 and bench["results"][0]["gbps"] > 0
    assert bench["speedup"] == pytest.approx(bench["baseline"]["median_us"] / timing["median_us"], rel=0.01)
    assert "vs torch" in gen["summary"]


async def test_a_refused_expression_is_rewritten(agent: Agent) -> None:
    """Task: mean-centre each row. The first attempt subtracts a (rows,) mean from (rows, C) values, which
    torch would line up with the columns; the error says to keep the dim, and the rewrite passes."""
    args = {"x": {"shape": [40, 40]}}
    message, _ = await agent.fails("generate_kernel", expression="x - x.mean(-1)", args=args)
    assert "keepdim=True" in message and "^" in message
    gen = await agent.call("generate_kernel", expression="x - x.mean(-1, keepdim=True)", args=args)
    assert gen["passed"] is True and abs(gen["check"]["outputs"]["out_ptr"]["mean"]) < 1e-5


async def test_rmsnorm_times_weight_generated_named_and_timed(agent: Agent) -> None:
    """Task: RMSNorm(x) * weight as one kernel, timed against torch. The kernel is named for the norm and
    its launch echoes the specs as given (no fields left at their defaults)."""
    gen = await agent.call("generate_kernel", expression="F.rms_norm(x, (x.shape[-1],), eps=1e-6) * weight",
                           args={"x": {"shape": [33, 517]}, "weight": {"shape": [517]}}, benchmark=True, rep_ms=5)
    assert gen["passed"] is True and gen["template"] == "rows" and gen["kernel_name"] == "rms_norm_kernel"
    assert gen["launch"]["args"]["x_ptr"] == {"shape": [33, 517], "dtype": "float32", "init": "randn"}
    assert gen["launch"]["args"]["out_ptr"]["init"] == "empty" and gen["launch"]["args"]["C"] == 517
    bench = gen["benchmark"]
    assert bench["passed"] is True and bench["results"][0]["timing"]["median_us"] > 0 and bench["speedup"] > 0
    assert gen["check"]["checks"]["out_ptr"]["max_abs_error"] < 1e-4


async def test_log_softmax_generated_then_run_on_wider_rows(agent: Agent) -> None:
    """Task: log-softmax over rows of 1001, then the same kernel's source on rows of 3000: the notes say
    BLOCK_C must cover a row, so the relaunch passes a larger BLOCK_C with the new sizes."""
    gen = await agent.call("generate_kernel", expression="torch.log_softmax(x, dim=-1)",
                           args={"x": {"shape": [45, 1001]}})
    assert gen["passed"] is True and gen["kernel_name"] == "log_softmax_kernel"
    assert any("BLOCK_C" in note for note in gen["notes"]) and gen["launch"]["constexprs"]["BLOCK_C"] == 1024
    launch = gen["launch"]
    R, C = 7, 3000
    args = {**launch["args"], "x_ptr": {"shape": [R, C]}, "out_ptr": {"shape": [R, C], "init": "empty"},
            "R": R, "C": C, "x_stride0": C}
    wide = await agent.call("launch_kernel", source=gen["source"], grid=launch["grid"], args=args,
                            constexprs={**launch["constexprs"], "BLOCK_C": 4096}, reference=launch["reference"])
    assert wide["passed"] is True and wide["outputs"]["out_ptr"]["unwritten_count"] == 0
    assert wide["outputs"]["out_ptr"]["max"] < 0
