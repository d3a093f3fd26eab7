"""Kernels for tests/ir/test_verifier_suite.py (a file of their own: @jit reads their source): one
or more of every kind of op the frontend and the passes make."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def elementwise_k(x_ptr, y_ptr, out_ptr, bits_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0, cache_modifier=".cg", eviction_policy="evict_first")
    z = tl.exp(x) * tl.sqrt(tl.abs(y)) + tl.where(x > y, x - y, -x) / (y + 2.0)
    z = tl.maximum(z, x, propagate_nan=tl.PropagateNan.ALL) + tl.minimum(z, 3.0)
    z = z + tl.math.fma(x, y, z) + tl.extra.libdevice.pow(tl.abs(x), 1.5) + tl.math.ldexp(x, 2)
    z = tl.where(tl.math.isnan(z), 0.0, z)
    tl.store(out_ptr + offs, z.to(tl.float16).to(tl.float32), mask=m, cache_modifier=".cs")
    i = x.to(tl.int32, bitcast=True)
    i = (i << 3) ^ (i >> 2) | (i & 7) + i % 5 + i // 3 + tl.umulhi(i, 12345) + tl.math.popc(i)
    tl.store(bits_ptr + offs, i, mask=m)


@jit
def downcast_k(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz").to(tl.float32))


@jit
def reduce_k(x_ptr, sum_ptr, max_ptr, arg_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r)
    tl.store(sum_ptr + tl.arange(0, M), tl.sum(x, axis=1))
    tl.store(max_ptr + tl.arange(0, N)[None, :], tl.max(x, axis=0, keep_dims=True))
    tl.store(arg_ptr, tl.argmax(tl.reshape(x, [M * N]), axis=0))


@jit
def scan_k(x_ptr, out_ptr, rev_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    tl.store(out_ptr + r, tl.cumsum(x, axis=0))
    tl.store(rev_ptr + r, tl.cumprod(x, axis=0, reverse=True))


@jit
def matmul_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr, BN: tl.constexpr,
             BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :], mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :], mask=(k + rk)[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@jit
def matmul_kmajor_k(a_ptr, b_ptr, c_ptr, K, stride_am, stride_bn, stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr):
    """B given as [N, K] (K contiguous), read transposed; the accumulator chained through the dot."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * stride_bn + (k + rk)[None, :])
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc)


@jit
def block_ptr_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    a_bp = tl.make_block_ptr(a_ptr, (M, K), (stride_am, 1), (pid_m * BM, 0), (BM, BK), (1, 0))
    b_bp = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, 1), (0, pid_n * BN), (BK, BN), (1, 0))
    c_bp = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, 1), (pid_m * BM, pid_n * BN), (BM, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in tl.range(0, K, BK, num_stages=2):
        acc += tl.dot(tl.load(a_bp, boundary_check=(0, 1)), tl.load(b_bp, boundary_check=(0, 1)),
                      input_precision="ieee")
        a_bp = a_bp.advance((0, BK))
        b_bp = tl.advance(b_bp, (BK, 0))
    tl.store(c_bp, acc, boundary_check=(0, 1))


@jit
def descriptor_k(x_ptr, out_ptr, R, C, ROWS: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_r, pid_c = tl.program_id(0), tl.program_id(1)
    xd = tl.make_tensor_descriptor(x_ptr, [R, C], [C, 1], [ROWS, BLOCK_C])
    od = tl.make_tensor_descriptor(out_ptr, [1, C], [C, 1], [1, BLOCK_C])
    x = xd.load([pid_r * ROWS, pid_c * BLOCK_C])
    od.atomic_max([0, pid_c * BLOCK_C], tl.max(x, axis=0, keep_dims=True))


@jit
def atomics_k(x_ptr, f_ptr, i_ptr, u_ptr, lock_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.atomic_add(f_ptr + offs, x, mask=m)
    tl.atomic_max(f_ptr + BLOCK + offs, x, mask=m, sem="relaxed", scope="cta")
    tl.atomic_min(i_ptr + offs, offs, mask=m)
    tl.atomic_or(i_ptr + BLOCK + offs, offs)
    tl.atomic_max(u_ptr + offs, offs.to(tl.uint32))
    old = tl.atomic_cas(lock_ptr, 0, 1, sem="acquire")
    tl.atomic_xchg(lock_ptr, old, sem="release")


@jit
def control_k(x_ptr, out_ptr, n, STEPS: tl.constexpr):
    i = tl.program_id(0)
    acc = 0.0
    k = 0
    while k < n:
        v = tl.load(x_ptr + k)
        if v > 0:
            acc += v
        else:
            acc -= v
        k += 1
    for j in range(n, 0, -1):
        if j == 3:
            break
        acc = acc * 0.5 + j
    for s in tl.static_range(STEPS):
        acc += s
    tl.store(out_ptr + i, acc)


@jit
def volatile_k(flag_ptr, out_ptr):
    v = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr, v + tl.num_programs(0))


@jit
def misc_k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.debug_barrier()
    y = tl.sort(x, descending=True)
    h = tl.histogram(y & 15, 16)
    tl.store(out_ptr + tl.arange(0, 16), h)
    a, b = tl.split(tl.join(x, y))
    tl.store(out_ptr + 16 + offs, tl.trans(tl.reshape(a + b, [2, BLOCK // 2])).reshape(BLOCK), mask=offs < n)


# name -> (kernel, signature, constexprs, debug, targets)
CPU_GPU = ("cpu", "cuda:sm_90a")
CASES = {
    "elementwise": (elementwise_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "bits_ptr": "*i32",
                                    "n": "i32"}, {"BLOCK": 256}, False, CPU_GPU),
    "downcast": (downcast_k, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 128}, False, CPU_GPU),
    "reduce": (reduce_k, {"x_ptr": "*fp32", "sum_ptr": "*fp32", "max_ptr": "*fp32", "arg_ptr": "*i32"},
               {"M": 16, "N": 32}, False, CPU_GPU),
    "scan": (scan_k, {"x_ptr": "*i32", "out_ptr": "*i32", "rev_ptr": "*i32"}, {"N": 128}, False, CPU_GPU),
    "matmul_fp16": (matmul_k, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
                               "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"},
                    {"BM": 64, "BN": 64, "BK": 32}, False, ("cpu", "cuda:sm_80", "cuda:sm_90a")),
    "matmul_fp32": (matmul_k, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                               "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"},
                    {"BM": 32, "BN": 32, "BK": 16}, False, CPU_GPU),
    "matmul_kmajor": (matmul_kmajor_k, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32",
                                        "stride_am": "i32:16", "stride_bn": "i32:16", "stride_cm": "i32:16"},
                      {"BM": 64, "BN": 64, "BK": 32}, False, ("cpu", "cuda:sm_80", "cuda:sm_90a")),
    "block_ptr": (block_ptr_k, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
                                "K": "i32", "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"},
                  {"BM": 64, "BN": 64, "BK": 32}, False, CPU_GPU),
    "descriptor": (descriptor_k, {"x_ptr": "*fp32", "out_ptr": "*fp32", "R": "i32", "C": "i32"},
                   {"ROWS": 8, "BLOCK_C": 16}, False, CPU_GPU),
    "atomics": (atomics_k, {"x_ptr": "*fp32", "f_ptr": "*fp32", "i_ptr": "*i32", "u_ptr": "*u32", "lock_ptr": "*i32",
                            "n": "i32"}, {"BLOCK": 64}, False, CPU_GPU),
    "control": (control_k, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"STEPS": 3}, False, CPU_GPU),
    "volatile": (volatile_k, {"flag_ptr": "*i32", "out_ptr": "*i32"}, {}, False, CPU_GPU),
    "misc": (misc_k, {"x_ptr": "*i32", "out_ptr": "*i32", "n": "i32"}, {"BLOCK": 64}, False, CPU_GPU),
}
