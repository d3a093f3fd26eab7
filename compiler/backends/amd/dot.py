"""tl.dot on AMDGPU: MFMA for fp16, bf16, int8 and fp8 inputs (mfma.py; fp8 formats the
architecture's instructions do not read are widened to fp16 in registers, `fp8_to_f16`), fused
multiply-adds for the rest (fp32 inputs included: gfx942 has no tf32 MFMA in this slice, so fp32
dots are full fp32 products whatever `input_precision` says).

Operands are staged through LDS: every thread writes its elements of A row-major (M x K) and of B
transposed (N x K, K contiguous), each row padded by 16 bytes so that the 16 rows one instruction
reads start in different banks; after a barrier each lane reads its fragments as one 4-, 8- or
16-byte `ds_read` per fragment (kpl consecutive K elements; f8f6f4's 32 bytes as two). The
accumulator stays in MFMA layout (mfma.accumulator_layout); `plan` makes loop-carried
accumulators start in it, so a K loop converts nothing per iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Op
from ...layouts import LinearLayout
from ..llvm import scalar as S
from ..llvm.fp8 import FORMATS
from ..llvm.scalar import I8, I32
from .atomic import BF16
from .convert import _index, elem_bytes, lds_addr, lds_load, lds_store
from .mfma import BLOCK, Mfma, accumulator_layout, choose, wave_grid
from .tiles import GPUTile, amd_type, num_regs, reg_coords

if TYPE_CHECKING:
    from .lower import AmdLowering

__all__ = ["lower_dot", "plan", "result_layout", "fp8_to_f16"]

_PAD_BYTES = 16


def _mfma_of(lw: AmdLowering, op: Op) -> Mfma | None:
    a, b, acc = op.operands
    shape = T.shape_of(acc.type)
    k = T.shape_of(a.type)[-1]
    if len(shape) != 2:
        return None
    return choose(lw.arch, T.elem_of(a.type), T.elem_of(b.type), T.elem_of(acc.type), (shape[0], shape[1]), k)


def result_layout(lw: AmdLowering, op: Op) -> LinearLayout:
    shape = T.shape_of(op.operands[2].type)
    if _mfma_of(lw, op) is not None:
        return accumulator_layout((shape[0], shape[1]), lw.num_warps)
    return lw.canonical(shape)


def plan(lw: AmdLowering) -> None:
    """Layouts the lowering should give values it creates before their use: a dot's accumulator
    operand its result's layout, and a loop's initial value the layout its carried argument has
    as that accumulator (a splat of zeros is then free in the MFMA layout)."""
    changed = True
    for op in lw.fn.walk():
        if op.opcode == "dot":
            lw.prefer[op.operands[2]] = result_layout(lw, op)
    while changed:
        changed = False
        for op in lw.fn.walk():
            if op.opcode != "for":
                continue
            body = op.regions[0]
            for arg, init, y in zip(body.args[1:], op.operands[3:], body.ops[-1].operands, strict=True):
                lay = lw.prefer.get(arg) or lw.prefer.get(y)
                if lay is not None and init not in lw.prefer:
                    lw.prefer[init] = lay
                    lw.prefer[arg] = lay
                    changed = True


def _stage(lw: AmdLowering, op: Op, kp: int) -> tuple[ir.Value, ir.Value]:
    """A (row-major, row stride kp) and B (transposed, row stride kp) in LDS; returns their bases.
    A batched dot stacks the batch entries: A as (batch * M) rows, B as (batch * N)."""
    a_v, b_v, acc_v = op.operands
    shape = T.shape_of(acc_v.type)
    batch = shape[0] if len(shape) == 3 else 1
    m, n = shape[-2:]
    ea, eb = T.elem_of(a_v.type), T.elem_of(b_v.type)
    a_bytes = -(-batch * m * kp * elem_bytes(ea) // 16) * 16
    area = lw.lds(a_bytes + batch * n * kp * elem_bytes(eb), op)
    b_base = lds_addr(lw, area, ir.Constant(I32, a_bytes), I8)
    xa, xb = lw.tile(a_v), lw.tile(b_v)
    a_strides: tuple[int, ...] = (kp, 1)
    b_strides: tuple[int, ...] = (1, kp)
    if len(shape) == 3:
        a_strides, b_strides = (m * kp, *a_strides), (n * kp, *b_strides)
    lw.barrier()  # the scratch area's earlier readers are done
    for x, base, strides, e in ((xa, area, a_strides, ea), (xb, b_base, b_strides, eb)):
        seen: set[tuple[int, ...]] = set()
        for r in range(num_regs(x.layout)):
            c = reg_coords(x.layout, r)
            if c in seen:  # a register repeating another's element
                continue
            seen.add(c)
            lds_store(lw, base, _index(lw, x.layout, r, strides), x.regs[r], e)
    lw.barrier()
    return area, b_base


def lower_dot(lw: AmdLowering, op: Op) -> None:
    a_v, b_v, acc_v = op.operands
    inst = _mfma_of(lw, op)
    layout = result_layout(lw, op)
    acc = lw.tile(acc_v, layout)
    k = T.shape_of(a_v.type)[-1]
    ea = T.elem_of(a_v.type)
    kp = k + _PAD_BYTES // elem_bytes(ea)
    a_base, b_base = _stage(lw, op, kp)
    if inst is None:
        lw.vals[op.result] = _fma(lw, op, acc, a_base, b_base, k, kp)
    else:
        lw.vals[op.result] = _mfma(lw, op, inst, acc, a_base, b_base, k, kp)


def fp8_to_f16(b: ir.IRBuilder, elem: T.ScalarType, v: ir.Value) -> ir.Value:
    """A vector of fp8 codes (`<n x i8>`) as the fp16 values they encode, exactly (mfma.py's
    docstring says why every fp8 value is an fp16 one). The code's exponent and mantissa, shifted
    to fp16's fields, are an fp16 value 2^(bias - 15) times the fp8 one (subnormals included),
    so one multiplication by a power of two fixes the bias; e5m2 is the top byte of fp16 as it
    is; e5m2fnuz's largest exponent does not fit fp16's field, so its bias is fixed in the integer
    field (exponent - 1 from exponent 2 on, the two lowest exponents becoming fp16 subnormals).
    NaN codes (e4m3fn's 0x7F / 0xFF, the FNUZ formats' 0x80) become fp16 NaN."""
    n = v.type.count
    i16 = ir.IntType(16)
    v16 = ir.VectorType(i16, n)
    h16 = ir.VectorType(ir.HalfType(), n)

    def c(x: int) -> ir.Constant:
        return ir.Constant(v16, [x] * n)

    x = b.zext(v, v16)
    if elem.name == "fp8e5":
        return b.bitcast(b.shl(x, c(8)), h16)
    f = FORMATS[elem.name]
    sign = b.shl(b.and_(x, c(0x80)), c(8))
    em = b.and_(x, c(0x7F))
    if elem.name == "fp8e5b16":
        normal = b.sub(b.shl(em, c(8)), c(0x400))
        field = b.select(b.icmp_unsigned(">=", em, c(8)), normal, b.shl(em, c(7)))
        h = b.bitcast(b.or_(sign, field), h16)
    else:  # e4m3: fp16 exponent field = the code's, so the value is 2^(bias - 15) times the code's
        h = b.bitcast(b.or_(sign, b.shl(em, c(10 - f.man))), h16)
        h = b.fmul(h, ir.Constant(h16, [float(2 ** (15 - f.bias))] * n))
    nan = b.icmp_unsigned("==", em, c(0x7F)) if not f.fnuz else b.icmp_unsigned("==", x, c(0x80))
    return b.select(nan, ir.Constant(h16, [float("nan")] * n), h)


def _fragment(lw: AmdLowering, inst: Mfma, base: ir.Value, row: ir.Value, k0: int, kp: int,
              elem: T.ElemType) -> list[ir.Value]:
    """This lane's operands of the `inst.parts` instructions of one fragment: kpl consecutive K
    elements of row `row` (A's row or B's column) from K offset k0 + kpl * (lane // 16), one LDS
    read (widened fp8 split into the parts' kpl / parts elements each)."""
    b = lw.b
    ety = amd_type(elem)
    kq = b.mul(b.lshr(lw.lane, ir.Constant(I32, 4)), ir.Constant(I32, inst.kpl))
    idx = b.add(b.add(b.mul(row, ir.Constant(I32, kp)), kq), ir.Constant(I32, k0))
    vty = ir.VectorType(ety, inst.kpl)
    v = b.load(lds_addr(lw, base, idx, ety), typ=vty)
    v.align = min(16, inst.kpl * elem_bytes(elem))  # rows are 16-byte aligned (padded by 16 bytes)
    if inst.widen:
        assert isinstance(elem, T.ScalarType)
        h = fp8_to_f16(b, elem, v)
        per = inst.kpl // inst.parts
        if inst.parts == 1:
            return [h]
        return [b.shuffle_vector(h, h, ir.Constant(ir.VectorType(I32, per), list(range(p * per, (p + 1) * per))))
                for p in range(inst.parts)]
    if inst.operand.startswith("<8 x bfloat>"):
        return [b.bitcast(v, ir.VectorType(BF16, 8))]
    if inst.operand == "i64":
        return [b.bitcast(v, ir.IntType(64))]
    if inst.operand in ("<4 x i32>", "<8 x i32>"):
        return [b.bitcast(v, ir.VectorType(I32, inst.kpl // 4))]
    return [v]


def _mfma(lw: AmdLowering, op: Op, inst: Mfma, acc: GPUTile, a_base: ir.Value, b_base: ir.Value, k: int,
          kp: int) -> GPUTile:
    b = lw.b
    a_v, b_v, acc_v = op.operands
    m, n = T.shape_of(acc_v.type)
    wm, wn = wave_grid((m, n), lw.num_warps)
    reps_m, reps_n = m // (BLOCK * wm), n // (BLOCK * wn)
    # this wave's block row and column (uniform: the wave index is in a scalar register)
    w_m = b.and_(lw.warp, ir.Constant(I32, wm - 1))
    w_n = b.and_(b.lshr(lw.warp, ir.Constant(I32, wm.bit_length() - 1)), ir.Constant(I32, wn - 1))
    l16 = b.and_(lw.lane, ir.Constant(I32, BLOCK - 1))
    acc_ty = S.F32 if inst.acc == "float" else I32
    vty = ir.VectorType(acc_ty, 4)
    ea, eb = T.elem_of(a_v.type), T.elem_of(b_v.type)
    regs = list(acc.regs)
    rows = [b.add(b.add(b.mul(w_m, ir.Constant(I32, BLOCK)), l16), ir.Constant(I32, BLOCK * wm * i))
            for i in range(reps_m)]
    cols = [b.add(b.add(b.mul(w_n, ir.Constant(I32, BLOCK)), l16), ir.Constant(I32, BLOCK * wn * j))
            for j in range(reps_n)]
    accs: dict[tuple[int, int], ir.Value] = {}
    for i in range(reps_m):
        for j in range(reps_n):
            r0 = 4 * (i * reps_n + j)
            v: ir.Value = ir.Constant(vty, None)
            for q in range(4):
                v = b.insert_element(v, regs[r0 + q], ir.Constant(I32, q))
            accs[i, j] = v
    name = f"llvm.amdgcn.mfma.{inst.intrinsic}"
    imm = [ir.Constant(I32, x) for x in inst.args]
    for k0 in range(0, k, inst.k):
        fa = [_fragment(lw, inst, a_base, rows[i], k0, kp, ea) for i in range(reps_m)]
        fb = [_fragment(lw, inst, b_base, cols[j], k0, kp, eb) for j in range(reps_n)]
        for i in range(reps_m):
            for j in range(reps_n):
                for p in range(inst.parts):
                    accs[i, j] = lw.intrinsic(name, vty, [fa[i][p], fb[j][p], accs[i, j], *imm])
    for (i, j), v in accs.items():
        r0 = 4 * (i * reps_n + j)
        for q in range(4):
            regs[r0 + q] = b.extract_element(v, ir.Constant(I32, q))
    return GPUTile(acc.layout, regs)


def _fma(lw: AmdLowering, op: Op, acc: GPUTile, a_base: ir.Value, b_base: ir.Value, k: int, kp: int) -> GPUTile:
    """Each thread computes its accumulator elements as K multiply-adds in the accumulator's type,
    reading A's row and B's column from LDS (of its batch entry, for a batched dot)."""
    b = lw.b
    a_v, b_v, acc_v = op.operands
    ea, eb, ec = T.elem_of(a_v.type), T.elem_of(b_v.type), T.elem_of(acc_v.type)
    assert isinstance(ec, T.ScalarType)
    layout = acc.layout
    shape = layout.out_shape
    hw = lw.hw_coords(layout)
    regs: list[ir.Value] = []
    done: dict[tuple[int, ...], int] = {}

    def coord(d: int, c: tuple[int, ...]) -> ir.Value:
        return b.xor(hw[d], ir.Constant(I32, c[d])) if c[d] else hw[d]

    for r in range(num_regs(layout)):
        c = reg_coords(layout, r)
        if c in done:
            regs.append(regs[done[c]])
            continue
        done[c] = r
        row, col = coord(len(shape) - 2, c), coord(len(shape) - 1, c)
        if len(shape) == 3:  # batch entry e: A's rows e * M + row, B's e * N + col
            e = coord(0, c)
            row = b.add(b.mul(e, ir.Constant(I32, shape[1])), row)
            col = b.add(b.mul(e, ir.Constant(I32, shape[2])), col)
        ra, rb = b.mul(row, ir.Constant(I32, kp)), b.mul(col, ir.Constant(I32, kp))
        s = acc.regs[r]
        for kk in range(k):
            x = lds_load(lw, a_base, b.add(ra, ir.Constant(I32, kk)), ea)
            y = lds_load(lw, b_base, b.add(rb, ir.Constant(I32, kk)), eb)
            x, y = S.emit_cast(b, ea, ec, x), S.emit_cast(b, eb, ec, y)
            s = S.BINARY["add"](b, ec, s, S.BINARY["mul"](b, ec, x, y, {"_fmf": lw.fmf}), {"_fmf": lw.fmf})
        regs.append(s)
    return GPUTile(layout, regs)

