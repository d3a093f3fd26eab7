"""fp8 tl.dot on the AMD backend (device-free): the instruction chosen per architecture and pair
of fp8 formats, each intrinsic compiled alone to the instruction it names, the fp16 widening of
the formats an architecture's instructions do not read (run on the host CPU for all 256 codes),
a lane-by-lane simulation of the MFMA sequence the lowering issues, and the assembly of fp8 dot
kernels (the quantization GEMM included) for gfx942 and gfx950."""

from __future__ import annotations

import ctypes
import itertools
import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

from compiler.backends.amd.codegen import TRIPLE, target_machine
from compiler.backends.amd.dot import fp8_to_f16
from compiler.backends.amd.mfma import BLOCK, NATIVE_FP8, Mfma, accumulator_layout, choose, wave_grid
from compiler.backends.amd.toolchain import find_linker
from compiler.backends.llvm.fp8 import fp8_value
from compiler.ir import types as T
from compiler.layouts import LANE, REGISTER, WARP
from tests.compiler.test_amd_backend import ARCHS, _check_code_object, _check_common
from tests.compiler.test_amd_dot import mfma_d, mm

FP8 = ("fp8e4nv", "fp8e5", "fp8e4b8", "fp8e5b16")
_TY = {name: getattr(T, name) for name in FP8}


def _native(arch: str, a: str, b: str) -> bool:
    return a in NATIVE_FP8[arch] and b in NATIVE_FP8[arch]


def test_choice() -> None:
    f32 = T.fp32
    for arch, a, b in itertools.product(ARCHS, FP8, FP8):
        inst = choose(arch, _TY[a], _TY[b], f32, (64, 64), 64)
        assert inst is not None
        if _native(arch, a, b):
            assert inst.intrinsic == f"f32.16x16x32.{NATIVE_FP8[arch][a]}.{NATIVE_FP8[arch][b]}"
            assert (inst.k, inst.operand, inst.widen) == (32, "i64", False)
        elif arch == "gfx950":
            assert (inst.intrinsic, inst.k, inst.parts, inst.widen) == ("f32.16x16x32.f16", 32, 1, True)
        else:
            assert (inst.intrinsic, inst.k, inst.parts, inst.widen) == ("f32.16x16x16f16", 32, 2, True)
    e4, e5, e4z, e5z = (_TY[n] for n in FP8)
    # gfx950: the double-K f8f6f4 form when K allows, its formats as cbsz / blgp
    wide = choose("gfx950", e5, e4, f32, (16, 16), 256)
    assert wide is not None and wide.intrinsic.startswith("scale.f32.16x16x128.f8f6f4") and wide.k == 128
    assert wide.args == (1, 0, 0, 0, 0, 0)
    # K a multiple of 16 only: widened, one fp16 instruction per fragment of 4
    for arch in ARCHS:
        short = choose(arch, e4z, e4z, f32, (16, 16), 48)
        assert short is not None and (short.intrinsic, short.k, short.parts) == ("f32.16x16x16f16", 16, 1)
        assert choose(arch, e4, e4, f32, (16, 16), 8) is None
        assert choose(arch, e4, e4, T.fp16, (16, 16), 32) is None  # an fp16 accumulator: FMA
        assert choose(arch, e4, e4, f32, (8, 16), 32) is None
        assert choose(arch, e4, T.fp16, f32, (16, 16), 32) is None


def _instructions() -> list[tuple[str, Mfma, str]]:
    """(arch, instruction, the v_mfma it must select) for every form the fp8 path issues."""
    out = []
    for arch, a, b in itertools.product(ARCHS, FP8, FP8):
        for k in (32, 128):
            inst = choose(arch, _TY[a], _TY[b], T.fp32, (16, 16), k)
            assert inst is not None
            if inst.widen:
                want = "v_mfma_f32_16x16x32_f16" if arch == "gfx950" else "v_mfma_f32_16x16x16_f16"
            elif inst.k == 128:
                want = "v_mfma_f32_16x16x128_f8f6f4"
            else:
                want = f"v_mfma_f32_16x16x32_{NATIVE_FP8[arch][a]}_{NATIVE_FP8[arch][b]}"
            out.append((arch, inst, want))
    return sorted(set(out), key=str)


@pytest.mark.parametrize(("arch", "inst", "want"), _instructions(), ids=lambda x: getattr(x, "intrinsic", x))
def test_intrinsic_selects_the_instruction(arch: str, inst: Mfma, want: str) -> None:
    """The intrinsic with the operand types dot.py gives it, alone in a kernel, is the instruction
    (an unknown llvm.amdgcn name would be an external call instead; a known one with the wrong
    operand types fails to verify); for f8f6f4, the unscaled form with the format modifiers."""
    name = f"llvm.amdgcn.mfma.{inst.intrinsic}"
    imm = ", ".join(f"i32 {x}" for x in inst.args)
    text = f"""target triple = "{TRIPLE}"
declare <4 x float> @"{name}"({inst.operand}, {inst.operand}, <4 x float>{", i32" * len(inst.args)})
define amdgpu_kernel void @k(ptr addrspace(1) %p) {{
  %a = load {inst.operand}, ptr addrspace(1) %p
  %q = getelementptr i8, ptr addrspace(1) %p, i64 64
  %b = load {inst.operand}, ptr addrspace(1) %q
  %c = load <4 x float>, ptr addrspace(1) %p
  %r = call <4 x float> @"{name}"({inst.operand} %a, {inst.operand} %b, <4 x float> %c, {imm})
  store <4 x float> %r, ptr addrspace(1) %p
  ret void
}}"""
    mod = llvm.parse_assembly(text, context=llvm.create_context())
    mod.verify()
    asm = target_machine(arch).emit_assembly(mod)
    lines = [ln.strip() for ln in asm.splitlines() if "v_mfma" in ln]
    assert len(lines) == 1 and lines[0].split()[0] == want, lines
    if inst.k == 128:
        fmt = {0: "", 1: "cbsz:1"}[inst.args[0]]
        assert fmt in lines[0] and ("blgp:1" in lines[0]) == (inst.args[1] == 1)


def _widened_table(name: str) -> np.ndarray:
    """fp8_to_f16 of every code of format `name`, run on the host CPU, as float64."""
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.PointerType(), ir.PointerType()]), "widen")
    b = ir.IRBuilder(fn.append_basic_block())
    v = b.load(fn.args[0], typ=ir.VectorType(ir.IntType(8), 256), align=1)
    h = fp8_to_f16(b, _TY[name], v)
    b.store(b.bitcast(h, ir.VectorType(ir.IntType(16), 256)), fn.args[1], align=1)
    b.ret_void()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    parsed = llvm.parse_assembly(str(mod))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, tm)
    engine.finalize_object()
    codes = (ctypes.c_uint8 * 256)(*range(256))
    out = (ctypes.c_uint16 * 256)()
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("widen"))(
        ctypes.addressof(codes), ctypes.addressof(out))
    return np.frombuffer(bytes(out), dtype=np.float16).astype(np.float64)


@pytest.mark.parametrize("name", FP8)
def test_widening_is_exact(name: str) -> None:
    """Every code's fp16 is its value: finite values to the bit (signed zeros included), e5m2's
    infinities as infinities, NaN codes as NaN."""
    got = _widened_table(name)
    for code in range(256):
        want = fp8_value(code, _TY[name])
        if np.isnan(want):
            assert np.isnan(got[code]), (name, hex(code))
        else:
            assert got[code] == want and np.signbit(got[code]) == np.signbit(want), (name, hex(code), got[code])


def simulate(inst: Mfma, a: np.ndarray, b: np.ndarray, warps: int) -> np.ndarray:
    """The tile D = A @ B as the lowering computes it, lane by lane: each wave reads its fragments
    the way dot._fragment addresses LDS (A row-major, B transposed, kpl consecutive K values at
    kpl * (lane // 16)), splits them into `parts` instructions, each instruction acts as the ISA
    defines it (lane l's u-th value of a part is A[l % 16][kpi * (l // 16) + u], kpi its values a
    lane; register v of lane l accumulates D[4 (l // 16) + v][l % 16]), and the accumulator's
    registers land where accumulator_layout says they are."""
    m, k = a.shape
    n = b.shape[1]
    wm, wn = wave_grid((m, n), warps)
    reps_m, reps_n = m // (BLOCK * wm), n // (BLOCK * wn)
    layout = accumulator_layout((m, n), warps)
    bt = b.T
    kpl, per = inst.kpl, inst.kpl // inst.parts
    out = np.full((m, n), np.nan)
    for w in range(warps):
        w_m, w_n = w & (wm - 1), (w >> (wm.bit_length() - 1)) & (wn - 1)
        rows = [w_m * BLOCK + BLOCK * wm * i for i in range(reps_m)]
        cols = [w_n * BLOCK + BLOCK * wn * j for j in range(reps_n)]
        acc = {(i, j): np.zeros((64, 4)) for i in range(reps_m) for j in range(reps_n)}
        for k0 in range(0, k, inst.k):
            for (i, j), d in acc.items():
                for p in range(inst.parts):
                    fa = [a[rows[i] + lane % 16, k0 + kpl * (lane // 16) + p * per:][:per] for lane in range(64)]
                    fb = [bt[cols[j] + lane % 16, k0 + kpl * (lane // 16) + p * per:][:per] for lane in range(64)]
                    for lane, v in itertools.product(range(64), range(4)):
                        r, c = mfma_d(lane, v)
                        d[lane, v] += sum(float(np.dot(fa[r + 16 * g], fb[c + 16 * g])) for g in range(4))
        for (i, j), d in acc.items():
            for lane, v in itertools.product(range(64), range(4)):
                r, c = layout.apply({REGISTER: 4 * (i * reps_n + j) + v, LANE: lane, WARP: w})
                br, bc = mfma_d(lane, v)
                assert (r - rows[i], c - cols[j]) == (br, bc)
                out[r, c] = d[lane, v]
    return out


@pytest.mark.parametrize(("arch", "ta", "tb", "shape", "k", "warps"), [
    ("gfx942", "fp8e4b8", "fp8e5b16", (32, 64), 64, 4),  # native
    ("gfx942", "fp8e4nv", "fp8e5", (64, 32), 64, 2),  # widened, two fp16 instructions a fragment
    ("gfx942", "fp8e4nv", "fp8e4nv", (16, 32), 48, 2),  # widened, K a multiple of 16 only
    ("gfx950", "fp8e5", "fp8e4nv", (32, 32), 256, 4),  # f8f6f4, 32 values a lane
    ("gfx950", "fp8e4b8", "fp8e4b8", (32, 16), 64, 1),  # widened, one x32 fp16 instruction
])
def test_simulated_dot(arch: str, ta: str, tb: str, shape: tuple[int, int], k: int, warps: int) -> None:
    """Random finite fp8 codes through the simulated instruction sequence give A @ B (float64
    sums of exact products, so only the order of additions differs)."""
    inst = choose(arch, _TY[ta], _TY[tb], T.fp32, shape, k)
    assert inst is not None
    rng = np.random.default_rng(0)

    def values(name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        table = np.array([fp8_value(c, _TY[name]) for c in range(256)])
        finite = np.flatnonzero(np.isfinite(table))
        codes = rng.choice(finite, size=(rows, cols))
        seen = _widened_table(name)[codes] if inst.widen else table[codes]  # what the instruction reads
        return table[codes], seen

    a, a_seen = values(ta, shape[0], k)
    b, b_seen = values(tb, k, shape[1])
    got = simulate(inst, a_seen, b_seen, warps)
    np.testing.assert_allclose(got, a @ b, rtol=1e-12, atol=1e-30)


_EXPECT = {  # (arch, a, b) -> the instruction for K = 64
    ("gfx942", "fp8e4b8", "fp8e4b8"): "v_mfma_f32_16x16x32_fp8_fp8",
    ("gfx942", "fp8e5b16", "fp8e4b8"): "v_mfma_f32_16x16x32_bf8_fp8",
    ("gfx942", "fp8e4nv", "fp8e4nv"): "v_mfma_f32_16x16x16_f16",
    ("gfx942", "fp8e5", "fp8e4nv"): "v_mfma_f32_16x16x16_f16",
    ("gfx950", "fp8e4nv", "fp8e4nv"): "v_mfma_f32_16x16x32_fp8_fp8",
    ("gfx950", "fp8e5", "fp8e4nv"): "v_mfma_f32_16x16x32_bf8_fp8",
    ("gfx950", "fp8e4nv", "fp8e5"): "v_mfma_f32_16x16x32_fp8_bf8",
    ("gfx950", "fp8e5", "fp8e5"): "v_mfma_f32_16x16x32_bf8_bf8",
    ("gfx950", "fp8e4b8", "fp8e4b8"): "v_mfma_f32_16x16x32_f16",
}


@pytest.mark.parametrize(("arch", "ta", "tb"), sorted(_EXPECT))
def test_fp8_dot_assembly(arch: str, ta: str, tb: str) -> None:
    """An fp8 x fp8 -> fp32 K loop (64 x 64 tile, K step 64, 4 waves): only the expected MFMA,
    one per 16 x 16 block of a wave and 16 or 32 K, 8-byte fragment reads, no scratch, and a
    code object ld.lld links."""
    ck = mm.compile({"a_ptr": f"*{ta}", "b_ptr": f"*{tb}", "c_ptr": "*fp32", "K": "i32"},
                    {"BM": 64, "BN": 64, "BK": 64}, target=f"amd:{arch}", num_warps=4)
    asm = _check_common(ck, arch)
    instr = _EXPECT[arch, ta, tb]
    assert set(re.findall(r"v_mfma_\w+", asm)) == {instr}
    wm, wn = wave_grid((64, 64), 4)
    k_i = int(re.search(r"16x16x(\d+)", instr).group(1))  # type: ignore[union-attr]
    assert asm.count(instr) == (64 // 16 // wm) * (64 // 16 // wn) * (64 // k_i)
    assert re.search(r"ds_read_b64|ds_read2_b64", asm)
    assert ck.metadata["shared"] >= 2 * 64 * (64 + 16)
    if "f16" in instr:  # fp16 denormals kept: the widened e5m2 subnormals are fp16 subnormals
        assert re.search(r"\.amdhsa_float_denorm_mode_16_64\s+3", asm)
    if find_linker() is not None:
        _check_code_object(ck, arch)


def test_f8f6f4_dot_assembly() -> None:
    """gfx950, K step 128: the unscaled 16x16x128 f8f6f4 instruction, A's format e5m2 (cbsz:1),
    B's e4m3 (no blgp); 32 fp8 values a lane read as two 16-byte LDS reads."""
    ck = mm.compile({"a_ptr": "*fp8e5", "b_ptr": "*fp8e4nv", "c_ptr": "*fp32", "K": "i32"},
                    {"BM": 32, "BN": 64, "BK": 128}, target="amd:gfx950", num_warps=4)
    asm = _check_common(ck, "gfx950")
    lines = [ln.split() for ln in asm.splitlines() if "v_mfma" in ln]
    wm, wn = wave_grid((32, 64), 4)
    assert len(lines) == (32 // 16 // wm) * (64 // 16 // wn)
    assert all(ln[0] == "v_mfma_f32_16x16x128_f8f6f4" and "cbsz:1" in ln and not any("blgp" in x for x in ln)
               for ln in lines)
    assert "ds_read_b128" in asm
    if find_linker() is not None:
        _check_code_object(ck, "gfx950")


_GEMM_SIG = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "sa_ptr": "*fp32", "sb_ptr": "*fp32",
             "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32",
             "stride_sam": "i32", "stride_sak": "i32", "stride_sbn": "i32", "stride_sbk": "i32"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("fmt", "scale", "block_k"), [("fp8e4nv", 3, 128), ("fp8e4b8", 1, 64)])
def test_fp8_gemm_kernel(arch: str, fmt: str, scale: int, block_k: int) -> None:
    """tools/kernels/fp8.py's GEMM (B transposed in the kernel): DeepSeek-V3 block scales on e4m3fn
    and row scales on e4m3fnuz, each on its architecture's fp8 instruction or widened."""
    from tools.kernels.fp8 import fp8_gemm_kernel

    sig = dict(_GEMM_SIG, a_ptr=f"*{fmt}", b_ptr=f"*{fmt}")
    ck = fp8_gemm_kernel.compile(sig, {"SCALE": scale, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": block_k},
                                 target=f"amd:{arch}", num_warps=4)
    asm = _check_common(ck, arch)
    native = fmt in NATIVE_FP8[arch]
    if native:
        want = "v_mfma_f32_16x16x128_f8f6f4" if block_k == 128 and arch == "gfx950" else "v_mfma_f32_16x16x32_fp8_fp8"
    else:
        want = "v_mfma_f32_16x16x32_f16" if arch == "gfx950" else "v_mfma_f32_16x16x16_f16"
    assert set(re.findall(r"v_mfma_\w+", asm)) == {want}
    if find_linker() is not None:
        _check_code_object(ck, arch)
