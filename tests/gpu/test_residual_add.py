"""GPU tests of specs/residual_add.yaml (kernels/dflash/residual_add.cu)."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, residual_add  # noqa: E402

from tests.gpu.bf16_helpers import nonzero_randn  # noqa: E402
from tests.gpu.checks import same_bits  # noqa: E402

DEV = "cuda"

# Tolerance: none.  bf16(f32(a) + f32(b)) is one f32 add (exact for most bf16 pairs, and
# correctly rounded otherwise) followed by one round-to-nearest-even to bf16; torch's
# reference computes exactly that, so the results must match bit for bit.


def reference(a, b):
    return (a.float() + b.float()).to(torch.bfloat16)


def poisoned(n):
    return torch.full((n,), float("nan"), device=DEV, dtype=torch.bfloat16)


@pytest.mark.parametrize(
    "n",
    [1, 7, 8, 9, 4096, 4097, 1000 * 4096 + 3, 8192 * 1024, 8192 * 4096, 8192 * 8192],
)
def test_sizes(n):
    torch.manual_seed(n)
    a, b = nonzero_randn(n), nonzero_randn(n, scale=4.0)
    out = poisoned(n)
    outcome = residual_add.residual_add_bf16(a, b, out, n)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    assert not torch.isnan(out).any(), "some output element was not written"
    same_bits(out, reference(a, b), "bits as expected")


def test_two_dimensional_tensors_and_keywords():
    rows, hidden = 64, 4096
    a, b = nonzero_randn(rows, hidden), nonzero_randn(rows, hidden)
    out = torch.full_like(a, float("nan"))
    outcome = residual_add.residual_add_bf16(a=a, b=b, out=out, n=rows * hidden)
    torch.cuda.synchronize()
    assert outcome.launched
    same_bits(out, reference(a, b), "bits as expected")


def test_in_place():
    n = 3 * 4096 + 5
    a, b = nonzero_randn(n), nonzero_randn(n)
    ref = reference(a, b)
    assert residual_add.residual_add_bf16(a, b, a, n).launched
    torch.cuda.synchronize()
    same_bits(a, ref, "bits as expected")


@pytest.mark.parametrize("offsets", [(1, 0, 0), (0, 3, 0), (0, 0, 5)])
def test_misaligned_pointers_take_the_scalar_path(offsets):
    n = 100_003
    bufs = [nonzero_randn(n + 8) for _ in range(2)] + [poisoned(n + 8)]
    a, b, out = (buf[o : o + n] for buf, o in zip(bufs, offsets))
    assert residual_add.residual_add_bf16(a, b, out, n).launched
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    same_bits(out, reference(a, b), "bits as expected")


def test_plan():
    plan = residual_add.plan_residual_add_bf16(n=8192 * 4096)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (4096, 1, 1)
    assert tuple(plan["block"]) == (1024, 1, 1)
    assert plan["shared_mem"] == 0
    assert tuple(residual_add.plan_residual_add_bf16(n=8193)["grid"]) == (2, 1, 1)


def test_empty_work_is_skipped():
    a, b, out = nonzero_randn(16), nonzero_randn(16), poisoned(16)
    outcome = residual_add.residual_add_bf16(a, b, out, 0)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()
    assert not residual_add.plan_residual_add_bf16(n=0)["launched"]


def test_too_small_input_is_an_error():
    n = 4096
    a, b, out = nonzero_randn(n), nonzero_randn(n - 8), poisoned(n)
    with pytest.raises(KernelError, match=r"\bb\b"):
        residual_add.residual_add_bf16(a, b, out, n)
