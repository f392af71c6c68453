"""GPU tests of the prefill flash-attention kernels (modules attn_prefill, attn_prefill_fa128).

Through the generated bindings, against a float32 reference computed here with torch on the
same bf16 inputs (K/V gathered from the paged cache, kv heads expanded for GQA):

* attn_prefill_paged_64 / attn_prefill_64: head_dim 64, 128, 256, causal or not, sliding
  windows, q_offset (chunked prefill), GQA ratios 1, 2, 4, 8, cache block sizes 16, 32, 64
  (and 1, 24, 48) with shuffled block tables, batch > 1;
* the 128-row twins attn_prefill_fa128_paged / attn_prefill_fa128 (head_dim 256, causal, no
  window): against the reference AND bit for bit against the 64-row kernels (0 differing bf16
  values on every case);
* the fallback chains attn_paged / attn_contiguous run the twin when it applies and the 64-row
  kernel otherwise, and say which one ran.

Outputs are poisoned with NaN before every launch (and unused cache blocks hold NaN), so an
unwritten output or a read outside the valid KV rows shows up.

Tolerance vs the f32 reference: |out - ref| <= ATOL + RTOL * |ref| with ATOL = RTOL = 1e-2.
Both sides use the same bf16 inputs, so the error comes from (1) rounding the output to bf16
(relative 2^-9, about 0.2%: up to 0.008 absolute for outputs near 4, hence the relative term) and
(2) the probabilities P rounded to bf16 before the PV product (relative 2^-9 each, so at most
2^-9 * max|v| ~ 0.009 on a row, in practice much less since the roundings take both signs); the
f32 accumulation and ex2.approx (2 ulp) add little. On an H200 the worst case over these cases
was 0.0091 absolute and 0.31 of the bound (about 3x margin).
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - only on machines without a GPU
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

kernelgen_ops = pytest.importorskip("kernelgen_ops")
from kernelgen_ops import attn_prefill, attn_prefill_fa128  # noqa: E402

from tests.gpu.bf16_helpers import bits  # noqa: E402
from tests.gpu.checks import bound  # noqa: E402

DEV = "cuda"
ATOL = 1e-2
RTOL = 1e-2


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _gen(seed):
    return torch.Generator(device="cpu").manual_seed(seed)


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen).to(torch.bfloat16).to(DEV)


def _kernel_name(outcome):
    return (outcome.kernel or "").split(".")[-1]


def make_paged(K, V, cbs, gen):
    """Scatter contiguous K, V [kv_len, hkv, d] into a NaN-filled paged cache with a shuffled
    block table (plus spare, never referenced blocks)."""
    kv_len, hkv, d = K.shape
    nb = (kv_len + cbs - 1) // cbs
    nblocks = nb + 3
    kc = torch.full((nblocks, cbs, hkv, d), float("nan"), dtype=torch.bfloat16, device=DEV)
    vc = torch.full_like(kc, float("nan"))
    perm = torch.randperm(nblocks, generator=gen)[:nb]
    bt = perm.to(torch.int32).to(DEV)
    if nb:
        pad = nb * cbs - kv_len
        Kp = torch.cat([K, torch.full((pad, hkv, d), float("nan"), dtype=K.dtype, device=DEV)])
        Vp = torch.cat([V, torch.full((pad, hkv, d), float("nan"), dtype=V.dtype, device=DEV)])
        kc[perm.to(DEV)] = Kp.view(nb, cbs, hkv, d)
        vc[perm.to(DEV)] = Vp.view(nb, cbs, hkv, d)
    return kc, vc, bt


def reference(q, K, V, q_offset, causal, window, scale):
    """f32 attention of q [q_len, hq, d] over K, V [kv_len, hkv, d]. Key k is visible to the
    query at position p = q_offset + i when (not causal or k <= p) and, with a window w > 0,
    p - w < k <= p. A row with no visible key gives zeros."""
    q_len, hq, d = q.shape
    kv_len, hkv, _ = K.shape
    group = hq // hkv
    Kx = K.float().repeat_interleave(group, dim=1)
    Vx = V.float().repeat_interleave(group, dim=1)
    pos = q_offset + torch.arange(q_len, device=DEV)[:, None]
    key = torch.arange(kv_len, device=DEV)[None, :]
    vis = torch.ones(q_len, kv_len, dtype=torch.bool, device=DEV)
    if causal or window:
        vis &= key <= pos
    if window:
        vis &= key > pos - window
    out = torch.empty(q_len, hq, d, dtype=torch.float32, device=DEV)
    step = 4
    for h0 in range(0, hq, step):
        s = torch.einsum("qhd,khd->hqk", q[:, h0:h0 + step].float(), Kx[:, h0:h0 + step]) * scale
        s = s.masked_fill(~vis, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        l = p.sum(-1, keepdim=True).permute(1, 0, 2)  # [q, h, 1]
        o = torch.einsum("hqk,khd->qhd", p, Vx[:, h0:h0 + step])
        out[:, h0:h0 + step] = torch.where(l > 0, o / l.clamp_min(1e-30), torch.zeros_like(o))
    return out


def assert_close(out, ref, what):
    assert not torch.isnan(out).any(), f"{what}: NaN in output (unwritten or bad read)"
    bound((out.float() - ref).abs(), ATOL + RTOL * ref.abs(), what)


def count_bit_diffs(a, b):
    return (bits(a) != bits(b)).sum().item()


def paged_args(q, kc, vc, out, bt, q_len, kv_len, q_offset, hq, hkv, cbs, causal, window, scale):
    return dict(q=q, k_cache=kc, v_cache=vc, output=out, block_table=bt, q_len=q_len,
                kv_len=kv_len, q_offset=q_offset, num_q_heads=hq, num_kv_heads=hkv,
                cache_block_size=cbs, causal=causal, sliding_window=window, inv_sqrt_d=scale)


def run_paged_64(a, head_dim):
    return attn_prefill.attn_prefill_paged_64(
        a["q"], a["k_cache"], a["v_cache"], a["output"], a["block_table"], a["q_len"],
        a["kv_len"], a["q_offset"], a["num_q_heads"], a["num_kv_heads"], a["cache_block_size"],
        a["causal"], a["sliding_window"], a["inv_sqrt_d"], head_dim=head_dim)


def run_paged_twin(a, head_dim, mod=attn_prefill_fa128):
    """The paged twin of ``mod`` (a build's attn_prefill_fa128 module)."""
    return mod.attn_prefill_fa128_paged(
        a["q"], a["k_cache"], a["v_cache"], a["output"], a["block_table"], a["q_len"],
        a["kv_len"], a["q_offset"], a["num_q_heads"], a["num_kv_heads"], a["cache_block_size"],
        a["inv_sqrt_d"], head_dim=head_dim, causal=a["causal"],
        sliding_window=a["sliding_window"])


def contig_args(q, k, v, out, seq_len, hq, hkv, causal, window, scale):
    return dict(q=q, k=k, v=v, output=out, seq_len=seq_len, num_q_heads=hq, num_kv_heads=hkv,
                causal=causal, sliding_window=window, inv_sqrt_d=scale)


def run_contig_64(a, head_dim, batch):
    return attn_prefill.attn_prefill_64(
        a["q"], a["k"], a["v"], a["output"], a["seq_len"], a["num_q_heads"], a["num_kv_heads"],
        a["causal"], a["sliding_window"], a["inv_sqrt_d"], head_dim=head_dim, batch=batch)


def run_contig_twin(a, head_dim, batch, mod=attn_prefill_fa128):
    """The contiguous twin of ``mod`` (a build's attn_prefill_fa128 module)."""
    return mod.attn_prefill_fa128(
        a["q"], a["k"], a["v"], a["output"], a["seq_len"], a["num_q_heads"], a["num_kv_heads"],
        a["inv_sqrt_d"], head_dim=head_dim, causal=a["causal"],
        sliding_window=a["sliding_window"], batch=batch)


def paged_inputs(case):
    """A PAGED_CASES case's inputs: q, K, V, the paged cache kc, vc, bt, kv_len, scale."""
    d, hq, hkv, q_len, q_offset, _, _, cbs = case
    kv_len = q_offset + q_len
    gen = _gen(hash(case) & 0xFFFF)
    q = _randn(gen, q_len, hq, d)
    K = _randn(gen, kv_len, hkv, d)
    V = _randn(gen, kv_len, hkv, d)
    kc, vc, bt = make_paged(K, V, cbs, gen)
    return q, K, V, kc, vc, bt, kv_len, 1.0 / math.sqrt(d)


def contig_inputs(case):
    """A CONTIG_CASES case's inputs: q, k, v [batch, seq_len, heads, d], scale."""
    d, hq, hkv, L, B, _, _ = case
    gen = _gen(hash(case) & 0xFFFF)
    q = _randn(gen, B, L, hq, d)
    k = _randn(gen, B, L, hkv, d)
    v = _randn(gen, B, L, hkv, d)
    return q, k, v, 1.0 / math.sqrt(d)


def twin_applies(d, causal, window):
    return d == 256 and causal == 1 and window == 0


# ---------------------------------------------------------------------------------------------
# paged
# ---------------------------------------------------------------------------------------------
# (head_dim, hq, hkv, q_len, q_offset, causal, window, cache_block_size); kv_len = q_offset + q_len
PAGED_CASES = [
    (64, 4, 4, 1, 0, 1, 0, 16),
    (64, 8, 4, 17, 5, 1, 0, 32),
    (64, 8, 1, 129, 0, 0, 0, 64),
    (64, 16, 2, 1000, 300, 1, 128, 16),
    (128, 4, 4, 127, 0, 1, 0, 64),
    (128, 8, 2, 128, 64, 1, 0, 16),
    (128, 8, 1, 1000, 0, 1, 200, 32),
    (128, 4, 1, 17, 1000, 0, 0, 64),
    (128, 16, 2, 4096, 0, 1, 0, 64),
    (256, 2, 2, 1, 4095, 1, 0, 16),
    (256, 4, 4, 1, 0, 1, 0, 32),
    (256, 8, 4, 17, 0, 1, 0, 32),
    (256, 8, 1, 127, 5, 1, 0, 64),
    (256, 16, 2, 128, 0, 1, 0, 16),
    (256, 8, 8, 129, 100, 1, 0, 32),
    (256, 8, 1, 129, 17, 1, 0, 32),
    (256, 16, 4, 1000, 37, 1, 0, 64),
    (256, 4, 2, 1000, 3000, 1, 0, 16),
    (256, 16, 4, 4096, 0, 1, 0, 32),
    (256, 8, 4, 1000, 0, 0, 0, 64),
    (256, 4, 2, 127, 100, 1, 50, 16),
    (256, 8, 8, 128, 33, 0, 64, 64),
    # block sizes that are not powers of two, and 1
    (256, 8, 2, 129, 40, 1, 0, 24),
    (128, 8, 4, 200, 17, 1, 0, 48),
    (64, 4, 2, 33, 3, 0, 0, 1),
]


@pytest.mark.parametrize("case", PAGED_CASES, ids=lambda c: "d{}-hq{}-hkv{}-q{}-off{}-c{}-w{}-bs{}".format(*c))
def test_paged(case):
    d, hq, hkv, q_len, q_offset, causal, window, cbs = case
    q, K, V, kc, vc, bt, kv_len, scale = paged_inputs(case)
    ref = reference(q, K, V, q_offset, causal, window, scale)

    out64 = torch.full_like(q, float("nan"))
    a64 = paged_args(q, kc, vc, out64, bt, q_len, kv_len, q_offset, hq, hkv, cbs, causal,
                     window, scale)
    o = run_paged_64(a64, d)
    assert o.launched, o.reason
    torch.cuda.synchronize()
    assert_close(out64, ref, f"attn_prefill_paged_64 {case}")

    out_twin = torch.full_like(q, float("nan"))
    at = dict(a64, output=out_twin)
    o = run_paged_twin(at, d)
    if twin_applies(d, causal, window):
        assert o.launched, o.reason
        torch.cuda.synchronize()
        assert_close(out_twin, ref, f"attn_prefill_fa128_paged {case}")
        assert count_bit_diffs(out_twin, out64) == 0, "twin not bit-identical to 64-row kernel"
    else:
        assert not o.launched and isinstance(o.reason, str) and o.reason
        assert torch.isnan(out_twin).all(), "a kernel that does not apply wrote its output"

    out_chain = torch.full_like(q, float("nan"))
    o = attn_prefill_fa128.attn_paged(**dict(a64, output=out_chain), head_dim=d)
    assert o.launched, o.reason
    expect = "attn_prefill_fa128_paged" if twin_applies(d, causal, window) else "attn_prefill_paged_64"
    assert _kernel_name(o) == expect, o.kernel
    torch.cuda.synchronize()
    assert count_bit_diffs(out_chain, out64) == 0


# ---------------------------------------------------------------------------------------------
# contiguous
# ---------------------------------------------------------------------------------------------
# (head_dim, hq, hkv, seq_len, batch, causal, window)
CONTIG_CASES = [
    (64, 4, 4, 1, 3, 1, 0),
    (64, 8, 2, 129, 2, 0, 0),
    (64, 8, 1, 1000, 2, 1, 64),
    (128, 8, 1, 1000, 2, 1, 0),
    (128, 4, 4, 17, 3, 1, 8),
    (128, 16, 2, 128, 2, 0, 0),
    (256, 4, 4, 1, 2, 1, 0),
    (256, 8, 2, 17, 3, 1, 0),
    (256, 8, 4, 127, 2, 1, 0),
    (256, 16, 2, 128, 2, 1, 0),
    (256, 8, 8, 129, 2, 1, 0),
    (256, 16, 4, 1000, 2, 1, 0),
    (256, 8, 1, 1000, 3, 1, 0),
    (256, 16, 4, 4096, 1, 1, 0),
    (256, 16, 2, 128, 1, 0, 33),
    (256, 4, 1, 1000, 3, 1, 100),
    (256, 8, 2, 129, 2, 0, 0),
]


@pytest.mark.parametrize("case", CONTIG_CASES, ids=lambda c: "d{}-hq{}-hkv{}-L{}-b{}-c{}-w{}".format(*c))
def test_contiguous(case):
    d, hq, hkv, L, B, causal, window = case
    q, k, v, scale = contig_inputs(case)

    out64 = torch.full_like(q, float("nan"))
    a64 = contig_args(q, k, v, out64, L, hq, hkv, causal, window, scale)
    o = run_contig_64(a64, d, B)
    assert o.launched, o.reason
    torch.cuda.synchronize()
    for b in range(B):
        ref = reference(q[b], k[b], v[b], 0, causal, window, scale)
        assert_close(out64[b], ref, f"attn_prefill_64 {case} batch {b}")

    out_twin = torch.full_like(q, float("nan"))
    o = run_contig_twin(dict(a64, output=out_twin), d, B)
    if twin_applies(d, causal, window):
        assert o.launched, o.reason
        torch.cuda.synchronize()
        assert count_bit_diffs(out_twin, out64) == 0, "twin not bit-identical to 64-row kernel"
    else:
        assert not o.launched and isinstance(o.reason, str) and o.reason
        assert torch.isnan(out_twin).all()

    out_chain = torch.full_like(q, float("nan"))
    o = attn_prefill_fa128.attn_contiguous(**dict(a64, output=out_chain), head_dim=d, batch=B)
    assert o.launched, o.reason
    expect = "attn_prefill_fa128" if twin_applies(d, causal, window) else "attn_prefill_64"
    assert _kernel_name(o) == expect, o.kernel
    torch.cuda.synchronize()
    assert count_bit_diffs(out_chain, out64) == 0


# ---------------------------------------------------------------------------------------------
# launch decisions
# ---------------------------------------------------------------------------------------------
def test_empty_work_is_skipped():
    gen = _gen(7)
    d, hq, hkv = 256, 8, 4
    q = _randn(gen, 1, hq, d)
    K = _randn(gen, 64, hkv, d)
    kc, vc, bt = make_paged(K, K, 32, gen)
    out = torch.full_like(q, float("nan"))
    a = paged_args(q, kc, vc, out, bt, 0, 64, 64, hq, hkv, 32, 1, 0, 1.0 / 16)
    assert not run_paged_64(a, d).launched
    assert not run_paged_twin(a, d).launched
    assert not attn_prefill_fa128.attn_paged(**a, head_dim=d).launched
    c = contig_args(q, q, q, out, 0, hq, hkv, 1, 0, 1.0 / 16)
    assert not run_contig_64(c, d, 1).launched
    assert not run_contig_twin(c, d, 1).launched
    c = contig_args(q, q, q, out, 1, hq, hkv, 1, 0, 1.0 / 16)
    assert not run_contig_64(c, d, 0).launched
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


def test_not_applicable():
    gen = _gen(8)
    d = 256
    q = _randn(gen, 4, 6, d)
    K = _randn(gen, 4, 4, d)
    kc, vc, bt = make_paged(K, K, 16, gen)
    out = torch.full_like(q, float("nan"))
    # 6 q heads over 4 kv heads: no kernel applies.
    a = paged_args(q, kc, vc, out, bt, 4, 4, 0, 6, 4, 16, 1, 0, 1.0 / 16)
    for o in (run_paged_64(a, d), run_paged_twin(a, d), attn_prefill_fa128.attn_paged(**a, head_dim=d)):
        assert not o.launched and isinstance(o.reason, str) and o.reason
    # no variant for head_dim 96
    a = paged_args(q, kc, vc, out, bt, 4, 4, 0, 4, 4, 16, 1, 0, 1.0 / 16)
    assert not run_paged_64(a, 96).launched
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


# ---------------------------------------------------------------------------------------------
# prefill_attn: the drafter's handle on the head_dim 128 instance
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [(128, 32, 8, 16, 1, 0, 0), (128, 4, 4, 129, 2, 1, 0), (128, 8, 2, 300, 1, 1, 64)],
                         ids=lambda c: "d{}-hq{}-hkv{}-L{}-b{}-c{}-w{}".format(*c))
def test_prefill_attn_handle_is_the_head_dim_128_instance(case):
    d, hq, hkv, L, B, causal, window = case
    q, k, v, scale = contig_inputs(case)
    out64 = torch.full_like(q, float("nan"))
    a64 = contig_args(q, k, v, out64, L, hq, hkv, causal, window, scale)
    assert run_contig_64(a64, d, B).launched
    out = torch.full_like(q, float("nan"))
    o = attn_prefill.prefill_attn(**dict(a64, output=out), head_dim=d, batch=B)
    assert o.launched and _kernel_name(o) == "prefill_attn", o.reason
    torch.cuda.synchronize()
    assert count_bit_diffs(out, out64) == 0
    for b in range(B):
        assert_close(out[b], reference(q[b], k[b], v[b], 0, causal, window, scale), f"prefill_attn {case} batch {b}")


def test_prefill_attn_handle_applies_only_at_head_dim_128():
    case = (64, 8, 2, 64, 1, 0, 0)
    q, k, v, scale = contig_inputs(case)
    out = torch.full_like(q, float("nan"))
    o = attn_prefill.prefill_attn(**contig_args(q, k, v, out, 64, 8, 2, 0, 0, scale), head_dim=64, batch=1)
    assert not o.launched and "head_dim == 128" in o.reason, o.reason
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
