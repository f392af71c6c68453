"""GPU test of an instantiated kernel's dispatching launcher: the fixture project's `scaled`
(tests/fixtures/project: `instantiate: {T: [f32, bf16], VEC: [4, 1]}`) launched through the
dispatcher with torch tensors of each dtype, checked against torch, and through the
`scale_any` chain whose members differ in element type."""

from __future__ import annotations

import shutil

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import kernelgen_ops  # noqa: E402
from kernelgen_ops import ArgumentError  # noqa: E402

TARGET = guards_build.current_target_or_skip()
FIXTURE = guards_build.REPO / "tests" / "fixtures" / "project"


def populate(root):
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("generated", "build", "bindings"))


@pytest.fixture(scope="module", name="m")
def built(tmp_path_factory):
    folder = guards_build.build(tmp_path_factory, TARGET, populate=populate, name="fixture_ops")
    return guards_build.load(folder, "fixture_ops")


DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


@pytest.mark.parametrize("n", [1000, 1001, 4, 1])
@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_dispatcher_launches_the_instance_of_the_arrays_dtype(m, t, n):
    x = (torch.arange(n, device="cuda", dtype=torch.float32) * 0.25 - 7.0).to(DTYPES[t])
    out = torch.full_like(x, float("nan"))
    outcome = m.scaled(x, out, n, 1.5)
    vec = 4 if n % 4 == 0 else 1
    assert outcome.launched, outcome.reason
    assert outcome.kernel == f"scaled_{t}_v{vec}"
    assert outcome.kernel == m.scaled.plan(n=n, T=t)["kernel"]
    torch.cuda.synchronize()
    expected = (x.float() * 1.5).to(DTYPES[t])
    assert torch.equal(out, expected)


def test_dispatcher_reports_no_instantiation_for_other_dtypes(m):
    x = torch.ones(8, device="cuda", dtype=torch.float16)
    outcome = m.scaled(x, torch.empty_like(x), 8, 1.0)
    assert not outcome.launched and outcome.kernel == "scaled"
    assert "no instantiation for this dtype" in outcome.reason
    mixed = m.scaled(torch.ones(8, device="cuda"), torch.empty(8, device="cuda", dtype=torch.bfloat16), 8, 1.0)
    assert not mixed.launched and "no instantiation for this dtype" in mixed.reason
    kernelgen_ops.set_strict(True)
    try:
        with pytest.raises(kernelgen_ops.NotLaunchedError, match="no instantiation"):
            m.scaled(x, torch.empty_like(x), 8, 1.0)
    finally:
        kernelgen_ops.set_strict(False)


def test_integer_pointers_need_another_array_to_decide_the_dtype(m):
    x = torch.arange(8, device="cuda", dtype=torch.bfloat16)
    out = torch.zeros_like(x)
    outcome = m.scaled(x, out.data_ptr(), 8, 2.0)  # x decides: bf16
    assert outcome.launched and outcome.kernel == "scaled_bf16_v4"
    torch.cuda.synchronize()
    assert torch.equal(out, x * 2)
    with pytest.raises(ArgumentError, match="carries no dtype") as err:
        m.scaled(x.data_ptr(), out.data_ptr(), 8, 2.0)
    assert err.value.argument == "x"


def test_chain_across_element_types_skips_members_of_other_dtypes(m):
    for t in ("f32", "bf16"):
        x = torch.arange(6, device="cuda", dtype=DTYPES[t])
        out = torch.zeros_like(x)
        outcome = m.scale_any(x, out, 6, 3.0)
        # f32: scaled_f32_v4 declines n = 6 and scale_f32 follows it; bf16: scaled_bf16_v4, then v1
        assert outcome.launched and outcome.kernel == ("scale_f32" if t == "f32" else "scaled_bf16_v1")
        torch.cuda.synchronize()
        assert torch.equal(out, (x.float() * 3).to(DTYPES[t]))
