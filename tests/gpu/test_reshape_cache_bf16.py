"""GPU tests of specs/reshape_cache_bf16.yaml (kernels/dflash/reshape_cache_bf16.cu): exact writes."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, reshape_cache_bf16  # noqa: E402

from tests.gpu.bf16_helpers import bits, clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import same_bits  # noqa: E402

DEV = "cuda"
POISON = 0x7FA5  # a NaN bit pattern no copy of random data can produce


def poisoned_cache(num_blocks, block_size, heads, head_dim):
    c = torch.empty(num_blocks, block_size, heads, head_dim, device=DEV, dtype=torch.bfloat16)
    c.view(torch.int16).fill_(POISON)
    return c


def expected_cache(cache, src, slots, num_blocks, block_size):
    """cache with src[t] written at slot slots[t] for every valid slot (as int16 bits)."""
    flat = bits(cache).view(num_blocks * block_size, -1).clone()
    valid = (slots >= 0) & (slots < num_blocks * block_size)
    flat[slots[valid]] = bits(src).view(src.shape[0], -1)[valid]
    return flat


def run_and_check(num_tokens, heads, head_dim, block_size, num_blocks, slots):
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    want_k = expected_cache(kc, key, slots, num_blocks, block_size)
    want_v = expected_cache(vc, value, slots, num_blocks, block_size)
    outcome = reshape_cache_bf16.reshape_cache_bf16(
        key, value, kc, vc, slots, num_tokens, heads, head_dim, block_size, num_blocks
    )
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    assert torch.equal(bits(kc).view(num_blocks * block_size, -1), want_k)
    assert torch.equal(bits(vc).view(num_blocks * block_size, -1), want_v)


def distinct_slots(num_tokens, num_slots, pad_every=0):
    """Distinct random slots (a real slot mapping never repeats a slot), some set to -1."""
    slots = torch.randperm(num_slots, device=DEV)[:num_tokens].to(torch.int64)
    if pad_every:
        slots[::pad_every] = -1
    return slots


@pytest.mark.parametrize("num_tokens", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("heads,head_dim", [(8, 128), (2, 256), (4, 64), (32, 128)])
def test_engine_shapes(num_tokens, heads, head_dim):
    torch.manual_seed(num_tokens * 13 + heads * head_dim)
    block_size = 16
    num_blocks = (num_tokens + block_size - 1) // block_size * 2 + 1
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=7)
    run_and_check(num_tokens, heads, head_dim, block_size, num_blocks, slots)


def test_large_block_size_and_contiguous_slots():
    num_tokens, heads, head_dim, block_size, num_blocks = 700, 8, 128, 256, 8
    slots = torch.arange(300, 300 + num_tokens, device=DEV, dtype=torch.int64)
    run_and_check(num_tokens, heads, head_dim, block_size, num_blocks, slots)


def test_padding_and_out_of_range_slots_are_skipped():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 4
    slots = torch.tensor([5, -1, 64, 63, -(2**62), 2**40, 0, 17], device=DEV, dtype=torch.int64)
    run_and_check(slots.numel(), heads, head_dim, block_size, num_blocks, slots)


def test_head_dim_not_multiple_of_eight_but_row_is():
    # (num_kv_heads * head_dim) % 8 == 0 is what the vector path needs.
    run_and_check(50, 2, 36, 16, 8, distinct_slots(50, 128))


def test_misaligned_pointers_take_the_scalar_path():
    num_tokens, heads, head_dim, block_size, num_blocks = 33, 8, 128, 16, 4
    row = heads * head_dim
    kbuf = nonzero_randn(num_tokens * row + 1)
    key = kbuf[1:].view(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=5)
    want_k = expected_cache(kc, key, slots, num_blocks, block_size)
    want_v = expected_cache(vc, value, slots, num_blocks, block_size)
    assert reshape_cache_bf16.reshape_cache_bf16(
        key, value, kc, vc, slots, num_tokens, heads, head_dim, block_size, num_blocks
    ).launched
    torch.cuda.synchronize()
    assert torch.equal(bits(kc).view(num_blocks * block_size, -1), want_k)
    assert torch.equal(bits(vc).view(num_blocks * block_size, -1), want_v)


def test_keyword_arguments():
    num_tokens, heads, head_dim, block_size, num_blocks = 4, 8, 128, 16, 2
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.tensor([31, 0, 16, 15], device=DEV, dtype=torch.int64)
    outcome = reshape_cache_bf16.reshape_cache_bf16(
        key=key, value=value, k_cache=kc, v_cache=vc, slot_mapping=slots,
        num_tokens=num_tokens, num_kv_heads=heads, head_dim=head_dim,
        block_size=block_size, num_blocks=num_blocks,
    )
    torch.cuda.synchronize()
    assert outcome.launched
    same_bits(kc[1, 15], key[0], "bits as expected")
    same_bits(vc[0, 0], value[1], "bits as expected")
    same_bits(kc[1, 0], key[2], "bits as expected")
    same_bits(vc[0, 15], value[3], "bits as expected")


def test_plan():
    plan = reshape_cache_bf16.plan_reshape_cache_bf16(
        num_tokens=64, num_kv_heads=8, head_dim=128, block_size=16, num_blocks=256
    )
    assert plan["launched"]
    assert tuple(plan["grid"]) == (16, 1, 1)  # one warp per token, 4 tokens per CTA
    assert tuple(plan["block"]) == (128, 1, 1)
    assert plan["shared_mem"] == 0


def test_alignment_clause_not_launched():
    num_tokens, heads, head_dim, block_size, num_blocks = 4, 1, 36, 16, 2  # 36 % 8 != 0
    plan = reshape_cache_bf16.plan_reshape_cache_bf16(
        num_tokens=num_tokens, num_kv_heads=heads, head_dim=head_dim,
        block_size=block_size, num_blocks=num_blocks,
    )
    assert not plan["launched"]
    assert clause_in(plan["reason"], "(num_kv_heads * head_dim) % 8 == 0") or clause_in(
        plan["reason"], "num_kv_heads * head_dim % 8 == 0")
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.arange(num_tokens, device=DEV, dtype=torch.int64)
    outcome = reshape_cache_bf16.reshape_cache_bf16(
        key, value, kc, vc, slots, num_tokens, heads, head_dim, block_size, num_blocks
    )
    torch.cuda.synchronize()
    assert not outcome.launched and not bool(outcome)
    assert "head_dim" in str(outcome.reason)
    assert (bits(kc) == POISON).all() and (bits(vc) == POISON).all()


def test_empty_work_is_skipped():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 2
    key = nonzero_randn(2, heads, head_dim)
    value = nonzero_randn(2, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.arange(2, device=DEV, dtype=torch.int64)
    outcome = reshape_cache_bf16.reshape_cache_bf16(
        key, value, kc, vc, slots, 0, heads, head_dim, block_size, num_blocks
    )
    torch.cuda.synchronize()
    assert not outcome.launched
    assert (bits(kc) == POISON).all() and (bits(vc) == POISON).all()


def test_too_small_cache_is_an_error():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 4
    key = nonzero_randn(2, heads, head_dim)
    value = nonzero_randn(2, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks - 1, block_size, heads, head_dim)
    slots = torch.arange(2, device=DEV, dtype=torch.int64)
    with pytest.raises(KernelError, match="v_cache"):
        reshape_cache_bf16.reshape_cache_bf16(
            key, value, kc, vc, slots, 2, heads, head_dim, block_size, num_blocks
        )
