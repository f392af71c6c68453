"""GPU tests of specs/residual_rms_norm.yaml (kernels/dflash/residual_rms_norm.cu)."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, residual_rms_norm  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, max_ulp_diff, nonzero_randn  # noqa: E402
from tests.gpu.checks import within  # noqa: E402

EPS = 1e-6
DEV = "cuda"

# Tolerances:
# * the new residual is bf16(f32(x) + f32(residual)) with one round-to-nearest-even, the
#   same operation as torch's bf16 add, so it must match bit for bit;
# * out is the RMS norm of that stored residual: kernel and reference both compute in
#   f32 and round once to bf16, differing only by reduction order and rsqrtf (~1e-6
#   relative), so they can differ by at most 1 bf16 ulp (neighbouring values when the
#   f32 result sits next to a rounding boundary).
MAX_ULPS = 1


def reference(x, residual, w, eps):
    new_res = (x.float() + residual.float()).to(torch.bfloat16)
    sf = new_res.float()
    r = torch.rsqrt(sf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return new_res, (sf * r * w.float()).to(torch.bfloat16)


def make(rows, hidden):
    torch.manual_seed(rows * 7919 + hidden)
    x = nonzero_randn(rows, hidden, scale=1.5)
    res = nonzero_randn(rows, hidden, scale=3.0, offset=-0.5)
    w = nonzero_randn(hidden, scale=0.2, offset=1.0)
    out = torch.full((rows, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    return x, res, w, out


def check(x, res_before, res_after, w, out, rows, hidden):
    ref_res, ref_out = reference(x.view(rows, hidden), res_before.view(rows, hidden), w, EPS)
    assert torch.equal(res_after.view(rows, hidden).view(torch.int16), ref_res.view(torch.int16))
    assert not torch.isnan(out).any(), "some output element was not written"
    within(max_ulp_diff(out.view(rows, hidden), ref_out), MAX_ULPS, out.view(rows, hidden).numel(), "bf16 ulps")


@pytest.mark.parametrize("rows", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("hidden", [1024, 4096, 8192])
def test_engine_shapes(rows, hidden):
    x, res, w, out = make(rows, hidden)
    res_before = res.clone()
    outcome = residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, rows, hidden, EPS)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    check(x, res_before, res, w, out, rows, hidden)


@pytest.mark.parametrize("hidden", [8, 128, 2560, 3584, 5120, 40000])
def test_other_hidden(hidden):
    rows = 29
    x, res, w, out = make(rows, hidden)
    res_before = res.clone()
    assert residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, rows, hidden, EPS).launched
    torch.cuda.synchronize()
    check(x, res_before, res, w, out, rows, hidden)


def test_keyword_arguments_and_out_aliasing_x():
    rows, hidden = 17, 4096
    x, res, w, _ = make(rows, hidden)
    x_before, res_before = x.clone(), res.clone()
    outcome = residual_rms_norm.residual_rms_norm_bf16(
        x=x, residual=res, weight=w, out=x, rows=rows, hidden=hidden, eps=EPS
    )
    torch.cuda.synchronize()
    assert outcome.launched
    check(x_before, res_before, res, w, x, rows, hidden)


def test_misaligned_pointers_take_the_scalar_path():
    rows, hidden = 21, 4096
    n = rows * hidden
    xbuf, rbuf = nonzero_randn(n + 1), nonzero_randn(n + 1)
    obuf = torch.full((n + 1,), float("nan"), device=DEV, dtype=torch.bfloat16)
    x, res, out = xbuf[1:], rbuf[1:], obuf[1:]
    w = nonzero_randn(hidden, offset=1.0)
    res_before = res.clone()
    assert residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, rows, hidden, EPS).launched
    torch.cuda.synchronize()
    check(x, res_before, res, w, out, rows, hidden)


def test_plan():
    plan = residual_rms_norm.plan_residual_rms_norm_bf16(rows=64, hidden=4096)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (64, 1, 1)
    assert tuple(plan["block"]) == (128, 1, 1)
    assert plan["shared_mem"] == 0


def test_alignment_clause_not_launched():
    rows, hidden = 4, 1028  # hidden % 8 != 0
    plan = residual_rms_norm.plan_residual_rms_norm_bf16(rows=rows, hidden=hidden)
    assert not plan["launched"] and clause_in(plan["reason"], "hidden % 8 == 0")
    x, res, w, out = make(rows, hidden)
    res_before = res.clone()
    outcome = residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, rows, hidden, EPS)
    torch.cuda.synchronize()
    assert not outcome.launched and not bool(outcome)
    assert clause_in(outcome.reason, "hidden % 8 == 0")
    assert torch.isnan(out).all()
    assert torch.equal(res.view(torch.int16), res_before.view(torch.int16))


def test_empty_work_is_skipped():
    hidden = 4096
    x, res, w, out = make(4, hidden)
    res_before = res.clone()
    outcome = residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, 0, hidden, EPS)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()
    assert torch.equal(res.view(torch.int16), res_before.view(torch.int16))


def test_too_small_residual_is_an_error():
    rows, hidden = 8, 1024
    x, _, w, out = make(rows, hidden)
    res = nonzero_randn(rows - 1, hidden)
    with pytest.raises(KernelError, match="residual"):
        residual_rms_norm.residual_rms_norm_bf16(x, res, w, out, rows, hidden, EPS)
