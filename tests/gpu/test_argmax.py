"""GPU tests of specs/argmax.yaml (kernels/dflash/argmax.cu): exact agreement with torch.argmax.

Semantics checked: ties -> smallest index (-0.0 == +0.0), NaN (either sign) is the
maximum and the first NaN wins, an all -inf row gives 0.  Both modes of the kernel are
covered: rows <= 128 (a cluster of 8 CTAs splits each row) and rows > 128 (one CTA per
row); the special-value tests append random rows to reach the second mode.
"""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, argmax  # noqa: E402

from tests.gpu.bf16_helpers import nonzero_randn  # noqa: E402
from tests.gpu.checks import identical  # noqa: E402

DEV = "cuda"
SENTINEL = -7  # never a valid index
SPLIT_ROWS = 128  # specs/argmax.yaml: up to this many rows, clusters split rows
MODES = pytest.mark.parametrize("extra_rows", [0, SPLIT_ROWS + 50], ids=["split", "row"])


def run(logits, rows, vocab):
    out = torch.full((rows,), SENTINEL, device=DEV, dtype=torch.int32)
    outcome = argmax.argmax_bf16(logits, out, rows, vocab)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    return out


def check_against_torch(logits, rows, vocab):
    out = run(logits, rows, vocab)
    ref = torch.argmax(logits.view(rows, vocab), dim=-1).to(torch.int32)
    mism = (out != ref).nonzero()
    assert mism.numel() == 0, f"rows {mism[:8].flatten().tolist()}: got {out[mism[:8]].flatten().tolist()} want {ref[mism[:8]].flatten().tolist()}"
    identical(out.numel(), f"argmax of {rows} x {vocab} against torch")
    return out


@pytest.mark.parametrize("rows", [1, 3, 64, 1000])
@pytest.mark.parametrize("vocab", [151936, 262144, 128256, 32000])
def test_random_logits(rows, vocab):
    # bf16 randn has coarse steps near its maximum, so many rows hold ties at the max.
    torch.manual_seed(rows * 1009 + vocab)
    logits = nonzero_randn(rows, vocab, scale=4.0)
    check_against_torch(logits, rows, vocab)


@pytest.mark.parametrize("rows", [37, 300])
@pytest.mark.parametrize("vocab", [1, 2, 7, 9, 15, 17, 50257, 100003])
def test_odd_vocab_sizes(rows, vocab):
    # vocab % 8 != 0: every row starts at a different 16-byte phase (scalar head/tail).
    torch.manual_seed(vocab)
    logits = nonzero_randn(rows, vocab)
    check_against_torch(logits, rows, vocab)


@pytest.mark.parametrize("rows", [64, 300])
@pytest.mark.parametrize("vocab", [151936, 4099])
def test_massive_ties_pick_the_smallest_index(rows, vocab):
    torch.manual_seed(5)
    logits = torch.randint(-3, 3, (rows, vocab), device=DEV).to(torch.bfloat16)
    logits[logits == 0] = -4
    out = check_against_torch(logits, rows, vocab)
    first_max = (logits == logits.max(dim=-1, keepdim=True).values).int().argmax(dim=-1)
    assert torch.equal(out, first_max.to(torch.int32))


@MODES
def test_tie_across_cluster_ctas(extra_rows):
    rows, vocab = 4 + extra_rows, 151936
    logits = nonzero_randn(rows, vocab)
    positions = [(0, 140000, 5), (1, 75000, 74999), (2, 3, 151935), (3, 151928, 151935)]
    for r, late, early in positions:
        logits[r, late] = 100.0
        logits[r, early] = 100.0
    out = check_against_torch(logits, rows, vocab)
    assert out[:4].tolist() == [min(p[1], p[2]) for p in positions]


@MODES
def test_signed_zeros_are_equal(extra_rows):
    rows, vocab = 2 + extra_rows, 151936
    logits = torch.full((rows, vocab), -1.0, device=DEV, dtype=torch.bfloat16)
    logits[0, 100], logits[0, 90000] = -0.0, 0.0
    logits[1, 100], logits[1, 90000] = 0.0, -0.0
    out = check_against_torch(logits, rows, vocab)
    assert out[:2].tolist() == [100, 100]


@MODES
def test_nan_is_the_maximum_and_first_nan_wins(extra_rows):
    rows, vocab = 5 + extra_rows, 151936
    logits = nonzero_randn(rows, vocab)
    logits[:, 777] = float("inf")
    bits = logits.view(torch.int16)
    bits[0, 120000] = 0x7FC0  # +NaN after +inf
    bits[1, 5000] = -63  # 0xFFC1: a negative NaN with a payload
    bits[1, 130000] = 0x7FC0
    bits[2, 151935] = 0x7F81  # +NaN (signalling pattern) in the last element
    bits[3, 0] = -64  # 0xFFC0 in the first element
    # row 4: no NaN, the +inf at 777 wins
    out = check_against_torch(logits, rows, vocab)
    assert out[:5].tolist() == [120000, 5000, 151935, 0, 777]


@MODES
def test_all_negative_infinity_row(extra_rows):
    rows, vocab = 2 + extra_rows, 32000
    logits = torch.full((rows, vocab), float("-inf"), device=DEV, dtype=torch.bfloat16)
    logits[1, 31999] = -3.0e38
    out = check_against_torch(logits, rows, vocab)
    assert out[:2].tolist() == [0, 31999]


@MODES
def test_misaligned_rows(extra_rows):
    rows, vocab = 6 + extra_rows, 151936
    buf = nonzero_randn(rows * vocab + 3)
    logits = buf[3:]
    check_against_torch(logits, rows, vocab)


def test_keyword_arguments():
    rows, vocab = 2, 128256
    logits = nonzero_randn(rows, vocab)
    out = torch.full((rows,), SENTINEL, device=DEV, dtype=torch.int32)
    assert argmax.argmax_bf16(logits=logits, out=out, rows=rows, vocab=vocab).launched
    torch.cuda.synchronize()
    assert torch.equal(out, torch.argmax(logits, dim=-1).to(torch.int32))


def test_plan():
    plan = argmax.plan_argmax_bf16(rows=1, vocab=151936)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (8, 1, 1)  # one 8-CTA cluster per row
    assert tuple(plan["block"]) == (512, 1, 1)
    assert plan["shared_mem"] == 0
    assert tuple(argmax.plan_argmax_bf16(rows=16, vocab=262144)["grid"]) == (128, 1, 1)
    assert tuple(argmax.plan_argmax_bf16(rows=128, vocab=262144)["grid"]) == (1024, 1, 1)
    # row mode: one CTA per row (rounded up to whole clusters), at least 1024 CTAs
    assert tuple(argmax.plan_argmax_bf16(rows=129, vocab=32000)["grid"]) == (1024, 1, 1)
    assert tuple(argmax.plan_argmax_bf16(rows=8191, vocab=32000)["grid"]) == (8192, 1, 1)


def test_empty_work_is_skipped():
    logits = nonzero_randn(2, 1024)
    out = torch.full((2,), SENTINEL, device=DEV, dtype=torch.int32)
    outcome = argmax.argmax_bf16(logits, out, 0, 1024)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert out.tolist() == [SENTINEL, SENTINEL]


def test_empty_vocab_is_an_error():
    logits = nonzero_randn(2, 8)
    out = torch.full((2,), SENTINEL, device=DEV, dtype=torch.int32)
    with pytest.raises(KernelError, match="vocab"):
        argmax.argmax_bf16(logits, out, 2, 0)
