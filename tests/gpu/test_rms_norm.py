"""GPU tests of specs/rms_norm.yaml (kernels/dflash/rms_norm.cu) against a torch f32 reference."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, rms_norm  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, max_ulp_diff, nonzero_randn  # noqa: E402
from tests.gpu.checks import within  # noqa: E402

EPS = 1e-6
DEV = "cuda"

# Tolerance: the kernel and the reference both compute in f32 and round once to bf16.
# They differ only by f32 reduction order and rsqrtf (a few f32 ulps, ~1e-6 relative),
# so the bf16 results are equal except when the f32 value sits within ~1e-6 of a bf16
# rounding boundary, where they can land on neighbouring bf16 values: at most 1 bf16 ulp.
MAX_ULPS = 1


def reference(x, w, eps):
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * r * w.float()).to(torch.bfloat16)


def run_and_check(rows, hidden):
    torch.manual_seed(rows * 100003 + hidden)
    x = nonzero_randn(rows, hidden, scale=2.0, offset=0.25)
    w = nonzero_randn(hidden, scale=0.2, offset=1.0)
    out = torch.full((rows, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = rms_norm.rms_norm_bf16(x, w, out, rows, hidden, EPS)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    assert not torch.isnan(out).any(), "some output element was not written"
    within(max_ulp_diff(out, reference(x, w, EPS)), MAX_ULPS, out.numel(), "bf16 ulps")


@pytest.mark.parametrize("rows", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("hidden", [1024, 4096, 8192])
def test_engine_shapes(rows, hidden):
    run_and_check(rows, hidden)


@pytest.mark.parametrize("hidden", [8, 128, 2560, 3584, 5120, 40000])
def test_other_hidden(hidden):
    # 3584 / 5120: partial last vectors per thread; 128: one warp, half idle;
    # 40000 > 32768: the two-pass fallback path.
    run_and_check(37, hidden)


def test_keyword_arguments():
    rows, hidden = 5, 4096
    x = nonzero_randn(rows, hidden)
    w = nonzero_randn(hidden, offset=1.0)
    out = torch.full_like(x, float("nan"))
    outcome = rms_norm.rms_norm_bf16(x=x, weight=w, out=out, rows=rows, hidden=hidden, eps=EPS)
    torch.cuda.synchronize()
    assert outcome.launched
    within(max_ulp_diff(out, reference(x, w, EPS)), MAX_ULPS, out.numel(), "bf16 ulps")


def test_in_place():
    rows, hidden = 64, 4096
    x = nonzero_randn(rows, hidden)
    w = nonzero_randn(hidden, offset=1.0)
    ref = reference(x, w, EPS)
    assert rms_norm.rms_norm_bf16(x, w, x, rows, hidden, EPS).launched
    torch.cuda.synchronize()
    within(max_ulp_diff(x, ref), MAX_ULPS, x.numel(), "bf16 ulps")


def test_misaligned_pointers_take_the_scalar_path():
    # Views starting 2 bytes into their buffers: not 16-byte aligned, the launcher cannot
    # see it and the kernel must fall back to scalar accesses.
    rows, hidden = 33, 4096
    xbuf = nonzero_randn(rows * hidden + 1)
    obuf = torch.full((rows * hidden + 1,), float("nan"), device=DEV, dtype=torch.bfloat16)
    x, out = xbuf[1:], obuf[1:]
    w = nonzero_randn(hidden, offset=1.0)
    assert rms_norm.rms_norm_bf16(x, w, out, rows, hidden, EPS).launched
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    within(max_ulp_diff(out.view(rows, hidden), reference(x.view(rows, hidden), w, EPS)), MAX_ULPS, out.view(rows, hidden).numel(), "bf16 ulps")


def test_plan():
    plan = rms_norm.plan_rms_norm_bf16(rows=64, hidden=4096)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (64, 1, 1)
    assert tuple(plan["block"]) == (128, 1, 1)
    assert plan["shared_mem"] == 0
    assert tuple(rms_norm.plan_rms_norm_bf16(rows=1, hidden=1024)["block"]) == (32, 1, 1)
    assert tuple(rms_norm.plan_rms_norm_bf16(rows=1, hidden=8192)["block"]) == (256, 1, 1)
    assert tuple(rms_norm.plan_rms_norm_bf16(rows=1, hidden=65536)["block"]) == (1024, 1, 1)


def test_alignment_clause_not_launched():
    rows, hidden = 4, 4100  # hidden % 8 != 0
    plan = rms_norm.plan_rms_norm_bf16(rows=rows, hidden=hidden)
    assert not plan["launched"]
    assert clause_in(plan["reason"], "hidden % 8 == 0")

    x = nonzero_randn(rows, hidden)
    w = nonzero_randn(hidden)
    out = torch.full_like(x, float("nan"))
    outcome = rms_norm.rms_norm_bf16(x, w, out, rows, hidden, EPS)
    torch.cuda.synchronize()
    assert not outcome.launched and not bool(outcome)
    assert clause_in(outcome.reason, "hidden % 8 == 0")
    assert torch.isnan(out).all(), "a kernel that was not launched wrote the output"


def test_empty_work_is_skipped():
    hidden = 4096
    x = nonzero_randn(4, hidden)
    w = nonzero_randn(hidden)
    out = torch.full_like(x, float("nan"))
    outcome = rms_norm.rms_norm_bf16(x, w, out, 0, hidden, EPS)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()
    assert not rms_norm.plan_rms_norm_bf16(rows=0, hidden=hidden)["launched"]


def test_too_small_output_is_an_error():
    rows, hidden = 8, 1024
    x = nonzero_randn(rows, hidden)
    w = nonzero_randn(hidden)
    out = torch.empty(rows - 1, hidden, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(KernelError, match="out"):
        rms_norm.rms_norm_bf16(x, w, out, rows, hidden, EPS)
