"""A matmul group -> its kernel: (M..., K) @ (K, N) with the group's elementwise epilogue fused.

One program computes a BLOCK_M x BLOCK_N tile of the product. It walks K in steps of BLOCK_K,
loading a tile of each operand (masked at the edges) and accumulating `tl.dot` in float32, then runs
the epilogue on the tile in registers (any ops of ops.py: a bias, an activation, a residual, a
conversion) and stores the outputs. The tile's rows and columns are the epilogue's domain, so its
inputs load exactly as a rows group loads them (emit.py), broadcast or strided as their layouts say.
The operands are read through their layouts too: a transposed operand is only a stride.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .emit import Kernel, Names, _Writer, finish
from .graph import FULL, Group, Layout, Ref

__all__ = ["emit_matmul", "matmul_config"]


def _pow2_at_most(n: int, cap: int) -> int:
    """The power of two that covers n, between 16 (tl.dot's smallest tile) and cap."""
    p = 16
    while p < n and p < cap:
        p *= 2
    return p


def matmul_config(M: int, N: int, K: int, device: str, itemsize: int = 2) -> tuple[int, int, int, int, int]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) of a matmul kernel whose operands have
    `itemsize` bytes an element.

    GPUs: 128 x 128 tiles over K steps of 64 (32 for 4-byte operands: the same 96 KiB of staged
    operands), one program on 8 warps with 3 stages of operand loads in flight; the CPU: 64 x 64
    tiles over steps of 32 (the operands of one step stay in L1). Small problems get tiles no larger
    than their sizes need."""
    if device == "cpu":
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 1
    else:
        bm, bn, bk, warps, stages = 128, 128, 64 if itemsize <= 2 else 32, 8, 3
    bm, bn, bk = _pow2_at_most(M, bm), _pow2_at_most(N, bn), _pow2_at_most(K, bk)
    if device != "cpu" and bm * bn < 128 * 128:
        warps = 4
    return bm, bn, bk, warps, stages


class _MatmulWriter(_Writer):
    """The K loop, then the epilogue as a rows group's body over the tile (`rows` x `cols`)."""

    def tile_offset(self, k: int, row_index: str, col_index: str) -> str:
        """The offset of operand k's tile: both indices appear, so the tile has its full 2-D shape
        even when a size of 1 (or a broadcast) leaves a dim out of the layout."""
        row, col = self.offset(k, row_index), self.col_offset(k, col_index)
        if row == "0":
            row = f"0 * {row_index}"
        if col == "0":
            col = f"0 * {col_index}"
        return f"{row} + {col}"

    def body(self) -> None:
        g = self.g
        dots = [i for i, op in enumerate(g.ops) if op.name == "dot"]
        if len(dots) != 1:
            raise ValueError(f"a matmul group has one dot op, not {len(dots)}")
        dot = dots[0]
        a, b = g.ops[dot].args
        assert isinstance(a, Ref) and a.input and isinstance(b, Ref) and b.input, "dot operands are inputs"
        pid = ".to(tl.int64)" if self.wide else ""
        self.line(f"rows = tl.program_id(0){pid} * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]")
        self.line(f"cols = tl.program_id(1){pid} * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]")
        self.line("rmask = rows < M")
        self.line("cmask = cols < N")
        self.line("mask = rmask & cmask")
        self.line("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)")
        self.line("for k0 in range(0, K, BLOCK_K):")
        self.line("    kk = k0 + tl.arange(0, BLOCK_K)")
        a_ptr, b_ptr = self.n.inputs[a.index], self.n.inputs[b.index]
        a_off = self.tile_offset(a.index, "rows", "kk[None, :]")
        b_off = self.tile_offset(b.index, "kk[:, None]", "cols")
        self.line(f"    a_tile = tl.load({a_ptr} + {a_off}, mask=rmask & (kk[None, :] < K), other=0.0)")
        self.line(f"    b_tile = tl.load({b_ptr} + {b_off}, mask=(kk[:, None] < K) & cmask, other=0.0)")
        self.line("    acc = tl.dot(a_tile, b_tile, acc)")
        self.names[Ref(dot)] = "acc"
        self.kinds[Ref(dot)] = FULL
        for k in range(len(g.inputs)):
            if k not in (a.index, b.index):
                self.load_row_input(k)
        for i, op in enumerate(g.ops):
            if i != dot:
                self.op(i, op)
        for j, i in enumerate(g.outputs):
            self.store(j, i, "rows * N + cols", self.mask)


def emit_matmul(group: Group, layouts: list[Layout], name: str, *, wide: bool = False,
                names: Names | None = None, comments: Sequence[str] = (),
                values: Mapping[str, int] | None = None) -> Kernel:
    """The kernel of a matmul group. `layouts`: the first operand's over (M..., K), the second's over
    (K, N) and each epilogue input's over (M..., N), all as rows layouts (the last dim is C). Its
    parameters: the pointers, the scalars, M, N, K, the layouts' strides, then BLOCK_M, BLOCK_N and
    BLOCK_K; the outputs are written contiguously as (M, N). `values` writes them into the text
    (emit.emit says how)."""
    if group.kind != "matmul":
        raise ValueError(f"emit_matmul takes a matmul group, not a {group.kind} group")
    w = _MatmulWriter(group, layouts, wide, False, False, names)
    w.body()
    return finish(w, name, ["M", "N", "K"], ["BLOCK_M", "BLOCK_N", "BLOCK_K"], values, comments)
