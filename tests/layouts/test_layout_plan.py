"""The NVIDIA backend's layout assignment (compiler/backends/nvidia/layout_plan.py): every tile
value's layout is planned before code generation, shown in the kernel's Tile IR artifact
(`asm["tir"]`), and the lowering keeps to it (checked after every NVIDIA compile of the test suite:
ANVIL_VERIFY_IR=1, tests/conftest.py). No GPU needed: the kernels are compiled for sm_90a."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.backends.nvidia.layout_plan import SHARED, check_plan, layout_text, print_layouts
from compiler.errors import UnsupportedError
from compiler.layouts import LinearLayout, dim_names, slice_layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import nv_target_cases  # noqa: E402

CASES = nv_target_cases.all_cases()


def _tir(name: str, arch: str = "sm_90a") -> str:
    fn, sig, consts, warps, stages, tags = CASES[name]
    ck = fn.compile(sig, consts, target=f"cuda:{arch}", num_warps=warps, num_stages=stages, debug="debug" in tags)
    text: str = ck.asm["tir"]
    return text


def _parse_layout(text: str) -> LinearLayout:
    """The inverse of layout_text."""
    dims, shape_s = text.split(" -> ")
    shape = [int(x) for x in shape_s.strip("[]").split(",")]
    bases: dict[str, list[tuple[int, ...]]] = {}
    for name, body in re.findall(r"(\w+)=\[([^\]]*)\]", dims):
        bases[name] = [tuple(int(c) for c in b.split(",")) for b in re.findall(r"\(([^)]*)\)", body)]
    return LinearLayout.from_bases(bases, dict(zip(dim_names(len(shape)), shape, strict=True)))


class Annotated:
    """The layouts of a printed Tile IR: `#Ln` definitions and each value's annotation."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.defs = {m[0]: _parse_layout(m[1]) for m in re.findall(r"^(#L\d+) = (.*)$", text, re.M)}
        self.of: dict[str, str] = {}
        for m in re.finditer(r"(%\w+): (tile<[^>]*>) (#L\d+|shared)", text):  # block arguments
            self.of[m[1]] = m[3]
        for line in text.splitlines():
            m = re.match(r"\s*(%[\w, %]+?) = .* : (.*)$", line)
            if m and not line.rstrip().endswith("{"):
                names = [n.strip() for n in m[1].split(",")]
                notes = re.findall(r"tile<[^>]*> (#L\d+|shared)", m[2])
                if len(notes) == len(names):
                    self.of.update(zip(names, notes, strict=True))

    def layout(self, value: str) -> LinearLayout:
        return self.defs[self.of[value]]


def test_every_tile_value_of_a_pipelined_gemm_has_its_layout_in_the_artifact() -> None:
    text = _tir("gemm_fp16")
    tiles = [ln for ln in text.splitlines() if re.search(r": tile<[^>]*>$", ln)]
    assert not tiles, f"tile values without a layout: {tiles[:3]}"
    assert "async_copy" in text and "async_wait" in text  # the Tile IR lowered: the pipeline's copies
    assert re.search(r"= async_wait .* : tile<\w+> shared", text)  # wgmma reads the slots in place
    assert re.search(r"^#L\d+ = register=\[.*\] lane=\[.*\] warp=\[.*\] -> \[\d+", text, re.M)


@pytest.mark.parametrize("name", ["gemm_fp16", "attention_fwd", "persistent_matmul", "gemm_fp8e4nv"])
def test_a_loop_carries_each_dot_accumulator_in_the_dot_s_own_layout(name: str) -> None:
    """No data moves between a dot's result and the next iteration's accumulator (a loop-carried
    accumulator is planned in the dot's layout before the loop is lowered)."""
    text = _tir(name)
    dots = re.findall(r"(%\w+) = dot .*: (tile<[^>]*>) (#L\d+)$", text, re.M)
    args = re.findall(r"(%\w+): (tile<[^>]*>) (#L\d+)", " ".join(re.findall(r"\^\((.*)\):", text)))
    pairs = [(result, arg, lay, arg_lay) for result, ty, lay in dots for arg, arg_ty, arg_lay in args if arg_ty == ty]
    assert pairs, f"{name}: no loop carries a value of a dot's type"
    for result, arg, lay, arg_lay in pairs:
        assert arg_lay == lay, f"{name}: {arg} is carried in {arg_lay}, the dot {result} is in {lay}"


def test_attention_carries_its_row_statistics_in_the_dot_layout_sliced() -> None:
    text = _tir("attention_fwd")
    ann = Annotated(text)
    loop_args = re.search(r"\^\(%start_n: i32, (.*)\):", text)
    assert loop_args is not None
    qk = re.search(r"%qk = dot .* (#L\d+)$", text, re.M)
    assert qk is not None
    dot = ann.defs[qk[1]]
    rows = [ann.layout(n) for n, t in re.findall(r"(%\w+): tile<(\d+)xfp32>", loop_args[1])]
    assert rows, "attention carries m_i and l_i"
    for lay in rows:
        assert lay == slice_layout(dot, 1)


def test_the_canonical_layout_is_as_wide_as_the_loads_allow() -> None:
    """vector_add's 1-D tiles: four consecutive fp32 per thread (one 16-byte load)."""
    ann = Annotated(_tir("bench_add_kernel"))
    loads = re.findall(r"(%\w+) = load ", ann.text)
    assert loads
    for v in loads:
        regs = ann.layout(v).bases("register")
        assert list(regs[:2]) == [(1,), (2,)], f"{v}: {layout_text(ann.layout(v))}"


def test_the_artifact_of_every_case_annotates_every_tile() -> None:
    for name in ("op_join_split", "op_sort2d", "op_gather1", "op_histogram", "op_asm_packed", "cumsum",
                 "layer_norm_fwd", "block_ptr_transpose", "op_cat"):
        text = _tir(name)
        bare = [ln for ln in text.splitlines() if re.search(r"tile<[^>]*>(,|\)|$)", ln)
                and not ln.lstrip().startswith("^")]
        assert not bare, f"{name}: {bare[:2]}"


class _FakeLowering:
    def __init__(self, vals: dict[Any, Any]) -> None:
        self.vals = vals
        self.name = "k"


def test_the_check_names_a_tile_outside_its_plan() -> None:
    """check_plan fails loudly when the lowering and the plan disagree (a compiler bug)."""
    from compiler.backends.nvidia.tiles import GPUTile, blocked_for
    from compiler.ir import types as T
    from compiler.ir.core import Value

    v = Value(T.TileType((128,), T.fp32), None, 0)
    planned, lowered = blocked_for((128,), 4, 4), blocked_for((128,), 1, 4)
    check_plan(_FakeLowering({v: GPUTile(planned, [])}), {v: planned})  # type: ignore[arg-type]
    with pytest.raises(UnsupportedError, match="outside the layouts planned") as e:
        check_plan(_FakeLowering({v: GPUTile(lowered, [])}), {v: planned})  # type: ignore[arg-type]
    assert "planned register=[(1),(2)]" in str(e.value) and "lowered register=[]" in str(e.value)


def test_print_layouts_lists_each_layout_once() -> None:
    from compiler.ir import types as T
    from compiler.ir.builder import Builder
    from compiler.ir.core import Block, Function

    body = Block()
    b = Builder(body)
    tile = T.TileType((128,), T.i32)
    r = b.value("make_range", [], tile, start=0, end=128)
    s = b.value("add", [r, r], tile)
    lay = LinearLayout.from_bases({"register": [(1,)], "lane": [(2,), (4,), (8,), (16,), (32,)],
                                   "warp": [(64,)]}, {"dim0": 128})
    text = print_layouts(Function("f", body, [], []), {r: lay, s: lay})
    assert text.startswith("#L0 = register=[(1)] lane=[(2),(4),(8),(16),(32)] warp=[(64)] -> [128]\n")
    assert text.count("#L0 =") == 1 and text.count("tile<128xi32> #L0") == 2
    shared = print_layouts(Function("f", body, [], []), {r: SHARED})
    assert "tile<128xi32> shared" in shared and "#L" not in shared
