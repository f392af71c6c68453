"""GPU tests of specs/reshape_cache_fp8.yaml (kernels/dflash/reshape_cache_fp8.cu): bit-exact
against torch's `(x.float() / scale).to(torch.float8_e4m3fn)`, with `scale` the same
one-element CUDA tensor the kernel reads (torch then divides; with a Python-float scale it
would multiply by the reciprocal, a different rounding)."""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, reshape_cache_fp8  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import identical  # noqa: E402

DEV = "cuda"
E4M3 = torch.float8_e4m3fn
POISON = 0x7F  # E4M3 NaN: no finite |x / scale| <= 464 converts to it


def scale_tensor(s):
    return torch.tensor([s], device=DEV, dtype=torch.float32)


def e4m3_bytes(x, scale):
    """torch's conversion, as raw bytes: the reference."""
    return (x.float() / scale).to(E4M3).view(torch.uint8)


def poisoned_cache(num_blocks, block_size, heads, head_dim, poison=POISON):
    c = torch.empty(num_blocks, block_size, heads, head_dim, device=DEV, dtype=E4M3)
    c.view(torch.uint8).fill_(poison)
    return c


def expected_cache(cache, src, scale, slots, num_blocks, block_size):
    """The cache's bytes with e4m3(src[t] / scale) written at slot slots[t] for every valid slot."""
    flat = cache.view(torch.uint8).reshape(num_blocks * block_size, -1).clone()
    valid = (slots >= 0) & (slots < num_blocks * block_size)
    flat[slots[valid]] = e4m3_bytes(src, scale).reshape(src.shape[0], -1)[valid]
    return flat


def launch(key, value, kc, vc, slots, ks, vs, num_tokens, heads, head_dim, block_size, num_blocks):
    outcome = reshape_cache_fp8.reshape_cache_fp8(
        key, value, kc, vc, slots, ks, vs, num_tokens, heads, head_dim, block_size, num_blocks
    )
    torch.cuda.synchronize()
    return outcome


def run_and_check(key, value, slots, block_size, num_blocks, k_scale=0.37, v_scale=1.9):
    num_tokens, heads, head_dim = key.shape
    ks, vs = scale_tensor(k_scale), scale_tensor(v_scale)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    want_k = expected_cache(kc, key, ks, slots, num_blocks, block_size)
    want_v = expected_cache(vc, value, vs, slots, num_blocks, block_size)
    outcome = launch(key, value, kc, vc, slots, ks, vs, num_tokens, heads, head_dim, block_size, num_blocks)
    assert outcome.launched and bool(outcome), outcome.reason
    got_k = kc.view(torch.uint8).reshape(num_blocks * block_size, -1)
    got_v = vc.view(torch.uint8).reshape(num_blocks * block_size, -1)
    assert_bytes_equal(got_k, want_k, "k_cache")
    assert_bytes_equal(got_v, want_v, "v_cache")


def assert_bytes_equal(got, want, what):
    bad = (got != want).nonzero()
    assert bad.numel() == 0, (
        f"{what}: {bad.shape[0]} bytes differ, first at {bad[0].tolist()}: "
        f"got {int(got[tuple(bad[0])]):#04x}, want {int(want[tuple(bad[0])]):#04x}")
    identical(got.numel(), what)


def wide_bf16(*shape):
    """bf16 values of both signs over a wide range of magnitudes (2^-16 .. 2^10): their
    quotients cover E4M3's subnormals, normals and the values beyond 448."""
    mag = torch.exp2(torch.empty(*shape, device=DEV).uniform_(-16.0, 10.0))
    sign = torch.where(torch.rand(*shape, device=DEV) < 0.5, -1.0, 1.0)
    return (sign * mag).to(torch.bfloat16)


def distinct_slots(num_tokens, num_slots, pad_every=0):
    """Distinct random slots (a real slot mapping never repeats a slot), some set to -1."""
    slots = torch.randperm(num_slots, device=DEV)[:num_tokens].to(torch.int64)
    if pad_every:
        slots[::pad_every] = -1
    return slots


def all_bf16_rows(heads=8, head_dim=128):
    """Every bf16 bit pattern once (NaNs, infinities, subnormals, +-0 included), as
    [65536 / (heads * head_dim), heads, head_dim]."""
    bits = torch.arange(-32768, 32768, device=DEV, dtype=torch.int32).to(torch.int16)
    return bits.view(torch.bfloat16).view(-1, heads, head_dim)


# ---------------------------------------------------------------- torch's conversion itself


def test_torch_conversion_rules_the_kernel_matches():
    """What torch does, pinned: round to nearest even, no saturation: above 464 (the midpoint
    between 448 and the would-be 480) the result is NaN (0x7f / 0xff), not 448."""
    x = torch.tensor([448.0, 456.0, 464.0, 466.0, 480.0, 1e4, float("inf"), -464.0, -466.0,
                      float("-inf"), 2.0**-10, 3 * 2.0**-10, 2.0**-9, -0.0, 0.0], device=DEV)
    got = x.to(E4M3).view(torch.uint8).tolist()
    assert got == [0x7E, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x7F, 0xFE, 0xFF,
                   0xFF, 0x00, 0x02, 0x01, 0x80, 0x00]


# ---------------------------------------------------------------- engine shapes


@pytest.mark.parametrize("num_tokens", [1, 3, 64, 1000, 8192])
@pytest.mark.parametrize("heads,head_dim", [(8, 128), (2, 256), (4, 64), (32, 128)])
def test_engine_shapes(num_tokens, heads, head_dim):
    torch.manual_seed(num_tokens * 13 + heads * head_dim)
    block_size = 16
    num_blocks = (num_tokens + block_size - 1) // block_size * 2 + 1
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=7)
    key = nonzero_randn(num_tokens, heads, head_dim, scale=3.0)
    value = nonzero_randn(num_tokens, heads, head_dim, scale=0.5)
    run_and_check(key, value, slots, block_size, num_blocks)


@pytest.mark.parametrize("k_scale,v_scale", [(1.0, 1.0), (0.0123, 7.5), (1 / 448, 448 / 3)])
def test_wide_magnitudes(k_scale, v_scale):
    torch.manual_seed(7)
    num_tokens, heads, head_dim, block_size, num_blocks = 777, 8, 128, 16, 64
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=11)
    key = wide_bf16(num_tokens, heads, head_dim)
    value = wide_bf16(num_tokens, heads, head_dim)
    run_and_check(key, value, slots, block_size, num_blocks, k_scale, v_scale)


# ---------------------------------------------------------------- every bf16 value, many scales

# Fast-path divisors (2^-20 <= s <= 2^20, reciprocal and two correction steps) and its edges,
# then scales outside it (exact division): beyond the range, subnormal, zero, negative, inf, NaN.
FAST_SCALES = [1.0, 0.37, 3.0, 1 / 448, 448 / 3, 0.1, 1.7e-3, 2.0**-20, 2.0**20, 0.999999940395,
               1.00000011921, 2.0**-20 * 1.5, 2.0**20 * 0.75, 12345.678, 6.1e-5]
SLOW_SCALES = [2.0**-21, 2.0**21, 1e-30, 1e30, 1e-40, 0.0, -0.5, -3.0, float("inf"), float("nan")]


@pytest.mark.parametrize("k_scale", FAST_SCALES + SLOW_SCALES)
def test_every_bf16_value(k_scale):
    """All 65536 bf16 patterns as keys (and, reversed, as values with another scale), each
    compared with torch byte for byte: NaN and inf inputs, overflowing quotients, E4M3
    subnormals and ties, signed zeros."""
    key = all_bf16_rows()
    value = key.flip(0).contiguous()
    v_scale = 1.0 if k_scale != 1.0 else 0.37
    slots = torch.arange(key.shape[0], device=DEV, dtype=torch.int64)
    run_and_check(key, value, slots, 1, key.shape[0], k_scale, v_scale)


def test_random_fast_scales_with_every_bf16_value():
    """The fast quotient against torch's division for 64 log-uniform scales in [2^-20, 2^20]."""
    gen = torch.Generator().manual_seed(11)
    scales = torch.exp2(torch.empty(64).uniform_(-20.0, 20.0, generator=gen)).tolist()
    key = all_bf16_rows()
    value = key.flip(0).contiguous()
    slots = torch.arange(key.shape[0], device=DEV, dtype=torch.int64)
    for i in range(0, len(scales), 2):
        run_and_check(key, value, slots, 1, key.shape[0], scales[i], scales[i + 1])


def test_values_near_and_above_448_times_scale():
    scale = 0.25
    # x / 0.25 = 4x: 448 (max), 456 and 464 (round to 448), 466 and beyond (NaN), infinities.
    vals = [112.0, 114.0, 116.0, 116.5, 120.0, 128.0, 1e4, 3e38, float("inf"), 111.5, 110.0]
    row = torch.tensor(vals + [-v for v in vals], device=DEV)
    key = row.repeat(8 * 128 // row.numel() + 1)[: 8 * 128].view(1, 8, 128).repeat(5, 1, 1)
    key = key.to(torch.bfloat16)
    value = (key.float() * 2.0).to(torch.bfloat16)  # with v_scale 0.5: the same quotients
    slots = torch.tensor([3, 0, -1, 7, 5], device=DEV, dtype=torch.int64)
    run_and_check(key, value, slots, 4, 2, scale, 0.5)
    want = e4m3_bytes(key[0, 0, :22], scale_tensor(scale)).tolist()
    assert want[:4] == [0x7E, 0x7E, 0x7E, 0x7F] and want[4:9] == [0x7F] * 5  # torch: NaN, not 448


def test_subnormals_zeros_and_negative_zero():
    scale = 1.0
    e4m3_subnormal = [k * 2.0**-9 for k in range(8)]  # 0 .. 7 * 2^-9
    ties = [2.0**-10, 3 * 2.0**-10, 5 * 2.0**-10, 2.0**-10 * 1.0078125, 2.0**-7 * 1.0625]
    tiny = [2.0**-126, 2.0**-133, 1e-30, 2.0**-11]  # bf16 subnormals and values that round to 0
    vals = e4m3_subnormal + ties + tiny
    row = torch.tensor(vals + [-v for v in vals] + [0.0, -0.0], device=DEV).to(torch.bfloat16)
    key = row.repeat(1024 // row.numel() + 1)[:1024].view(1, 8, 128).repeat(3, 1, 1)
    value = key.flip(-1).contiguous()
    slots = torch.tensor([2, 1, 0], device=DEV, dtype=torch.int64)
    run_and_check(key, value, slots, 16, 1, scale, 0.5)
    zeros = torch.tensor([0.0, -0.0], device=DEV).to(torch.bfloat16)
    assert e4m3_bytes(zeros, scale_tensor(scale)).tolist() == [0x00, 0x80]


# ---------------------------------------------------------------- slots and layout


def test_large_block_size_and_contiguous_slots():
    torch.manual_seed(3)
    num_tokens, heads, head_dim, block_size, num_blocks = 700, 8, 128, 256, 8
    slots = torch.arange(300, 300 + num_tokens, device=DEV, dtype=torch.int64)
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    run_and_check(key, value, slots, block_size, num_blocks)


def test_padding_and_out_of_range_slots_are_skipped():
    torch.manual_seed(4)
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 4
    slots = torch.tensor([5, -1, 64, 63, -(2**62), 2**40, 0, 17], device=DEV, dtype=torch.int64)
    key = nonzero_randn(slots.numel(), heads, head_dim)
    value = nonzero_randn(slots.numel(), heads, head_dim)
    run_and_check(key, value, slots, block_size, num_blocks)


def test_head_dim_not_multiple_of_eight_but_row_is():
    torch.manual_seed(5)
    key = nonzero_randn(50, 2, 36)
    value = nonzero_randn(50, 2, 36)
    run_and_check(key, value, distinct_slots(50, 128), 16, 8)


def test_misaligned_pointers_take_the_scalar_path():
    torch.manual_seed(6)
    num_tokens, heads, head_dim, block_size, num_blocks = 33, 8, 128, 16, 4
    row = heads * head_dim
    key = nonzero_randn(num_tokens * row + 1, scale=4.0)[1:].view(num_tokens, heads, head_dim)
    value = wide_bf16(num_tokens, heads, head_dim)
    ks, vs = scale_tensor(0.37), scale_tensor(1.9)
    n = num_blocks * block_size * row
    kbuf = torch.empty(n + 1, device=DEV, dtype=E4M3)
    kbuf.view(torch.uint8).fill_(POISON)
    kc = kbuf[1:].view(num_blocks, block_size, heads, head_dim)  # 1 byte off: not 8-byte aligned
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=5)
    want_k = expected_cache(kc, key, ks, slots, num_blocks, block_size)
    want_v = expected_cache(vc, value, vs, slots, num_blocks, block_size)
    assert launch(key, value, kc, vc, slots, ks, vs, num_tokens, heads, head_dim, block_size, num_blocks).launched
    assert_bytes_equal(kc.view(torch.uint8).reshape(num_blocks * block_size, -1), want_k, "k_cache")
    assert_bytes_equal(vc.view(torch.uint8).reshape(num_blocks * block_size, -1), want_v, "v_cache")
    assert int(kbuf.view(torch.uint8)[0]) == POISON


def test_keyword_arguments():
    num_tokens, heads, head_dim, block_size, num_blocks = 4, 8, 128, 16, 2
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    ks, vs = scale_tensor(0.5), scale_tensor(2.0)
    slots = torch.tensor([31, 0, 16, 15], device=DEV, dtype=torch.int64)
    outcome = reshape_cache_fp8.reshape_cache_fp8(
        key=key, value=value, k_cache=kc, v_cache=vc, slot_mapping=slots, k_scale=ks, v_scale=vs,
        num_tokens=num_tokens, num_kv_heads=heads, head_dim=head_dim,
        block_size=block_size, num_blocks=num_blocks,
    )
    torch.cuda.synchronize()
    assert outcome.launched
    u8 = kc.view(torch.uint8)
    assert torch.equal(u8[1, 15], e4m3_bytes(key[0], ks))
    assert torch.equal(vc.view(torch.uint8)[0, 0], e4m3_bytes(value[1], vs))
    assert torch.equal(u8[1, 0], e4m3_bytes(key[2], ks))
    assert torch.equal(vc.view(torch.uint8)[0, 15], e4m3_bytes(value[3], vs))


def test_scales_are_read_from_device_memory_in_every_graph_replay():
    """One captured launch serves new scale values written into the scale arrays later."""
    torch.manual_seed(8)
    num_tokens, heads, head_dim, block_size, num_blocks = 40, 8, 128, 16, 4
    key = nonzero_randn(num_tokens, heads, head_dim, scale=2.0)
    value = nonzero_randn(num_tokens, heads, head_dim, scale=2.0)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    ks, vs = scale_tensor(1.0), scale_tensor(1.0)
    slots = distinct_slots(num_tokens, num_blocks * block_size, pad_every=9)
    args = (key, value, kc, vc, slots, ks, vs, num_tokens, heads, head_dim, block_size, num_blocks)
    assert reshape_cache_fp8.reshape_cache_fp8(*args).launched  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outcome = reshape_cache_fp8.reshape_cache_fp8(*args, stream=torch.cuda.current_stream())
        assert outcome.launched, outcome.reason
    for k_scale, v_scale in [(0.37, 1.9), (0.01, 100.0), (2.0**-21, 3.0)]:
        ks.fill_(k_scale)
        vs.fill_(v_scale)
        kc.view(torch.uint8).fill_(POISON)
        vc.view(torch.uint8).fill_(POISON)
        want_k = expected_cache(kc, key, ks, slots, num_blocks, block_size)
        want_v = expected_cache(vc, value, vs, slots, num_blocks, block_size)
        graph.replay()
        torch.cuda.synchronize()
        assert_bytes_equal(kc.view(torch.uint8).reshape(num_blocks * block_size, -1), want_k, "k_cache")
        assert_bytes_equal(vc.view(torch.uint8).reshape(num_blocks * block_size, -1), want_v, "v_cache")


# ---------------------------------------------------------------- plan and clauses


def test_plan():
    plan = reshape_cache_fp8.plan_reshape_cache_fp8(
        num_tokens=64, num_kv_heads=8, head_dim=128, block_size=16, num_blocks=256
    )
    assert plan["launched"]
    assert tuple(plan["grid"]) == (16, 1, 1)  # one warp per token, 4 tokens per CTA
    assert tuple(plan["block"]) == (128, 1, 1)
    assert plan["shared_mem"] == 0


def test_alignment_clause_not_launched():
    num_tokens, heads, head_dim, block_size, num_blocks = 4, 1, 36, 16, 2  # 36 % 8 != 0
    plan = reshape_cache_fp8.plan_reshape_cache_fp8(
        num_tokens=num_tokens, num_kv_heads=heads, head_dim=head_dim,
        block_size=block_size, num_blocks=num_blocks,
    )
    assert not plan["launched"]
    assert clause_in(plan["reason"], "(num_kv_heads * head_dim) % 8 == 0")
    key = nonzero_randn(num_tokens, heads, head_dim)
    value = nonzero_randn(num_tokens, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.arange(num_tokens, device=DEV, dtype=torch.int64)
    outcome = launch(key, value, kc, vc, slots, scale_tensor(1.0), scale_tensor(1.0),
                     num_tokens, heads, head_dim, block_size, num_blocks)
    assert not outcome.launched and not bool(outcome)
    assert "head_dim" in str(outcome.reason)
    assert (kc.view(torch.uint8) == POISON).all() and (vc.view(torch.uint8) == POISON).all()


def test_empty_work_is_skipped():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 2
    key = nonzero_randn(2, heads, head_dim)
    value = nonzero_randn(2, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.arange(2, device=DEV, dtype=torch.int64)
    outcome = launch(key, value, kc, vc, slots, scale_tensor(1.0), scale_tensor(1.0),
                     0, heads, head_dim, block_size, num_blocks)
    assert not outcome.launched
    assert "empty work" in str(outcome.reason)
    assert (kc.view(torch.uint8) == POISON).all() and (vc.view(torch.uint8) == POISON).all()


def test_too_small_cache_is_an_error():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 4
    key = nonzero_randn(2, heads, head_dim)
    value = nonzero_randn(2, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks - 1, block_size, heads, head_dim)
    slots = torch.arange(2, device=DEV, dtype=torch.int64)
    with pytest.raises(KernelError, match="v_cache"):
        reshape_cache_fp8.reshape_cache_fp8(
            key, value, kc, vc, slots, scale_tensor(1.0), scale_tensor(1.0),
            2, heads, head_dim, block_size, num_blocks
        )


def test_scale_must_be_a_device_array_of_one_f32():
    heads, head_dim, block_size, num_blocks = 8, 128, 16, 4
    key = nonzero_randn(2, heads, head_dim)
    value = nonzero_randn(2, heads, head_dim)
    kc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    vc = poisoned_cache(num_blocks, block_size, heads, head_dim)
    slots = torch.arange(2, device=DEV, dtype=torch.int64)
    bad = torch.tensor([1.0], device=DEV, dtype=torch.float64)
    with pytest.raises(KernelError, match="k_scale"):
        reshape_cache_fp8.reshape_cache_fp8(
            key, value, kc, vc, slots, bad, scale_tensor(1.0), 2, heads, head_dim, block_size, num_blocks
        )
