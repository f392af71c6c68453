"""GPU tests of the drafter attention kernels (module attn_dflash).

Through the generated bindings, against a float32 reference computed here with torch from the
same cache contents (K / V gathered from the paged cache through the block table, kv heads
expanded for GQA; for FP8 the reference reads the dequantized values k_scale * E4M3):

* unsplit and split members of the BF16 and FP8 chains on q rows {1, 7, 16, 64}, kv_len
  {1, 15, 16, 17, 1000, 8192, 32768} (32768 on two configurations only), block sizes 16 and 64
  with shuffled block tables (and NaN in every cache row no valid key maps to), GQA ratios
  1, 4, 8, causal or not, window 0 or 2048;
* split and unsplit agree within the tolerance and, where one 8-CTA cluster covers the keys (at
  most 8 chunks of 128 keys), bit for bit by construction (the unsplit kernels fold the same
  chunks with the same arithmetic; beyond, the split kernels fold per cluster first); each is
  bitwise repeatable (two launches, the output poisoned with NaN before each); the split grid
  is rounded up to whole 8-CTA clusters, so kv_len 1000 also covers empty splits inside a
  cluster; the split counters are zero again after every launch;
* which chain member runs: the unsplit kernel for short key ranges, the split kernel when
  kv_len >= 512 and the unsplit grid leaves most SMs idle;
* the indirect kernel: one CUDA graph captured per (max_kv_len, mask) setting, replayed 100
  times with new device-side kv_len / q_offset / q_rope_pos, each replay bit-identical to an
  eager launch of the direct chain with kv_len and q_offset = q_rope_pos (with max_kv_len 32768
  the replays' kv_len crosses the lengths where the chunk grows: 128, 256, 512 and 1024 keys).

Tolerance vs the f32 reference: |out - ref| <= ATOL + RTOL * |ref|, ATOL = RTOL = 1e-2. Both
sides read the same K / V values (FP8: the exact dequantized values; the kernel converts E4M3 to
bf16 exactly and folds k_scale into the softmax scale, v_scale into the final normalisation), so
the error comes from (1) rounding the output to bf16 (relative 2^-9, 0.2%), (2) the
probabilities rounded to bf16 before the PV product (relative 2^-9 each, at most
2^-9 * max|v| ~ 0.01 on a row for |v| <= 5, in practice much less because the roundings take
both signs and average out over many keys), (3) the exp2 approximation (2 ulp) and f32
accumulation order, and for the split path (4) the f32 merge of partial states (a few ulp of
f32). The worst case measured is printed by each test (`max err`), and stays well inside.
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - only on machines without a GPU
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

kernelgen_ops = pytest.importorskip("kernelgen_ops")
from kernelgen_ops import attn_dflash  # noqa: E402

from tests.gpu.bf16_helpers import bits  # noqa: E402
from tests.gpu.checks import bound, identical, same_bits  # noqa: E402

DEV = "cuda"
D = 128
ATOL = 1e-2
RTOL = 1e-2
SPLIT_KEYS = 128  # keys per split at least
MAX_GROUPS = 5  # clusters of splits at most (40 chunks)
SPLIT_MIN_KV = 512  # the chains' split members from this many keys
CLUSTER = 8  # split kernels: CTAs per cluster; splits rounded up to whole clusters
ROWS = 64


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _gen(seed):
    return torch.Generator(device="cpu").manual_seed(seed)


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen).to(torch.bfloat16).to(DEV)


def _name(outcome):
    return (outcome.kernel or "").split(".")[-1]


def mblocks(q_rows, hq, hkv):
    return -(-q_rows * (hq // hkv) // ROWS)


def workspace(q_rows, hq, hkv, kv_len):
    """The split kernels' workspace and counters for kv_len keys (a bound, for the indirect one):
    the sizes the split kernel's plan computes from the spec."""
    sizes = attn_dflash.prefill_attn_dflash_bf16_split.plan(
        q_rows=q_rows, kv_len=kv_len, q_offset=0, num_q_heads=hq, num_kv_heads=hkv, block_size=16,
        causal=0, window=0)["sizes"]
    ws = torch.empty(sizes["workspace"], dtype=torch.float32, device=DEV)
    cnt = torch.zeros(sizes["counters"], dtype=torch.int32, device=DEV)  # every launch leaves it zero
    return ws, cnt


def chunk_keys(span, fp8):
    """Keys per chunk (split) of a span of keys, at most 40 chunks: bf16, 128 doubled while more
    would be needed; fp8, the fewest whole 32-key tiles (at least 128)."""
    max_chunks = MAX_GROUPS * CLUSTER
    if fp8:
        return max(SPLIT_KEYS, 32 * -(-span // (32 * max_chunks)))
    keys = SPLIT_KEYS
    while -(-span // max_chunks) > keys:
        keys *= 2
    return keys


def spans(q_rows, kv_len, q_offset, hq, hkv, causal, window):
    """Each row block's span: the keys some of its rows can see, from the 32-key tile of the first."""
    group, out = hq // hkv, []
    for mb in range(mblocks(q_rows, hq, hkv)):
        m0, m1 = mb * ROWS, min((mb + 1) * ROWS, q_rows * group) - 1
        lo = max(0, q_offset + m0 // group - window + 1) if window else 0
        hi = min(kv_len - 1, q_offset + m1 // group) if causal else kv_len - 1
        out.append(max(1, hi + 1 - lo // 32 * 32))
    return out


def one_cluster(case, q_offset, fp8):
    """Whether one cluster of splits covers every row block's span (split and unsplit: the same bits)."""
    q_rows, kv_len, _, hq, hkv, causal, window = case
    return all(s <= CLUSTER * chunk_keys(s, fp8) for s in spans(q_rows, kv_len, q_offset, hq, hkv, causal, window))


def make_paged(K, V, bs, gen, fill):
    """K, V [kv_len, hkv, d] scattered into a paged cache [nblocks, bs, hkv, d] (spare blocks
    and the tail of the last block hold `fill`) with a shuffled block table."""
    kv_len, hkv, d = K.shape
    nb = max(1, -(-kv_len // bs))
    nblocks = nb + 3
    kc = torch.full((nblocks, bs, hkv, d), fill, dtype=K.dtype, device=DEV)
    vc = torch.full_like(kc, fill)
    perm = torch.randperm(nblocks, generator=gen)[:nb]
    pad = nb * bs - kv_len
    Kp = torch.cat([K, torch.full((pad, hkv, d), fill, dtype=K.dtype, device=DEV)])
    Vp = torch.cat([V, torch.full((pad, hkv, d), fill, dtype=V.dtype, device=DEV)])
    kc[perm.to(DEV)] = Kp.view(nb, bs, hkv, d)
    vc[perm.to(DEV)] = Vp.view(nb, bs, hkv, d)
    return kc, vc, perm.to(torch.int32).to(DEV)


def gather(cache, bt, kv_len):
    """Rows 0 .. kv_len - 1 of a paged cache through its block table, as f32."""
    bs = cache.shape[1]
    idx = torch.arange(kv_len, device=DEV)
    if cache.dtype == torch.float8_e4m3fn:  # index the bytes, then read them as E4M3
        return cache.view(torch.uint8)[bt.long()[idx // bs], idx % bs].view(cache.dtype).float()
    return cache[bt.long()[idx // bs], idx % bs].float()


def reference(q, K, V, qpos0, causal, window, scale):
    """f32 attention of q [q_rows, hq, d] over K, V [kv_len, hkv, d] (f32). Key k is visible to
    the query at position p = qpos0 + i when (not causal or k <= p) and (not window or
    k > p - window); a row with no visible key gives zeros."""
    q_rows, hq, d = q.shape
    kv_len, hkv, _ = K.shape
    group = hq // hkv
    pos = qpos0 + torch.arange(q_rows, device=DEV)[:, None]
    key = torch.arange(kv_len, device=DEV)[None, :]
    vis = torch.ones(q_rows, kv_len, dtype=torch.bool, device=DEV)
    if causal:
        vis &= key <= pos
    if window:
        vis &= key > pos - window
    out = torch.zeros(q_rows, hq, d, dtype=torch.float32, device=DEV)
    for kh in range(hkv):
        qh = q[:, kh * group:(kh + 1) * group].float()  # [q, g, d]
        s = torch.einsum("qgd,kd->gqk", qh, K[:, kh]) * scale
        s = s.masked_fill(~vis, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
        p = torch.exp(s - m)
        l = p.sum(-1, keepdim=True)
        o = torch.einsum("gqk,kd->gqd", p, V[:, kh])
        o = torch.where(l > 0, o / l.clamp_min(1e-30), torch.zeros_like(o))
        out[:, kh * group:(kh + 1) * group] = o.permute(1, 0, 2)
    return out


def check_close(out, ref, what):
    assert not torch.isnan(out).any(), f"{what}: NaN in output (unwritten or bad read)"
    bound((out.float() - ref).abs(), ATOL + RTOL * ref.abs(), what)


def quantize_fp8(x):
    """Per-tensor E4M3 quantisation: scale = amax / 448; returns (E4M3 tensor, scale array)."""
    amax = x.float().abs().max().clamp_min(1e-12)
    scale = (amax / 448.0).reshape(1).to(torch.float32)
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


# (q_rows, kv_len, block_size, hq, hkv, causal, window)
CASES = [
    (16, 1, 16, 32, 8, 0, 0),
    (1, 15, 16, 8, 8, 1, 0),
    (7, 16, 64, 32, 4, 0, 0),
    (16, 17, 16, 32, 8, 1, 0),
    (64, 17, 64, 8, 8, 0, 0),
    (16, 1000, 64, 32, 8, 0, 0),
    (64, 1000, 16, 32, 4, 1, 0),
    (7, 1000, 16, 8, 1, 1, 0),
    (1, 8192, 64, 8, 8, 0, 0),
    (16, 8192, 16, 32, 8, 0, 0),
    (16, 8192, 64, 32, 8, 1, 2048),
    (64, 8192, 64, 32, 4, 0, 2048),
    (7, 8192, 16, 32, 8, 1, 0),
    (16, 32768, 64, 32, 8, 0, 0),
    (16, 32768, 16, 32, 8, 1, 2048),
    # windows whose span fits one cluster though kv_len does not (split and unsplit: the same bits),
    # with a span starting inside a tile, and eight row blocks with spans of their own
    (16, 8192, 16, 32, 8, 0, 500),
    (64, 4096, 16, 32, 4, 0, 700),
]


def case_id(c):
    return "q{}-kv{}-bs{}-hq{}-hkv{}-c{}-w{}".format(*c)


def inputs(case, fp8):
    q_rows, kv_len, bs, hq, hkv, _, _ = case
    gen = _gen(hash((case, fp8)) & 0xFFFF)
    q = _randn(gen, q_rows, hq, D)
    K = _randn(gen, kv_len, hkv, D)
    V = _randn(gen, kv_len, hkv, D)
    if fp8:
        K8, ks = quantize_fp8(K)
        V8, vs = quantize_fp8(V)
        # NaN bytes (0x7f) in every cache row that no valid key maps to; paged as bytes
        kc, vc, bt = make_paged(K8.view(torch.uint8), V8.view(torch.uint8), bs, gen, 0x7F)
        return q, kc.view(torch.float8_e4m3fn), vc.view(torch.float8_e4m3fn), bt, ks, vs
    kc, vc, bt = make_paged(K, V, bs, gen, float("nan"))
    return q, kc, vc, bt, None, None


def launch(kind, fp8, q, kc, vc, bt, ks, vs, out, case, q_offset, ws=None, cnt=None, mod=None):
    """One launch of member `kind` (unsplit, split, or the chain) of the BF16 or FP8 kernels of
    `mod` (the installed attn_dflash by default)."""
    q_rows, kv_len, bs, hq, hkv, causal, window = case
    scale = 1.0 / math.sqrt(D)
    mod = mod or attn_dflash
    common = dict(q_rows=q_rows, kv_len=kv_len, q_offset=q_offset, num_q_heads=hq,
                  num_kv_heads=hkv, block_size=bs, causal=causal, window=window, scale=scale)
    pre = dict(q=q, k_cache=kc, v_cache=vc)
    if fp8:
        pre.update(k_scale=ks, v_scale=vs)
    pre.update(out=out, block_table=bt)
    base = "prefill_attn_dflash_" + ("fp8" if fp8 else "bf16")
    if kind == "unsplit":
        return getattr(mod, base + "_unsplit")(**pre, **common)
    if ws is None:
        ws, cnt = workspace(q_rows, hq, hkv, kv_len)
    fn = getattr(mod, base + ("_split" if kind == "split" else ""))
    o = fn(**pre, **common, workspace=ws, counters=cnt)
    if o.launched:
        torch.cuda.synchronize()
        assert not cnt.any(), f"split counters left at {cnt.nonzero().flatten().tolist()}"
    return o


def expect_split(case):
    q_rows, kv_len, _, hq, hkv, _, _ = case
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return kv_len >= SPLIT_MIN_KV and 2 * hkv * mblocks(q_rows, hq, hkv) <= sms


# ---------------------------------------------------------------------------------------------
# direct kernels: reference, split vs unsplit, repeatability, chain choice
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_direct(case, fp8):
    q_rows, kv_len, _, _, _, causal, window = case
    q, kc, vc, bt, ks, vs = inputs(case, fp8)
    q_offset = max(kv_len - q_rows, 0)
    Kf = gather(kc, bt, kv_len) * (ks if fp8 else 1.0)
    Vf = gather(vc, bt, kv_len) * (vs if fp8 else 1.0)
    ref = reference(q, Kf, Vf, q_offset, causal, window, 1.0 / math.sqrt(D))
    tag = f"{'fp8' if fp8 else 'bf16'} {case_id(case)}"

    results = {}
    for kind in ("unsplit", "split"):
        runs = []
        for _ in range(2):
            out = torch.full_like(q, float("nan"))
            o = launch(kind, fp8, q, kc, vc, bt, ks, vs, out, case, q_offset)
            if kind == "split" and kv_len < SPLIT_MIN_KV:
                assert not o.launched and o.reason
                break
            assert o.launched, o.reason
            torch.cuda.synchronize()
            runs.append(out)
        if not runs:
            continue
        check_close(runs[0], ref, f"{tag} {kind}")
        same_bits(runs[0], runs[1], f"{tag} {kind}: a second run")
        results[kind] = runs[0]
    if "split" in results:
        check_close(results["split"], results["unsplit"].float(), f"{tag} split vs unsplit")
        if one_cluster(case, q_offset, fp8):  # the same chunks folded with the same arithmetic: the same bits
            same_bits(results["split"], results["unsplit"], f"{tag}: split against unsplit (one cluster)")

    out = torch.full_like(q, float("nan"))
    o = launch("chain", fp8, q, kc, vc, bt, ks, vs, out, case, q_offset)
    assert o.launched, o.reason
    member = "split" if expect_split(case) else "unsplit"
    base = "prefill_attn_dflash_" + ("fp8" if fp8 else "bf16")
    assert _name(o) == f"{base}_{member}", o.kernel
    torch.cuda.synchronize()
    same_bits(out, results[member], f"{tag}: the chain against {member}")


def test_chain_member_choice():
    """Plans: the unsplit kernel for short key ranges, the split one for long ones."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shape = dict(q_rows=16, q_offset=0, num_q_heads=32, num_kv_heads=8, block_size=16,
                 causal=0, window=0)
    for kv_len, member in [(1, "unsplit"), (500, "unsplit"), (511, "unsplit"), (512, "split"),
                           (1000, "split"), (8192, "split"), (32768, "split")]:
        p = attn_dflash.prefill_attn_dflash_bf16.plan(kv_len=kv_len, **shape)
        assert p["kernel"].split(".")[-1] == f"prefill_attn_dflash_bf16_{member}", (kv_len, p)
        p = attn_dflash.prefill_attn_dflash_fp8.plan(kv_len=kv_len, **shape)
        assert p["kernel"].split(".")[-1] == f"prefill_attn_dflash_fp8_{member}", (kv_len, p)
    p = attn_dflash.prefill_attn_dflash_bf16_split.plan(kv_len=8192, **shape)
    assert tuple(p["grid"]) == (40, 8, 1), p  # sized for 128-key splits, at most 5 clusters
    p = attn_dflash.prefill_attn_dflash_bf16_split.plan(kv_len=1000, **shape)
    assert tuple(p["grid"]) == (8, 8, 1), p  # 8 splits of 128 keys: one cluster
    # an unsplit grid filling more than half the GPU: no split
    big = dict(shape, q_rows=64, num_q_heads=8 * sms, num_kv_heads=sms)
    p = attn_dflash.prefill_attn_dflash_bf16.plan(kv_len=32768, **big)
    assert p["kernel"].split(".")[-1] == "prefill_attn_dflash_bf16_unsplit", p


# ---------------------------------------------------------------------------------------------
# indirect kernel in a CUDA graph
# ---------------------------------------------------------------------------------------------
# (max_kv_len, block_size, causal, window, expected chain member)
GRAPH_CASES = [
    (32768, 16, 0, 0, "split"),
    (8192, 16, 0, 2048, "split"),
    (4096, 64, 1, 0, "split"),
    (1000, 16, 0, 0, "split"),
    (400, 16, 0, 0, "unsplit"),
]


@pytest.mark.parametrize("gcase", GRAPH_CASES, ids=lambda c: "max{}-bs{}-c{}-w{}-{}".format(*c))
def test_indirect_graph(gcase):
    max_kv, bs, causal, window, member = gcase
    q_rows, hq, hkv = 16, 32, 8
    scale = 1.0 / math.sqrt(D)
    gen = _gen(max_kv + 7 * causal + window)
    q = _randn(gen, q_rows, hq, D)
    K = _randn(gen, max_kv, hkv, D)
    V = _randn(gen, max_kv, hkv, D)
    kc, vc, bt = make_paged(K, V, bs, gen, float("nan"))
    ws, cnt = workspace(q_rows, hq, hkv, max_kv)
    kv_t = torch.zeros(1, dtype=torch.int32, device=DEV)
    off_t = torch.zeros(1, dtype=torch.int32, device=DEV)
    pos_t = torch.zeros(1, dtype=torch.int32, device=DEV)
    out = torch.full_like(q, float("nan"))
    args = dict(q=q, k_cache=kc, v_cache=vc, out=out, block_table=bt, q_rows=q_rows, kv_len=kv_t,
                q_offset=off_t, q_rope_pos=pos_t, max_kv_len=max_kv, num_q_heads=hq,
                num_kv_heads=hkv, block_size=bs, causal=causal, window=window, scale=scale,
                workspace=ws, counters=cnt)
    p = attn_dflash.prefill_attn_dflash_bf16_indirect.plan(
        q_rows=q_rows, max_kv_len=max_kv, num_q_heads=hq, num_kv_heads=hkv, block_size=bs,
        causal=causal, window=window)
    assert p["kernel"].split(".")[-1] == f"prefill_attn_dflash_bf16_indirect_{member}", p

    kv_t.fill_(max_kv)
    pos_t.fill_(max_kv - q_rows)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the capture
        o = attn_dflash.prefill_attn_dflash_bf16_indirect(**args, stream=s)
        assert o.launched, o.reason
        assert _name(o) == f"prefill_attn_dflash_bf16_indirect_{member}", o.kernel
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = attn_dflash.prefill_attn_dflash_bf16_indirect(**args, stream=torch.cuda.current_stream())
        assert o.launched, o.reason

    ws_d, cnt_d = workspace(q_rows, hq, hkv, max_kv)
    rng = _gen(99)
    mismatches = 0
    for step in range(100):
        kv = int(torch.randint(1, max_kv + 1, (1,), generator=rng))
        if step == 0:
            kv = max_kv
        pos = kv - q_rows + int(torch.randint(-8, 9, (1,), generator=rng))
        pos = max(pos, 0)
        kv_t.fill_(kv)
        off_t.fill_(max(kv - q_rows, 0))
        pos_t.fill_(pos)
        out.fill_(float("nan"))
        graph.replay()
        exp = torch.full_like(q, float("nan"))
        o = attn_dflash.prefill_attn_dflash_bf16(
            q=q, k_cache=kc, v_cache=vc, out=exp, block_table=bt, q_rows=q_rows, kv_len=kv,
            q_offset=pos, num_q_heads=hq, num_kv_heads=hkv, block_size=bs, causal=causal,
            window=window, scale=scale, workspace=ws_d, counters=cnt_d)
        assert o.launched, o.reason
        torch.cuda.synchronize()
        assert not torch.isnan(out).any(), f"replay {step} (kv_len {kv}): NaN in output"
        if torch.equal(bits(out), bits(exp)):
            identical(out.numel(), f"indirect replay {step} against the direct kernel")
        else:
            mismatches += 1
        if step < 3:
            Kf = gather(kc, bt, kv)
            Vf = gather(vc, bt, kv)
            check_close(out, reference(q, Kf, Vf, pos, causal, window, scale),
                        f"indirect replay {step} kv {kv} pos {pos}")
    assert mismatches == 0, f"{mismatches} of 100 replays differ from the direct kernel"


def test_empty_and_not_applicable():
    gen = _gen(5)
    q = _randn(gen, 4, 6, D)
    K = _randn(gen, 32, 4, D)
    kc, vc, bt = make_paged(K, K, 16, gen, float("nan"))
    out = torch.full_like(q, float("nan"))
    a = dict(q=q, k_cache=kc, v_cache=vc, out=out, block_table=bt, q_rows=4, kv_len=32,
             q_offset=28, num_q_heads=6, num_kv_heads=4, block_size=16, causal=0, window=0,
             scale=0.1)
    o = attn_dflash.prefill_attn_dflash_bf16_unsplit(**a)
    assert not o.launched and o.reason  # 6 q heads over 4 kv heads
    o = attn_dflash.prefill_attn_dflash_bf16_unsplit(**dict(a, q_rows=0, num_q_heads=4))
    assert not o.launched
    torch.cuda.synchronize()
    assert torch.isnan(out).all()
