"""GPU tests of specs/fill_slots.yaml (kernels/dflash/fill_slots.cu): exact int64 slot indices."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, fill_slots  # noqa: E402

DEV = "cuda"
SENTINEL = -123456789


def div_ceil(a, b):
    return -(-a // b)


def make_table(start, count, block_size, extra=0):
    """A shuffled block table exactly as long as the positions need (plus `extra`)."""
    n = div_ceil(start + count, block_size) + extra
    return torch.randperm(4 * n + 17, device=DEV)[:n].to(torch.int32)


def reference(block_table, start, count, block_size):
    pos = torch.arange(start, start + count, device=DEV, dtype=torch.int64)
    return block_table.long()[pos // block_size] * block_size + pos % block_size


def run(block_table, start, count, block_size, n_out=None):
    slots = torch.full((n_out or count,), SENTINEL, device=DEV, dtype=torch.int64)
    outcome = fill_slots.fill_slots(block_table, slots, start, count, block_size)
    torch.cuda.synchronize()
    return outcome, slots


@pytest.mark.parametrize(
    "start,count,block_size",
    [
        (0, 1, 16),
        (15, 1, 16),
        (16, 1, 16),
        (0, 512, 16),
        (3, 1000, 16),
        (4093, 8192, 256),
        (1000, 7, 1),
        (12345, 3000, 64),
        (1_000_000, 4096, 16),
        (77, 8192, 32),
    ],
)
def test_positions(start, count, block_size):
    torch.manual_seed(start + count + block_size)
    table = make_table(start, count, block_size)
    outcome, slots = run(table, start, count, block_size)
    assert outcome.launched and bool(outcome), outcome.reason
    assert torch.equal(slots, reference(table, start, count, block_size))


def test_larger_table_and_output_untouched_past_count():
    start, count, block_size = 40, 100, 16
    table = make_table(start, count, block_size, extra=50)
    outcome, slots = run(table, start, count, block_size, n_out=count + 10)
    assert outcome.launched
    assert torch.equal(slots[:count], reference(table, start, count, block_size))
    assert (slots[count:] == SENTINEL).all()


def test_keyword_arguments():
    table = make_table(5, 20, 8)
    slots = torch.full((20,), SENTINEL, device=DEV, dtype=torch.int64)
    outcome = fill_slots.fill_slots(block_table=table, slots=slots, start=5, count=20, block_size=8)
    torch.cuda.synchronize()
    assert outcome.launched
    assert torch.equal(slots, reference(table, 5, 20, 8))


def test_plan():
    plan = fill_slots.plan_fill_slots(start=0, count=512, block_size=16)
    assert plan["launched"]
    assert tuple(plan["grid"]) == (1, 1, 1)  # 2048 slots per CTA
    big = fill_slots.plan_fill_slots(start=0, count=1 << 26, block_size=16)
    assert tuple(big["grid"]) == (8192, 1, 1)  # capped: grid-stride beyond 2^24 slots
    assert tuple(plan["block"]) == (256, 1, 1)
    assert plan["shared_mem"] == 0


def test_empty_work_is_skipped():
    table = make_table(0, 16, 16)
    outcome, slots = run(table, 0, 0, 16, n_out=4)
    assert not outcome.launched
    assert (slots == SENTINEL).all()


def test_zero_block_size_is_an_error():
    table = make_table(0, 16, 16)
    slots = torch.full((16,), SENTINEL, device=DEV, dtype=torch.int64)
    with pytest.raises(KernelError, match="block_size"):
        fill_slots.fill_slots(table, slots, 0, 16, 0)


def test_too_small_block_table_is_an_error():
    start, count, block_size = 10, 40, 16  # positions 10..49 reach block 3: 4 entries
    table = torch.arange(3, device=DEV, dtype=torch.int32)
    slots = torch.full((count,), SENTINEL, device=DEV, dtype=torch.int64)
    with pytest.raises(KernelError, match="block_table"):
        fill_slots.fill_slots(table, slots, start, count, block_size)
