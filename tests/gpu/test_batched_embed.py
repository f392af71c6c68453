"""GPU tests of specs/batched_embed.yaml (kernels/dflash/batched_embed.cu): exact gathers."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, batched_embed  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import same_bits  # noqa: E402

DEV = "cuda"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def reference(ids, table, vocab):
    """table[ids]; rows of zeros where an id is outside [0, vocab)."""
    valid = (ids >= 0) & (ids < vocab)
    rows = table[ids.clamp(0, vocab - 1).long()]
    return torch.where(valid[:, None], rows, torch.zeros_like(rows))


def run_and_check(ids, table, n, hidden, vocab):
    out = torch.full((n, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = batched_embed.batched_embed_bf16(ids, table, out, n, hidden, vocab)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    assert not torch.isnan(out).any(), "some output element was not written"
    same_bits(out, reference(ids, table.view(vocab, hidden), vocab), "bits as expected")


@pytest.mark.parametrize("n", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("hidden", [1024, 4096, 8192])
def test_engine_shapes(n, hidden):
    torch.manual_seed(n + hidden)
    vocab = 5000
    table = nonzero_randn(vocab, hidden)
    ids = torch.randint(0, vocab, (n,), device=DEV, dtype=torch.int32)
    run_and_check(ids, table, n, hidden, vocab)


def test_large_vocab():
    vocab, hidden, n = 151936, 4096, 257
    table = nonzero_randn(vocab, hidden)
    ids = torch.randint(0, vocab, (n,), device=DEV, dtype=torch.int32)
    ids[0], ids[1] = 0, vocab - 1
    run_and_check(ids, table, n, hidden, vocab)


@pytest.mark.parametrize("hidden", [8, 136, 2560, 12288])
def test_other_hidden(hidden):
    vocab, n = 300, 45
    table = nonzero_randn(vocab, hidden)
    ids = torch.randint(0, vocab, (n,), device=DEV, dtype=torch.int32)
    run_and_check(ids, table, n, hidden, vocab)


def test_out_of_range_ids_give_zero_rows():
    vocab, hidden = 1000, 4096
    table = nonzero_randn(vocab, hidden)
    ids = torch.tensor([5, -1, vocab, vocab + 7, I32_MIN, I32_MAX, 0, vocab - 1],
                       device=DEV, dtype=torch.int32)
    n = ids.numel()
    run_and_check(ids, table, n, hidden, vocab)
    out = torch.full((n, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    batched_embed.batched_embed_bf16(ids, table, out, n, hidden, vocab)
    torch.cuda.synchronize()
    assert (out[1:6] == 0).all()


def test_misaligned_pointers_take_the_scalar_path():
    vocab, hidden, n = 64, 4096, 19
    tbuf = nonzero_randn(vocab * hidden + 1)
    obuf = torch.full((n * hidden + 1,), float("nan"), device=DEV, dtype=torch.bfloat16)
    table, out = tbuf[1:], obuf[1:]
    ids = torch.randint(-2, vocab + 2, (n,), device=DEV, dtype=torch.int32)
    assert batched_embed.batched_embed_bf16(ids, table, out, n, hidden, vocab).launched
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    ref = reference(ids, table.view(vocab, hidden), vocab)
    same_bits(out, ref.view(-1), "bits as expected")


def test_keyword_arguments():
    vocab, hidden, n = 100, 1024, 5
    table = nonzero_randn(vocab, hidden)
    ids = torch.randint(0, vocab, (n,), device=DEV, dtype=torch.int32)
    out = torch.full((n, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = batched_embed.batched_embed_bf16(
        ids=ids, table=table, out=out, n=n, hidden=hidden, vocab=vocab
    )
    torch.cuda.synchronize()
    assert outcome.launched
    same_bits(out, table[ids.long()], "bits as expected")


def test_plan():
    plan = batched_embed.plan_batched_embed_bf16(n=64, hidden=4096, vocab=151936)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (64, 1, 1)
    assert tuple(plan["block"]) == (128, 1, 1)
    assert plan["shared_mem"] == 0
    assert tuple(batched_embed.plan_batched_embed_bf16(n=1, hidden=16384, vocab=8)["block"]) == (
        256, 1, 1)


def test_alignment_clause_not_launched():
    vocab, hidden, n = 10, 1030, 3
    plan = batched_embed.plan_batched_embed_bf16(n=n, hidden=hidden, vocab=vocab)
    assert not plan["launched"] and clause_in(plan["reason"], "hidden % 8 == 0")
    table = nonzero_randn(vocab, hidden)
    ids = torch.zeros(n, device=DEV, dtype=torch.int32)
    out = torch.full((n, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = batched_embed.batched_embed_bf16(ids, table, out, n, hidden, vocab)
    torch.cuda.synchronize()
    assert not outcome.launched and not bool(outcome)
    assert clause_in(outcome.reason, "hidden % 8 == 0")
    assert torch.isnan(out).all()


def test_empty_work_is_skipped():
    vocab, hidden = 10, 1024
    table = nonzero_randn(vocab, hidden)
    ids = torch.zeros(4, device=DEV, dtype=torch.int32)
    out = torch.full((4, hidden), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = batched_embed.batched_embed_bf16(ids, table, out, 0, hidden, vocab)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()


def test_too_small_table_is_an_error():
    vocab, hidden, n = 10, 1024, 4
    table = nonzero_randn(vocab - 1, hidden)
    ids = torch.zeros(n, device=DEV, dtype=torch.int32)
    out = torch.empty(n, hidden, device=DEV, dtype=torch.bfloat16)
    with pytest.raises(KernelError, match="table"):
        batched_embed.batched_embed_bf16(ids, table, out, n, hidden, vocab)
