"""Kernels using the shape, sort, histogram, debug and inline-asm ops (shared by the PTX and GPU tests)."""
# ruff: noqa
import compiler.language as tl
from compiler import jit


@jit
def join_split_k(x_ptr, y_ptr, a_ptr, b_ptr, j_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    j = tl.join(x, y)  # (M, N, 2)
    j2 = tl.arange(0, 2)[None, None, :]
    tl.store(j_ptr + r[:, :, None] * 2 + j2, j)
    a, b = tl.split(tl.join(x * 2, y + 1))
    tl.store(a_ptr + r, a)
    tl.store(b_ptr + r, b)


@jit
def interleave_k(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + tl.arange(0, 2 * N), tl.interleave(tl.load(x_ptr + r), tl.load(y_ptr + r)))


@jit
def split_loaded_k(x_ptr, a_ptr, b_ptr, N: tl.constexpr):
    # a (N, 2) tile loaded directly (not built by join): split must convert it
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r[:, None] * 2 + tl.arange(0, 2)[None, :])
    a, b = tl.split(x)
    tl.store(a_ptr + r, a)
    tl.store(b_ptr + r, b)


@jit
def cat_k(x_ptr, y_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    c = tl.cat(tl.load(x_ptr + r), tl.load(y_ptr + r), can_reorder=True)
    r2 = tl.arange(0, 2 * M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + r2, c)


@jit
def gather_k(x_ptr, idx_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr):
    r = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r)
    i = tl.load(idx_ptr + r)
    tl.store(out_ptr + r, tl.gather(x, i, AXIS))


@jit
def flip_k(x_ptr, out_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.flip(tl.load(x_ptr + r)))


@jit
def histogram_k(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BINS: tl.constexpr, MASKED: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    if MASKED:
        h = tl.histogram(x, BINS, mask=m)
    else:
        h = tl.histogram(x, BINS)
    tl.store(out_ptr + tl.program_id(0) * BINS + tl.arange(0, BINS), h)


@jit
def sort_k(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    r = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + r, tl.sort(tl.load(x_ptr + r), descending=DESC))


@jit
def sort1d_k(x_ptr, out_ptr, N: tl.constexpr, DESC: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(out_ptr + r, tl.sort(tl.load(x_ptr + r), descending=DESC))


@jit
def print_k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_print("x=", x)
    tl.device_print("n ", n)
    tl.device_print("hex ", x, hex=True)
    tl.device_print("pid only")


@jit
def assert_k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_assert(x >= 0, "x must be non-negative")
    tl.device_assert(n > 0, "n must be positive")


@jit
def asm_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, y, mask=m)


@jit
def asm_packed_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    # four uint8 per 32-bit register: and each byte with 0x1f, then shift it left by 3
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F;\n\tshl.b32 $0, $0, 3;", "=r,r", [x],
                                  dtype=tl.uint8, is_pure=True, pack=4)
    tl.store(y_ptr + offs, y, mask=m)


@jit
def asm_multi_k(x_ptr, y_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    a, b = tl.inline_asm_elementwise("add.f32 $0, $2, $3;\n\tsub.f32 $1, $2, $3;", "=f,=f,f,f", [x, y],
                                     dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
    tl.store(a_ptr + offs, a, mask=m)
    tl.store(b_ptr + offs, b, mask=m)


@jit
def asm_effect_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    # results unused: the two side-effecting asms stay (both: no CSE), the pure one goes
    tl.inline_asm_elementwise("membar.gl;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    tl.inline_asm_elementwise("membar.gl;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=False, pack=1)
    tl.inline_asm_elementwise("membar.cta;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(y_ptr + offs, x, mask=m)


@jit
def warp_rows_k(x_ptr, y_ptr, NW: tl.constexpr, KW: tl.constexpr):
    # a [NW, 32] tile, one warp per row: indices of the warp's group (w // KW) and part (w % KW)
    # recomputed in the tile's layout, not converted through shared memory
    w = tl.arange(0, NW)[:, None]
    lane = tl.arange(0, 32)[None, :]
    p = x_ptr + ((w // KW) * 64 + (w % KW) * 32 + lane)
    tl.store(y_ptr + (w * 32 + lane), tl.load(p) + w // KW)


@jit
def ptr_cast_k(x_ptr, y_ptr, BLOCK: tl.constexpr):
    # bf16 pairs read as int32 words: the cast keeps the 16-byte alignment, so 4 words per vector
    w = x_ptr.to(tl.pointer_type(tl.int32))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(w + offs))


@jit
def split_join_k(x_ptr, y_ptr, a_ptr, b_ptr, N: tl.constexpr):
    # join then split moves no data: no shared memory, no barrier
    r = tl.arange(0, N)
    a, b = tl.split(tl.join(tl.load(x_ptr + r), tl.load(y_ptr + r)))
    tl.store(a_ptr + r, b)
    tl.store(b_ptr + r, a)


# name -> (kernel, signature, constexprs, debug); every case compiles for every tested architecture
CASES = {
    "join_split": (join_split_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "a_ptr": "*fp32", "b_ptr": "*fp32",
                                  "j_ptr": "*fp32"}, {"M": 8, "N": 32}, False),
    "interleave": (interleave_k, {"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16"}, {"N": 64}, False),
    "split_loaded": (split_loaded_k, {"x_ptr": "*i32", "a_ptr": "*i32", "b_ptr": "*i32"}, {"N": 64}, False),
    "split_join": (split_join_k, {"x_ptr": "*i64", "y_ptr": "*i64", "a_ptr": "*i64", "b_ptr": "*i64"},
                   {"N": 256}, False),
    "cat": (cat_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}, {"M": 16, "N": 16}, False),
    "gather0": (gather_k, {"x_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32"},
                {"M": 16, "N": 32, "AXIS": 0}, False),
    "gather1": (gather_k, {"x_ptr": "*bf16", "idx_ptr": "*i64", "out_ptr": "*bf16"},
                {"M": 16, "N": 32, "AXIS": 1}, False),
    "flip": (flip_k, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"N": 128}, False),
    "histogram": (histogram_k, {"x_ptr": "*i32", "out_ptr": "*i32", "n": "i32"},
                  {"BLOCK": 1024, "BINS": 64, "MASKED": True}, False),
    "histogram_u8": (histogram_k, {"x_ptr": "*u8", "out_ptr": "*i32", "n": "i32"},
                     {"BLOCK": 512, "BINS": 256, "MASKED": False}, False),
    "sort2d": (sort_k, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"M": 4, "N": 256, "DESC": False}, False),
    "sort1d": (sort1d_k, {"x_ptr": "*i32", "out_ptr": "*i32"}, {"N": 1024, "DESC": True}, False),
    "sort_fp16": (sort1d_k, {"x_ptr": "*fp16", "out_ptr": "*fp16"}, {"N": 64, "DESC": False}, False),
    "print": (print_k, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}, False),
    "assert": (assert_k, {"x_ptr": "*i32", "n": "i32"}, {"BLOCK": 256}, True),
    "asm": (asm_k, {"x_ptr": "*i32", "y_ptr": "*i32", "n": "i32"}, {"BLOCK": 1024}, False),
    "asm_packed": (asm_packed_k, {"x_ptr": "*u8", "y_ptr": "*u8", "n": "i32"}, {"BLOCK": 1024}, False),
    "asm_effect": (asm_effect_k, {"x_ptr": "*i32", "y_ptr": "*i32", "n": "i32"}, {"BLOCK": 256}, False),
    "warp_rows": (warp_rows_k, {"x_ptr": "*i32", "y_ptr": "*i32"}, {"NW": 8, "KW": 4}, False),
    "ptr_cast": (ptr_cast_k, {"x_ptr": "*bf16", "y_ptr": "*i32"}, {"BLOCK": 512}, False),
    "asm_multi": (asm_multi_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "a_ptr": "*fp32", "b_ptr": "*fp32",
                                "n": "i32"}, {"BLOCK": 1024}, False),
}
