"""GPU tests of specs/rope_qwen3.yaml (kernels/dflash/rope_qwen3.cu) against a float32 torch
reference of Qwen3's query/key preparation: per-head RMS norm with q_norm / k_norm, then
rotate-half rotary embedding at per-token positions.

Tolerance, derived.  The kernel computes in f32 and rounds once to bf16, so for an output
element o (bf16) and the f32 reference r:
  |o - r| <= 1/2 ulp_bf16(max(|o|, |r|))        the kernel's final rounding
           + M * (|da| + 2^-17)                 its f32 value against the reference's
where M = |n_i| + |n_{i+64}| (the normalised pair, which bounds |pair|) and da is the
difference between the kernel's rotation angle and the reference's.  2^-17 (about 128 f32
ulps relative to M) covers the other f32 differences: the sum of squares in another order
and rsqrtf (a few ulps of the norm factor), sincosf against torch's cos / sin (2 ulps each)
and the separately rounded products.  A rotation by an angle off by da moves the pair by
at most |pair| * |da|.
  * Reference with the correctly rounded inv_freq (theta^(-i/64) in float64, rounded once to
    f32: what the kernel computes): both angles are the f32 product RN(pos * inv_freq[i]),
    da = 0, so the outputs agree to half a bf16 ulp plus f32 noise.
  * Reference as transformers computes it (inv_freq = 1 / theta^(arange(0, 128, 2) / 128) in
    f32, two roundings): its inv_freq may differ from the correctly rounded one by an ulp,
    and at pos = 131072 the angles then differ by |da| = |RN(pos inv_acc) - RN(pos inv_tf)|
    <= pos |inv_acc - inv_tf| + ulp_f32(angle), up to ~0.02 rad: a few bf16 ulps of the
    output.  da is computed here from both angle tables.
"""


import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import KernelError, rope_qwen3  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import bound  # noqa: E402

DEV = "cuda"
D = 128
EPS = 1e-6
MAX_POS = 131072
F32_SLACK = 2.0**-17


def inv_freq_accurate(theta):
    """theta^(-2i/128) correctly rounded to f32 (float64 power, one rounding)."""
    return (theta ** (-torch.arange(64, dtype=torch.float64) / 64)).float()


def inv_freq_transformers(theta):
    """Qwen3's rotary inv_freq as transformers computes it, in f32 on the CPU."""
    return 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))


def reference(x, w, pos, inv, eps=EPS):
    """f32 result [T, H, 128], the pair bound M [T, H, 128] and the angles [T, 64]."""
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()
    ang = pos.float()[:, None] * inv.to(DEV)[None, :]
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    n1, n2 = n[..., :64], n[..., 64:]
    out = torch.cat([n1 * c - n2 * s, n2 * c + n1 * s], dim=-1)
    m = (n1.abs() + n2.abs()).repeat(1, 1, 2)
    return out, m, ang


def bf16_ulp(mag):
    """The bf16 unit in the last place at magnitude mag (the subnormal spacing at least)."""
    _, e = torch.frexp(mag)
    return torch.ldexp(torch.ones_like(mag), torch.clamp(e - 8, min=-133))


def assert_close(got, ref, m, dang, what):
    """|got - ref| <= ulp/2 + M (|da| + 2^-17) elementwise (see the module docstring)."""
    o = got.float()
    tol = 0.5 * bf16_ulp(torch.maximum(o.abs(), ref.abs())) + m * (dang.repeat(1, 2)[:, None, :] + F32_SLACK)
    bound((o - ref).abs(), tol, what)  # a NaN output fails


def positions_for(num_tokens, gen):
    pos = torch.randint(0, MAX_POS + 1, (num_tokens,), generator=gen, dtype=torch.int32)
    fixed = torch.tensor([MAX_POS, 0, 1, MAX_POS - 1, 105616, 65536, 4095], dtype=torch.int32)
    k = min(num_tokens, fixed.numel())
    pos[:k] = fixed[:k]
    return pos.to(DEV)


def make_inputs(num_tokens, hq, hkv, seed):
    torch.manual_seed(seed)
    q = nonzero_randn(num_tokens, hq, D, scale=2.0, offset=0.25)
    k = nonzero_randn(num_tokens, hkv, D, scale=3.0, offset=-0.5)
    q_norm = nonzero_randn(D, scale=0.2, offset=1.0)
    k_norm = nonzero_randn(D, scale=0.3, offset=0.9)
    return q, k, q_norm, k_norm


def launch(q, k, q_norm, k_norm, pos, num_tokens, hq, hkv, theta, eps=EPS, head_dim=D):
    outcome = rope_qwen3.rope_qwen3(q, k, q_norm, k_norm, pos, num_tokens, hq, hkv, eps, theta,
                                    head_dim=head_dim)
    torch.cuda.synchronize()
    return outcome


def run_and_check(num_tokens, hq, hkv, theta, pos=None, seed=0):
    gen = torch.Generator().manual_seed(seed + num_tokens)
    q, k, q_norm, k_norm = make_inputs(num_tokens, hq, hkv, seed + 31 * num_tokens + hq)
    if pos is None:
        pos = positions_for(num_tokens, gen)
    q0, k0 = q.clone(), k.clone()
    outcome = launch(q, k, q_norm, k_norm, pos, num_tokens, hq, hkv, theta)
    assert outcome.launched and bool(outcome), outcome.reason

    acc = inv_freq_accurate(theta)
    rq, mq, ang = reference(q0, q_norm, pos, acc)
    rk, mk, _ = reference(k0, k_norm, pos, acc)
    zero = torch.zeros_like(ang)
    assert_close(q, rq, mq, zero, "q (accurate inv_freq)")
    assert_close(k, rk, mk, zero, "k (accurate inv_freq)")

    tf = inv_freq_transformers(theta)
    rq, mq, ang_tf = reference(q0, q_norm, pos, tf)
    rk, mk, _ = reference(k0, k_norm, pos, tf)
    dang = (ang - ang_tf).abs()
    assert_close(q, rq, mq, dang, "q (transformers inv_freq)")
    assert_close(k, rk, mk, dang, "k (transformers inv_freq)")
    return q, k


@pytest.mark.parametrize("theta", [1e6, 5e5])
@pytest.mark.parametrize("hq,hkv", [(32, 8), (16, 2)])
@pytest.mark.parametrize("num_tokens", [1, 7, 16, 1000])
def test_qwen3_shapes(num_tokens, hq, hkv, theta):
    run_and_check(num_tokens, hq, hkv, theta)


def test_prefill_chunk_and_other_theta():
    run_and_check(8192, 32, 8, 1e4, seed=1)


def test_inv_freq_the_angle_tolerance_accounts_for():
    """At the largest position, the transformers-style inv_freq moves angles by up to a few
    hundredths of a radian: the reason the second reference needs the angle term."""
    for theta in (1e6, 5e5):
        acc, tf = inv_freq_accurate(theta), inv_freq_transformers(theta)
        assert acc[0] == tf[0] == 1.0
        dang = (float(MAX_POS) * acc - float(MAX_POS) * tf).abs()
        assert float(dang.max()) < 0.05


@pytest.mark.parametrize("hq,hkv", [(1, 1), (100, 100), (64, 4), (3, 1)])
def test_other_head_counts(hq, hkv):
    # (1, 1): 16 row threads in a 64-thread CTA; (100, 100): more rows than threads, the
    # CTA loops; (3, 1): a warp not filled by rows.
    run_and_check(37, hq, hkv, 1e6, seed=2)


def test_negative_and_repeated_positions():
    pos = torch.tensor([-1, -131072, 5, 5, 0, 131072, -7, 3], device=DEV, dtype=torch.int32)
    run_and_check(pos.numel(), 8, 2, 1e6, pos=pos, seed=3)


def test_zero_and_large_rows():
    torch.manual_seed(4)
    num_tokens, hq, hkv = 5, 4, 2
    q, k, q_norm, k_norm = make_inputs(num_tokens, hq, hkv, 4)
    q[1, 2] = 0.0           # rsqrt(eps) times zeros: zeros
    q[3, 0] *= 3000.0       # large values: the norm brings them back
    k[2, 1] = 1e-30         # tiny values (bf16 subnormals and normals): eps dominates
    pos = torch.tensor([3, 131072, 17, 99999, 1], device=DEV, dtype=torch.int32)
    q0, k0 = q.clone(), k.clone()
    assert launch(q, k, q_norm, k_norm, pos, num_tokens, hq, hkv, 1e6).launched
    acc = inv_freq_accurate(1e6)
    rq, mq, ang = reference(q0, q_norm, pos, acc)
    rk, mk, _ = reference(k0, k_norm, pos, acc)
    zero = torch.zeros_like(ang)
    assert_close(q, rq, mq, zero, "q")
    assert_close(k, rk, mk, zero, "k")
    assert (q[1, 2] == 0).all()


def test_in_place_writes_nothing_else():
    num_tokens, hq, hkv = 16, 32, 8
    torch.manual_seed(5)
    guard = 1000
    qbuf = torch.full((num_tokens * hq * D + guard,), float("nan"), device=DEV, dtype=torch.bfloat16)
    kbuf = torch.full((num_tokens * hkv * D + guard,), float("nan"), device=DEV, dtype=torch.bfloat16)
    q = qbuf[: num_tokens * hq * D].view(num_tokens, hq, D)
    k = kbuf[: num_tokens * hkv * D].view(num_tokens, hkv, D)
    q.copy_(nonzero_randn(num_tokens, hq, D))
    k.copy_(nonzero_randn(num_tokens, hkv, D))
    _, _, q_norm, k_norm = make_inputs(1, 1, 1, 5)
    pos = torch.arange(100, 100 + num_tokens, device=DEV, dtype=torch.int32)
    q0, k0 = q.clone(), k.clone()
    assert launch(q, k, q_norm, k_norm, pos, num_tokens, hq, hkv, 1e6).launched
    assert torch.isnan(qbuf[num_tokens * hq * D:]).all() and torch.isnan(kbuf[num_tokens * hkv * D:]).all()
    acc = inv_freq_accurate(1e6)
    rq, mq, ang = reference(q0, q_norm, pos, acc)
    rk, mk, _ = reference(k0, k_norm, pos, acc)
    assert_close(q, rq, mq, torch.zeros_like(ang), "q")
    assert_close(k, rk, mk, torch.zeros_like(ang), "k")


def test_misaligned_pointers_take_the_scalar_path():
    # Views starting 2 bytes into their buffers: not 16-byte aligned.
    num_tokens, hq, hkv = 9, 8, 2
    torch.manual_seed(6)
    qbuf = nonzero_randn(num_tokens * hq * D + 1)
    kbuf = nonzero_randn(num_tokens * hkv * D + 1)
    q = qbuf[1:].view(num_tokens, hq, D)
    k = kbuf[1:].view(num_tokens, hkv, D)
    first = (qbuf[0].clone(), kbuf[0].clone())
    _, _, q_norm, k_norm = make_inputs(1, 1, 1, 6)
    wbuf = torch.cat([torch.zeros(1, device=DEV, dtype=torch.bfloat16), q_norm])
    q_norm_odd = wbuf[1:]  # misaligned weights too
    pos = torch.tensor([0, 1, 2, 131072, 7, 8, 100000, 65535, 3], device=DEV, dtype=torch.int32)
    q0, k0 = q.clone(), k.clone()
    assert launch(q, k, q_norm_odd, k_norm, pos, num_tokens, hq, hkv, 5e5).launched
    acc = inv_freq_accurate(5e5)
    rq, mq, ang = reference(q0, q_norm, pos, acc)
    rk, mk, _ = reference(k0, k_norm, pos, acc)
    zero = torch.zeros_like(ang)
    assert_close(q, rq, mq, zero, "q")
    assert_close(k, rk, mk, zero, "k")
    assert torch.equal(qbuf[0], first[0]) and torch.equal(kbuf[0], first[1])


def test_keyword_arguments():
    num_tokens, hq, hkv = 3, 4, 1
    q, k, q_norm, k_norm = make_inputs(num_tokens, hq, hkv, 7)
    pos = torch.tensor([10, 20, 30], device=DEV, dtype=torch.int32)
    q0 = q.clone()
    outcome = rope_qwen3.rope_qwen3(q=q, k=k, q_norm=q_norm, k_norm=k_norm, positions=pos,
                                    num_tokens=num_tokens, num_q_heads=hq, num_kv_heads=hkv,
                                    eps=EPS, theta=1e6, head_dim=D)
    torch.cuda.synchronize()
    assert outcome.launched
    rq, mq, ang = reference(q0, q_norm, pos, inv_freq_accurate(1e6))
    assert_close(q, rq, mq, torch.zeros_like(ang), "q")


# ---------------------------------------------------------------- plan and clauses


def test_plan():
    plan = rope_qwen3.plan_rope_qwen3(num_tokens=8192, num_q_heads=32, num_kv_heads=8, head_dim=D)
    assert plan["launched"]
    assert tuple(plan["block"]) == (320, 1, 1)  # 8 threads per head row, 40 rows
    assert 1 <= plan["grid"][0] <= 8192 and tuple(plan["grid"][1:]) == (1, 1)
    assert plan["shared_mem"] == 0
    small = rope_qwen3.plan_rope_qwen3(num_tokens=3, num_q_heads=1, num_kv_heads=1, head_dim=D)
    assert tuple(small["grid"]) == (3, 1, 1) and tuple(small["block"]) == (64, 1, 1)
    big = rope_qwen3.plan_rope_qwen3(num_tokens=3, num_q_heads=100, num_kv_heads=100, head_dim=D)
    assert tuple(big["block"]) == (1024, 1, 1)


def test_zero_tokens_is_not_launched():
    hq, hkv = 32, 8
    q, k, q_norm, k_norm = make_inputs(2, hq, hkv, 8)
    pos = torch.zeros(2, device=DEV, dtype=torch.int32)
    q0, k0 = q.clone(), k.clone()
    outcome = launch(q, k, q_norm, k_norm, pos, 0, hq, hkv, 1e6)
    assert not outcome.launched and not bool(outcome)
    assert "empty work" in str(outcome.reason)
    assert torch.equal(q, q0) and torch.equal(k, k0)
    assert not rope_qwen3.plan_rope_qwen3(num_tokens=0, num_q_heads=hq, num_kv_heads=hkv, head_dim=D)["launched"]


def test_other_head_dim_is_not_launched():
    q, k, q_norm, k_norm = make_inputs(4, 4, 2, 9)
    pos = torch.zeros(4, device=DEV, dtype=torch.int32)
    q0 = q.clone()
    outcome = launch(q, k, q_norm, k_norm, pos, 4, 4, 2, 1e6, head_dim=64)
    assert not outcome.launched
    assert clause_in(outcome.reason, "head_dim == 128") or clause_in(outcome.reason, "head_dim == HEAD_DIM")
    assert torch.equal(q, q0)


def test_too_small_positions_is_an_error():
    q, k, q_norm, k_norm = make_inputs(4, 4, 2, 10)
    pos = torch.zeros(3, device=DEV, dtype=torch.int32)
    with pytest.raises(KernelError, match="positions"):
        rope_qwen3.rope_qwen3(q, k, q_norm, k_norm, pos, 4, 4, 2, EPS, 1e6, head_dim=D)
