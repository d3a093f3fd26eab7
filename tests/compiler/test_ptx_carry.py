"""sm_90a PTX of loops that carry a wgmma result into the next iteration (carry_kernels.py): the
group stays in flight across the back edge and completes with the next wait, before any other
read of its value (first thing in the body, inside a branch) and on the way out of the loop; the
assembler accepts it without serializing remarks. Results on the GPU: tests/gpu/test_carry.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from carry_kernels import chained  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "out_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}


def _loop(ptx: str) -> str:
    body = ptx[ptx.index("cp.async.wait_group"):]
    return body[:body.index("cp.async.wait_all")]


@pytest.mark.parametrize("form", [0, 1, 2, 3])
def test_carried_group_is_completed_before_its_value_is_read(form: int, monkeypatch: pytest.MonkeyPatch) -> None:
    ck = chained.compile(SIG, {"FORM": form, "BM": 64, "BN": 64, "BK": 32}, target="cuda:sm_90a", num_warps=4)
    ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
    assert ck.metadata["ptxas_notes"] == [] and ck.metadata["n_spills"] == 0  # type: ignore[attr-defined]
    if form == 2:  # a branch in the body: the loop is not pipelined, its dots wait in place
        return
    loop = _loop(ptx)
    first_wait = loop.index("wgmma.wait_group")
    if form == 1:
        # acc * 0.75 comes first: the carried group completes before the multiply reads it
        assert first_wait < loop.index("mul.f32") < loop.index("wgmma.fence")
    else:
        # completed by the wait of s = a @ b (issued first in the body)
        assert loop.index("wgmma.commit_group") < first_wait
    # the last iteration's group: waited on the loop's exit edge, before the stores
    assert ptx.rindex("wgmma.wait_group") < ptx.index("st.global")
    monkeypatch.setenv("ANVIL_PIPELINE", "sync")  # every group waited in its own iteration
    ck2 = chained.compile(SIG, {"FORM": form, "BM": 64, "BN": 64, "BK": 32}, target="cuda:sm_90a", num_warps=4)
    assert ck2.asm["ptx"] != ptx  # type: ignore[attr-defined]
