"""Tensor specs, poisoning, stats, comparisons, grids and limits."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import torch
from pydantic import TypeAdapter, ValidationError

from tools.checks import compare, default_tolerance, reference_shape_error, tensor_stats
from tools.errors import ToolInputError
from tools.grid import evaluate_grid
from tools.limits import Limits
from tools.specs import (
    ArgValue,
    TensorSpec,
    check_args_limits,
    check_signature_type,
    scalar_fits,
    signature_of,
)
from tools.store import CompileSpec
from tools.tensors import build_tensor, count_poison, poison_


def spec(**kw: object) -> TensorSpec:
    return TensorSpec.model_validate(kw)


@pytest.mark.parametrize("init", ["randn", "rand", "zeros", "ones", "arange", "empty"])
@pytest.mark.parametrize("dtype", ["float32", "fp16", "bf16", "float64"])
def test_build_float_inits(init: str, dtype: str) -> None:
    t = build_tensor("x", spec(shape=[3, 5], dtype=dtype, init=init))
    assert t.shape == (3, 5) and t.dtype.is_floating_point
    if init == "empty":
        assert count_poison(t) == 15 and torch.isnan(t).all()
    if init == "arange":
        assert t.reshape(-1)[4].item() == 4


@pytest.mark.parametrize("dtype", ["int8", "int32", "i64", "uint8", "bool"])
def test_build_int_inits(dtype: str) -> None:
    t = build_tensor("k", spec(shape=[100], dtype=dtype, init="randint", low=0, high=2))
    assert set(t.tolist()) <= {0, 1}  # True == 1
    e = build_tensor("k", spec(shape=[7], dtype=dtype, init="empty"))
    assert count_poison(e) == (0 if dtype == "bool" else 7)


def test_seeds_reproducible_and_distinct_per_name() -> None:
    s = spec(shape=[64])
    assert torch.equal(build_tensor("x", s), build_tensor("x", s))
    assert not torch.equal(build_tensor("x", s), build_tensor("y", s))
    assert torch.equal(build_tensor("x", spec(shape=[64], seed=3)), build_tensor("y", spec(shape=[64], seed=3)))


def test_explicit_values_full_and_rand_bounds() -> None:
    t = build_tensor("v", spec(init=[[1, 2, 3], [4, 5, 6]], dtype="int32"))
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert build_tensor("f", spec(shape=[4], init="full", value=2.5)).tolist() == [2.5] * 4
    r = build_tensor("r", spec(shape=[1000], init="rand", low=-2, high=-1))
    assert r.min() >= -2 and r.max() < -1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dtype": "float32"}, "shape is required"),
        ({"shape": [4], "dtype": "float99"}, "dtype"),
        ({"shape": [4], "init": "gaussian"}, "init"),
        ({"shape": [4], "dtype": "int32", "init": "randn"}, "needs a float dtype"),
        ({"shape": [4], "init": "full"}, "needs a value"),
        ({"shape": [3], "init": [1, 2]}, "has 3 elements but 2 values"),
        ({"init": [[1, 2], [3]]}, "ragged"),
        ({"shape": [4], "seeds": 1}, "Extra inputs"),
        ({"shape": [-1]}, "greater than or equal to 0"),
    ],
)
def test_bad_specs(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TensorSpec.model_validate(fields)


def test_arg_union_discriminates() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(ArgValue)
    assert isinstance(adapter.validate_python({"shape": [2]}), TensorSpec)
    assert adapter.validate_python(3) == 3 and adapter.validate_python(True) is True
    with pytest.raises(ValidationError) as info:
        adapter.validate_python({"shape": [2], "bogus": 1})
    errors = info.value.errors()
    assert len(errors) == 1 and errors[0]["loc"] == ("tensor", "bogus")  # no noise from the scalar branch


def test_signatures() -> None:
    assert signature_of(spec(shape=[1], dtype="bf16")) == "*bf16"
    assert signature_of(7) == "i32" and signature_of(1 << 40) == "i64" and signature_of(1.0) == "fp32"
    assert signature_of(True) == "i1"
    assert check_signature_type(" *fp16 ", where="s") == "*fp16"
    with pytest.raises(ToolInputError, match="unknown pointer type"):
        check_signature_type("*float", where="signature['x']")
    assert scalar_fits(5, "i32") and not scalar_fits(1 << 40, "i32") and not scalar_fits(1.5, "i64")
    assert scalar_fits(3, "fp32") and not scalar_fits(-1, "u32")


def test_limits() -> None:
    limits = Limits(max_tensor_elements=100, max_call_elements=150, max_call_bytes=10_000, max_explicit_values=4)
    check_args_limits({"a": spec(shape=[100]), "n": 3}, limits)
    with pytest.raises(ToolInputError, match="limit per tensor is 100"):
        check_args_limits({"a": spec(shape=[101])}, limits)
    with pytest.raises(ToolInputError, match="elements in all"):
        check_args_limits({"a": spec(shape=[100]), "b": spec(shape=[100])}, limits)
    with pytest.raises(ToolInputError, match="elements in all"):
        check_args_limits({"a": spec(shape=[100])}, limits, copies=2)
    with pytest.raises(ToolInputError, match="explicit values"):
        check_args_limits({"a": spec(init=[1, 2, 3, 4, 5])}, limits)


def test_limits_from_env() -> None:
    limits = Limits.from_env({"ANVIL_MAX_SOURCE_BYTES": "1000", "ANVIL_LAUNCH_TIMEOUT_S": "2.5"}, max_kernels=3)
    assert (limits.max_source_bytes, limits.launch_timeout_s, limits.max_kernels) == (1000, 2.5, 3)
    with pytest.raises(ValueError, match="ANVIL_MAX_KERNELS"):
        Limits.from_env({"ANVIL_MAX_KERNELS": "many"})


def test_stats_and_poison() -> None:
    t = torch.tensor([1.0, float("nan"), float("inf"), -2.0, 0.5])
    s = tensor_stats(t)
    assert (s.min, s.max, s.nan_count, s.inf_count) == (-2.0, 1.0, 1, 1)
    assert s.values[1] == "nan" and s.values[2] == "inf"
    out = poison_(torch.empty(10))
    out[:4] = 1.0
    assert tensor_stats(out, poisoned=True).unwritten_count == 6
    assert tensor_stats(torch.tensor([float("nan")]) * 0, poisoned=True).unwritten_count == 0


def test_compare() -> None:
    want = torch.linspace(-1, 1, 100)
    assert compare(want + 1e-6, want, reference="r").passed
    bad = want.clone()
    bad[37] = 5.0
    check = compare(bad, want, reference="r")
    assert not check.passed and check.mismatched == 1 and check.first_mismatch is not None
    assert check.first_mismatch.index == [37] and check.max_abs_error == pytest.approx(5.0 - want[37].item())
    nan = torch.full((3,), float("nan"))
    assert compare(nan, nan, reference="r").passed
    assert not compare(nan, torch.zeros(3), reference="r").passed
    assert compare(torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2]), reference="r").passed
    assert not compare(torch.tensor([1, 3], dtype=torch.int32), torch.tensor([1, 2]), reference="r").passed
    assert compare(torch.ones(4), 1.0, reference="r").passed
    assert default_tolerance(torch.float16) == (1e-2, 1e-2) and default_tolerance(torch.int8) == (0.0, 0.0)
    loose = compare(want + 0.01, want, reference="r", atol=0.02, rtol=0)
    assert loose.passed and loose.atol == 0.02


def test_reference_shape_errors() -> None:
    out = torch.empty(32)
    assert reference_shape_error("out", torch.ones(32), out, "e") is None
    assert reference_shape_error("out", 3.0, out, "e") is None
    message = reference_shape_error("out", torch.ones(4, 8), out, "x @ y")
    assert message is not None and "reshape([32])" in message


def test_grid() -> None:
    names = {"n": 1000, "BLOCK": 128, "M": 3}
    assert evaluate_grid(["cdiv(n, BLOCK)", "M * 2"], names, max_programs=1000) == [8, 6]
    assert evaluate_grid("triton.cdiv(n, BLOCK)", names, max_programs=1000) == [8]
    assert evaluate_grid(4, names, max_programs=1000) == [4]
    for bad, message in [
        (["n.__class__"], "unsupported"),
        (["os.system(1)"], "unsupported"),
        (["triton.system(1)"], "unsupported"),
        (["q"], "unknown name 'q'"),
        ([1, 2, 3, 4], "give 1 to 3"),
        (["n * n * n"], "the limit is"),
        ([-1], ">= 0"),
        (["n // 0"], "division by zero"),
    ]:
        with pytest.raises(ToolInputError, match=message):
            evaluate_grid(bad, names, max_programs=10**6)
    # a size given as a float names the fix
    with pytest.raises(ToolInputError, match=r"'m' is not an integer \(it is 1000.0: pass 1000 \(an int\)"):
        evaluate_grid(["cdiv(m, 128)"], dict(names, m=1000.0), max_programs=10**6)
    with pytest.raises(ToolInputError, match=r"'m' is not an integer \(it is 0.5\)"):
        evaluate_grid(["m"], dict(names, m=0.5), max_programs=10**6)


def test_kernel_ids_are_content_hashes() -> None:
    base = CompileSpec("src", None, {"x": "*fp32"}, {}, {"B": 1}, "cpu")
    assert base.kernel_id == CompileSpec("src", None, {"x": "*fp32"}, {}, {"B": 1}, "cpu").kernel_id
    for change in ({"source": "src2"}, {"constexprs": {"B": 2}}, {"target": "cuda"}, {"num_warps": 8},
                   {"maxnreg": 64}, {"cluster_dims": [2, 1, 1]}):
        assert base.with_changes(**change).kernel_id != base.kernel_id
    assert math.isfinite(len(base.kernel_id))


@pytest.mark.parametrize("spec", [
    {"shape": [4], "init": "randint", "low": -2**70, "high": 2**70, "dtype": "int64"},
    {"shape": [4], "init": "full", "value": 1e300, "dtype": "int32"},
    {"shape": [4], "init": "randint", "low": float("inf"), "high": 5, "dtype": "int32"},
    {"shape": [2], "init": [2**70, 1], "dtype": "int64"},
])
def test_values_a_dtype_cannot_hold_are_the_callers_error(spec: dict[str, Any]) -> None:
    with pytest.raises(ToolInputError) as info:
        build_tensor("x_ptr", TensorSpec.model_validate(spec))
    assert "args['x_ptr']" in info.value.message and "Traceback" not in info.value.message


def test_grid_entries_read_tensor_shapes() -> None:
    """`cdiv(a_ptr.shape[0], BM)`: a grid over a tensor's rows needs no extra scalar argument."""
    shapes = {"a_ptr": (1000, 64), "off_ptr": (9,)}
    assert evaluate_grid(["cdiv(a_ptr.shape[0], BM)", "off_ptr.shape[-1] - 1"], {"BM": 64}, max_programs=10**6,
                         shapes=shapes) == [16, 8]
    for entry, message in [("x_ptr.shape[0]", "'x_ptr' is not a tensor argument; tensors: a_ptr, off_ptr"),
                           ("a_ptr.shape[2]", "has 2 dimension"), ("a_ptr.shape[BM]", "shape[64] is out of range"),
                           ("a_ptr.shape[0:1]", "unsupported syntax"),
                           ("a_ptr.dtype", "unsupported syntax"), ("a_ptr.shape", "unsupported syntax"),
                           ("a_ptr.shape[0].__class__", "unsupported syntax")]:
        with pytest.raises(ToolInputError, match=re.escape(message)):
            evaluate_grid([entry], {"BM": 64}, max_programs=10**6, shapes=shapes)
    with pytest.raises(ToolInputError, match="available: BM"):  # the shapes are not a name
        evaluate_grid(["nope"], {"BM": 64}, max_programs=10**6, shapes=shapes)


def test_the_dtype_table_the_server_checks_sizes_with_matches_torch() -> None:
    """tools/specs.py knows dtypes by name and size without torch; the workers look torch's up by name."""
    from tools.specs import DTYPES

    for d in DTYPES.values():
        assert d.torch_dtype is getattr(torch, d.name) and d.torch_dtype.itemsize == d.itemsize, d.name
        assert d.bits_view.itemsize == d.itemsize and d.is_float == d.torch_dtype.is_floating_point, d.name
    assert TensorSpec.model_validate({"shape": [3, 5], "dtype": "bf16"}).nbytes == 30


def test_the_kernel_store_keeps_to_its_byte_limit() -> None:
    """Kernels carry their artifacts (PTX, LLVM IR): past max_kernel_bytes the least recently used go,
    the newest stays."""
    from tools.store import CompileSpec, KernelRecord, KernelStore

    def record(i: int, size: int) -> KernelRecord:
        spec = CompileSpec(source=f"# {i}", kernel_name=None, signature={}, hints={}, constexprs={}, target="cpu")
        return KernelRecord(spec=spec, kernel_name=f"k{i}", arg_names=[], constexpr_names=[], signature={},
                            compile_ms={}, resources={}, diagnostics=[], asm={"llir": "x" * size})

    store = KernelStore(max_kernels=100, max_bytes=10_000)
    kept = [record(i, 3000) for i in range(5)]
    for r in kept:
        store.put(r, also=f"alias{r.kernel_name}")
    assert [r.kernel_name for r in store.recent()] == ["k4", "k3", "k2"] and len(store) == 3
    assert store.get("aliask4") is kept[4] and store.get(kept[0].kernel_id) is None
    huge = record(9, 50_000)
    store.put(huge)
    assert store.recent() == [huge]
