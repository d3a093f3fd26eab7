"""tl.dot lowers to tensor-core mma.sync with ldmatrix fragments, and the PTX assembles (no GPU)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import compiler
import compiler.language as tl
from compiler.backends.nvidia.toolchain import find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SRC = (Path(__file__).resolve().parents[2] / "benchmarks" / "gemm_kernels.py").read_text()

INSTR = {
    "fp16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "fp32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "i8": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
    "fp8e4nv": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "fp8e5": "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
}


def _compile(dtype: str, arch: str, bm: int = 64, bn: int = 64, bk: int = 32, warps: int = 4,
             precision: str = "tf32", stages: int = 3) -> object:
    out = "i32" if dtype == "i8" else "fp32"
    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{out}", "M": "i32:16", "N": "i32:16",
           "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}
    consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
              "GROUP_M": 8, "ACTIVATION": "", "PRECISION": precision,
              "ACC_DTYPE": tl.int32 if dtype == "i8" else tl.float32}
    return compiler.compile_source(SRC, kernel="matmul_kernel").compile(sig, consts, target=f"cuda:{arch}",
                                                                         num_warps=warps, num_stages=stages)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "i8"])
def test_mma_sync(dtype: str, arch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_WGMMA", "0")  # on sm_90a fp16/bf16 would take wgmma
    ck = _compile(dtype, arch)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    k = {"fp32": 8, "i8": 32}.get(dtype, 16)
    # 64x64 tile, 4 warps of 32x32: 2 x 4 instructions per k step of the instruction
    assert ptx.count(INSTR[dtype]) == 8 * (32 // k)
    assert "ldmatrix.sync.aligned.m8n8.x4" in ptx
    assert ck.asm["cubin"][:4] == b"\x7fELF"  # type: ignore[attr-defined]
    assert ck.metadata["n_spills"] == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("dtype", ["fp8e4nv", "fp8e5"])
def test_fp8_mma_sync(dtype: str) -> None:
    ck = _compile(dtype, "sm_89", bk=64)
    assert INSTR[dtype] in ck.asm["ptx"]  # type: ignore[attr-defined]
    assert ck.asm["cubin"][:4] == b"\x7fELF"  # type: ignore[attr-defined]


@pytest.mark.parametrize("dtype,name", [("fp8e4nv", "k32.f32.e4m3.e4m3"), ("fp8e5", "k32.f32.e5m2.e5m2"),
                                        ("fp32", "k8.f32.tf32.tf32")])
def test_wgmma_fp8_and_tf32(dtype: str, name: str) -> None:
    """8- and 32-bit operands: both K-major (no transpose immediates), 32 bytes of K per wgmma."""
    bk = 64 if dtype != "fp32" else 32
    for stages in (1, 3):  # operands staged from registers (fp32 rounded to tf32) / copied by cp.async
        ck = _compile(dtype, "sm_90a", 128, 128, bk, 8, stages=stages)
        ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
        assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n128{name}") == (2 if dtype != "fp32" else 4)
        # pipelined: A (K-contiguous) by 16-byte cp.async; B [K, N] is N-contiguous but read
        # K-major: fp32 by 4-byte copies (raw fp32: the tensor core truncates to tf32), fp8 through
        # registers (there is no 1-byte cp.async)
        assert ("cp.async.cg.shared.global" in ptx) == (stages > 1)
        assert ("cp.async.ca.shared.global" in ptx) == (stages > 1 and dtype == "fp32")
        assert ("cvt.rna.tf32.f32" in ptx) == (dtype == "fp32" and stages == 1)
        assert ck.asm["cubin"][:4] == b"\x7fELF"  # type: ignore[attr-defined]
        assert ck.metadata["n_spills"] == 0  # type: ignore[attr-defined]
        assert ck.metadata["ptxas_notes"] == []  # type: ignore[attr-defined]


def test_ieee_fp32_stays_on_cuda_cores() -> None:
    ptx = _compile("fp32", "sm_90a", precision="ieee").asm["ptx"]  # type: ignore[attr-defined]
    assert "mma.sync" not in ptx and "fma.rn.f32" in ptx


def test_f32_default_sets_the_precision_of_dots_that_name_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRITON_F32_DEFAULT as in Triton: a float32 dot with no input_precision follows it, and it is
    part of the cache key (the same kernel compiles to different code under each value)."""
    monkeypatch.setenv("TRITON_F32_DEFAULT", "ieee")
    ptx = _compile("fp32", "sm_80", precision="").asm["ptx"]  # type: ignore[attr-defined]
    assert "mma.sync" not in ptx and "fma.rn.f32" in ptx
    monkeypatch.delenv("TRITON_F32_DEFAULT")
    assert INSTR["fp32"] in _compile("fp32", "sm_80", precision="").asm["ptx"]  # type: ignore[attr-defined]
    monkeypatch.setenv("TRITON_F32_DEFAULT", "tf32")  # an explicit precision wins over the default
    ptx = _compile("fp32", "sm_80", precision="ieee").asm["ptx"]  # type: ignore[attr-defined]
    assert "mma.sync" not in ptx


def test_unknown_precisions_are_refused_with_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(compiler.errors.ArgumentError, match="input_precision='fp64' is not supported"):
        _compile("fp32", "sm_80", precision="fp64")
    monkeypatch.setenv("TRITON_F32_DEFAULT", "high")
    with pytest.raises(compiler.errors.ArgumentError, match="TRITON_F32_DEFAULT='high'.*'ieee'"):
        _compile("fp32", "sm_80", precision="")


def test_k_loop_carries_the_accumulator_in_registers() -> None:
    """Per K step: two barriers around staging the operands, nothing else through shared memory."""
    ptx = _compile("fp16", "sm_90a", stages=1).asm["ptx"]  # type: ignore[attr-defined]
    loop = re.search(r"\$L__BB0_\d+:\n(.*?)bra\.uni|\$L__BB0_\d+:\n(.*?)@%p\d+ bra", ptx, re.S)
    assert loop is not None
    body = loop.group(0)
    assert body.count("bar.sync") == 2
    assert "ld.global.v4.b32" in body and "st.shared.v4.b32" in body


def test_big_tile_no_spills() -> None:
    ck = _compile("fp16", "sm_80", 128, 128, 64, 8)
    assert ck.metadata["n_spills"] == 0  # type: ignore[attr-defined]
    assert ck.asm["ptx"].count(INSTR["fp16"]) == 128 * 4 // 8  # type: ignore[attr-defined]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("cfg,per_k,n", [((128, 128, 64, 8), 1, 128), ((128, 256, 64, 8), 1, 256),
                                         ((128, 64, 32, 4), 2, 64), ((64, 64, 16, 4), 1, 64),
                                         ((64, 64, 32, 8), 1, 32)])
@pytest.mark.parametrize("pipelined", [True, False])
def test_wgmma_on_hopper(dtype: str, cfg: tuple[int, int, int, int], per_k: int, n: int, pipelined: bool,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    """sm_90a: one wgmma per warpgroup slab of 64 rows and k16 step, operands in swizzled shared
    memory; N-major B when a warpgroup's N is a multiple of 64, else B^T K-major (32 columns per
    warpgroup). Operands staged from registers are made visible to the async proxy with a fence;
    pipelined cp.async copies need none (their wait and the barrier)."""
    if not pipelined:
        monkeypatch.setenv("ANVIL_PIPELINE", "0")
    bm, bn, bk, w = cfg
    ck = _compile(dtype, "sm_90a", bm, bn, bk, w)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    ab = "f16" if dtype == "fp16" else "bf16"
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}") == per_k * bk // 16
    assert "wgmma.wait_group.sync.aligned" in ptx
    assert ("cp.async.cg.shared.global" in ptx) == pipelined
    # 32 columns per warpgroup: B^T K-major, copied through registers into its slots
    assert ("fence.proxy.async.shared::cta" in ptx) == (not pipelined or n == 32)
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ck.asm["cubin"][:4] == b"\x7fELF"  # type: ignore[attr-defined]
    assert ck.metadata["n_spills"] == 0  # type: ignore[attr-defined]
    # no "wgmma serialized" / "warpgroup.arrive injected" remarks from the assembler
    assert ck.metadata["ptxas_notes"] == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("head_dim,block_m,warps", [(64, 64, 4), (128, 128, 8)])
def test_attention_loop_on_wgmma(head_dim: int, block_m: int, warps: int) -> None:
    """Fused attention (examples/flash_attention.py) on sm_90a: both dots on wgmma (q k^T with
    head dim 128 too: K-major rows split into 128-byte blocks), K and V copied by cp.async into
    pipeline slots, the probabilities fed to the second dot from registers, p @ v left in flight
    into the next iteration, and no shared-memory round trip for the row statistics inside the
    loop; no spills, no assembler remarks."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "flash_attention.py"
    spec = importlib.util.spec_from_file_location("anvil_examples_fa_ptx", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "LSE": "*fp32", "sm_scale": "fp32",
           **{f"stride_{t}{d}": "i32:16" for t in "qkvo" for d in ("z", "h", "m" if t in "qo" else "n")},
           "H": "i32", "N_CTX": "i32:16"}
    consts = {f"stride_{t}k": 1 for t in "qkvo"}
    consts.update({"HEAD_DIM": head_dim, "BLOCK_M": block_m, "BLOCK_N": 64, "CAUSAL": False})
    ck = mod._attn_fwd.compile(sig, consts, target="cuda:sm_90a", num_warps=warps)
    ptx = ck.asm["ptx"]
    assert ptx.count("wgmma.mma_async") == (block_m // 64 // (warps // 4)) * (head_dim // 16 + 64 // 16)
    assert "mma.sync" not in ptx and "cp.async.cg.shared.global" in ptx
    loop = ptx[ptx.index("cp.async.wait_group"):]
    loop = loop[:loop.index("cp.async.wait_all")]
    # the pipeline's barrier, and one before refilling the slots the carried p @ v group read
    assert loop.count("bar.sync") == 2
    # p @ v stays in flight into the next iteration: q k^T's wait completes both, and the last
    # iteration's group completes on the way out of the loop
    assert loop.count("wgmma.wait_group.sync.aligned 0") == 2
    last_commit = loop.rindex("wgmma.commit_group")
    assert "bar.sync" in loop[last_commit:loop.index("wgmma.wait_group", last_commit)]
    assert ck.metadata["n_spills"] == 0
    assert ck.metadata["ptxas_notes"] == []


@pytest.mark.parametrize("dtype,cfg", [("fp16", (128, 256, 64, 8)), ("bf16", (128, 128, 64, 8)),
                                       ("fp8e4nv", (128, 128, 128, 8)), ("fp16", (128, 64, 32, 4))])
def test_pipelined_loop_keeps_a_wgmma_group_in_flight(dtype: str, cfg: tuple[int, int, int, int],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The K loop copies operands 2 iterations ahead with cp.async and leaves each iteration's wgmma
    group in flight (wait_group 1, then a barrier before its slot is refilled) unless the assembler
    would serialize it (then the group is waited for at once: ptxas reports no remark either way);
    ANVIL_PIPELINE=sync waits in every iteration, =0 turns the pipeline off."""
    bm, bn, bk, w = cfg
    ptx = _compile(dtype, "sm_90a", bm, bn, bk, w, stages=4).asm["ptx"]  # type: ignore[attr-defined]
    loop = ptx[:ptx.index("cp.async.wait_all")]  # prologue, loop and the drain's wgmma wait
    # the loop's wait, then the drain's (which completes the last group)
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", loop)
    bars = loop.count("bar.sync")
    assert (waits, bars) == (["1", "0"], 2) or (waits == ["0", "0"] and bars in (1, 2))
    ck = _compile(dtype, "sm_90a", bm, bn, bk, w, stages=4)
    assert ck.metadata["ptxas_notes"] == []  # type: ignore[attr-defined]
    if dtype != "fp8e4nv" and (bm, w) == (128, 8):  # the benchmark tiles do keep the group in flight
        assert waits == ["1", "0"]
    monkeypatch.setenv("ANVIL_PIPELINE", "sync")
    ptx = _compile(dtype, "sm_90a", bm, bn, bk, w, stages=4).asm["ptx"]  # type: ignore[attr-defined]
    loop = ptx[:ptx.index("cp.async.wait_all")]
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", loop) == ["0"] and loop.count("bar.sync") == 1
    monkeypatch.setenv("ANVIL_PIPELINE", "0")
    assert "cp.async" not in _compile(dtype, "sm_90a", bm, bn, bk, w, stages=4).asm["ptx"]  # type: ignore[attr-defined]


@compiler.jit
def two_loops(a_ptr, b_ptr, c_ptr, d_ptr, c_out, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """a @ b + c @ d in two K loops one after the other (row-major, every access masked)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    row_ok, col_ok = rm[:, None] < M, rn[None, :] < N
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=row_ok & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
    for k in range(0, K, BK):
        c = tl.load(c_ptr + rm[:, None] * K + (k + rk)[None, :], mask=row_ok & ((k + rk)[None, :] < K), other=0.0)
        d = tl.load(d_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & col_ok, other=0.0)
        acc = tl.dot(c, d, acc)
    tl.store(c_out + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_sequential_pipelined_loops_share_their_slots() -> None:
    """Two pipelined K loops in one kernel: the second reuses the first one's shared memory (dead
    after its drain), so the kernel needs one loop's slots, not the sum."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "d_ptr": "*fp16", "c_out": "*fp32",
           "M": "i32:16", "N": "i32:16", "K": "i32:16"}
    ck = two_loops.compile(sig, {"BM": 128, "BN": 128, "BK": 64}, target="cuda:sm_90a", num_warps=8, num_stages=3)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    assert ptx.count("cp.async.wait_all") == 2 and ptx.count("cp.async.cg.shared.global") >= 4
    one_loop = 3 * (128 * 128 + 64 * 128 * 2)  # 3 stages of A [128, 64] and B [64, 128] fp16
    assert one_loop <= ck.metadata["shared"] < 2 * one_loop  # type: ignore[attr-defined]
    assert ck.metadata["n_spills"] == 0 and ck.metadata["ptxas_notes"] == []  # type: ignore[attr-defined]


@compiler.jit
def evict_mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             EVICT_A: tl.constexpr, EVICT_B: tl.constexpr):
    """c = a @ b (row-major, every access masked), each operand loaded with its eviction_policy."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
                    other=0.0, eviction_policy=EVICT_A)
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0, eviction_policy=EVICT_B)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def test_pipelined_operand_copies_carry_no_l2_policy() -> None:
    """The K loop's cp.async copies of a wgmma operand loaded with an eviction_policy are the plain
    copies: `.L2::cache_hint` on cp.async ran into illegal instructions on the H200 (async_copy.py)."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32:16", "N": "i32:16", "K": "i32:16"}
    consts = {"BM": 128, "BN": 128, "BK": 64}
    ck = evict_mm.compile(sig, {**consts, "EVICT_A": "evict_first", "EVICT_B": ""}, target="cuda:sm_90a",
                          num_warps=8, num_stages=3)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    assert "wgmma.mma_async" in ptx and re.search(r"cp\.async\.cg\.shared\.global \[", ptx)
    assert "cache_hint" not in ptx and "createpolicy" not in ptx


@pytest.mark.parametrize("dtype,cfg", [("fp16", (128, 256, 64, 8)), ("bf16", (128, 128, 32, 4))])
def test_tensor_core_kernels_at_llvm_o1_match_o3(dtype: str, cfg: tuple[int, int, int, int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels with tensor-core dots go through LLVM's O1 (half of O3's time): the code ptxas
    makes of it has no more registers than O3's, no spills, and the same tensor-core and memory
    instructions."""
    import compiler.backends.nvidia.backend as nvb
    from compiler.runtime.compiled import forget_compiled

    monkeypatch.setenv("ANVIL_CACHE", "0")  # compiled here, not found compiled by another test
    levels: list[int] = []
    real = nvb.optimise
    monkeypatch.setattr(nvb, "optimise", lambda text, arch, level=3: (levels.append(level), real(text, arch, level))[1])

    def build(level: str | None) -> tuple[int, int, dict[str, int]]:
        if level is None:
            monkeypatch.delenv("ANVIL_LLVM_OPT", raising=False)
        else:
            monkeypatch.setenv("ANVIL_LLVM_OPT", level)
        forget_compiled()
        ck = _compile(dtype, "sm_90a", *cfg)
        ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
        ops = {k: ptx.count(k) for k in ("wgmma.mma_async", "cp.async", "st.global", "bar.sync")}
        return ck.n_regs, ck.n_spills, ops  # type: ignore[attr-defined]

    o1, o3 = build(None), build("3")
    assert levels[0] == 1 and levels[-1] == 3, levels
    assert o1[0] <= o3[0] and o1[1:] == o3[1:] and o1[1] == 0, (o1, o3)
