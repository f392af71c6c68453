"""GPU tests of specs/silu_mul.yaml (kernels/dflash/silu_mul.cu) against a torch f32 reference."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, silu_mul  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, max_ulp_diff, nonzero_randn  # noqa: E402
from tests.gpu.checks import within  # noqa: E402

DEV = "cuda"

# Tolerance: kernel and reference both evaluate silu(g) * u in f32 and round once to bf16.
# The kernel's exp is __expf (error of a few f32 ulps, < 2e-6 relative for |g| < 16), far
# below a bf16 ulp (2^-8 relative), so the two bf16 results are equal except when the f32
# value lies next to a bf16 rounding boundary: at most 1 bf16 ulp apart.
MAX_ULPS = 1


def reference(inp, inter):
    f = inp.float()
    gate, up = f[:, :inter], f[:, inter:]
    return (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)


def run_and_check(rows, inter):
    torch.manual_seed(rows * 31 + inter)
    inp = nonzero_randn(rows, 2 * inter, scale=3.0)  # gates well into both tails of silu
    out = torch.full((rows, inter), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = silu_mul.silu_mul_bf16(inp, out, rows, inter)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    assert not torch.isnan(out).any(), "some output element was not written"
    within(max_ulp_diff(out, reference(inp, inter)), MAX_ULPS, out.numel(), "bf16 ulps")


@pytest.mark.parametrize("rows", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("inter", [1024, 4096, 14336])
def test_engine_shapes(rows, inter):
    run_and_check(rows, inter)


@pytest.mark.parametrize("inter", [8, 11008, 18944, 28672])
def test_other_inter(inter):
    run_and_check(13, inter)


def test_keyword_arguments():
    rows, inter = 7, 4096
    inp = nonzero_randn(rows, 2 * inter)
    out = torch.full((rows, inter), float("nan"), device=DEV, dtype=torch.bfloat16)
    assert silu_mul.silu_mul_bf16(input=inp, out=out, rows=rows, inter=inter).launched
    torch.cuda.synchronize()
    within(max_ulp_diff(out, reference(inp, inter)), MAX_ULPS, out.numel(), "bf16 ulps")


def test_misaligned_pointers_take_the_scalar_path():
    rows, inter = 9, 4096
    ibuf = nonzero_randn(rows * 2 * inter + 1)
    obuf = torch.full((rows * inter + 1,), float("nan"), device=DEV, dtype=torch.bfloat16)
    inp, out = ibuf[1:], obuf[1:]
    assert silu_mul.silu_mul_bf16(inp, out, rows, inter).launched
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    ref = reference(inp.view(rows, 2 * inter), inter)
    within(max_ulp_diff(out.view(rows, inter), ref), MAX_ULPS, out.view(rows, inter).numel(), "bf16 ulps")


def test_plan():
    plan = silu_mul.plan_silu_mul_bf16(rows=64, inter=14336)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (64 * 14336 // 8 // 512, 1, 1)
    assert tuple(plan["block"]) == (256, 1, 1)
    assert plan["shared_mem"] == 0


def test_alignment_clause_not_launched():
    rows, inter = 4, 1001
    plan = silu_mul.plan_silu_mul_bf16(rows=rows, inter=inter)
    assert not plan["launched"] and clause_in(plan["reason"], "inter % 8 == 0")
    inp = nonzero_randn(rows, 2 * inter)
    out = torch.full((rows, inter), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = silu_mul.silu_mul_bf16(inp, out, rows, inter)
    torch.cuda.synchronize()
    assert not outcome.launched and not bool(outcome)
    assert clause_in(outcome.reason, "inter % 8 == 0")
    assert torch.isnan(out).all()


def test_empty_work_is_skipped():
    inter = 4096
    inp = nonzero_randn(2, 2 * inter)
    out = torch.full((2, inter), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = silu_mul.silu_mul_bf16(inp, out, 0, inter)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()


def test_too_small_input_is_an_error():
    rows, inter = 4, 1024
    inp = nonzero_randn(rows, inter)  # [gate] only: half the size needed
    out = torch.empty(rows, inter, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(KernelError, match="input"):
        silu_mul.silu_mul_bf16(inp, out, rows, inter)
