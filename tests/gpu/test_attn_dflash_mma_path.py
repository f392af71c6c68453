"""The drafter attention's per-warp mma.sync path, the one gb10 builds, run on this GPU.

On sm_90a (the hopper build) the kernels of attn_dflash issue QK^T and PV as warpgroup MMAs
(wgmma: Q and P from registers, K and V read by the tensor cores from shared memory); every other
target (gb10) issues per-warp mma.sync m16n8k16 fed by ldmatrix. Both are the same bf16 products
accumulated in the same order, so they must give the same bits. This test builds attn_dflash for
a target of its own, ``sm90_mma`` (arch sm_90: no sm_90a features, hence the mma.sync path;
gb10's limits otherwise), in a temporary project, and checks that its unsplit, split and chain
launches and its indirect kernels give outputs bit-identical to the installed hopper build's on
test_attn_dflash's cases, BF16 and FP8 caches.

Needs a GPU of compute capability 9.0 and nvcc; the build takes about 20 s on 16 cores.
"""

from __future__ import annotations

import math

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu
torch = guards_build.mma_path_torch()  # before the test module this one builds on is imported

from tests.gpu import test_attn_dflash as base  # noqa: E402
from tests.gpu.bf16_helpers import assert_same_bits  # noqa: E402

TARGET = guards_build.MMA_TARGET


@pytest.fixture(scope="module")
def mma(tmp_path_factory):
    folder = guards_build.build_mma_path(tmp_path_factory, ("attn_dflash",), ("attention", "common"), "dflash_mma")
    return guards_build.load(folder, "attn_dflash")


def test_build_is_the_mma_path(mma):
    assert mma.TARGET == TARGET
    assert base.attn_dflash.TARGET != TARGET


@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8"])
@pytest.mark.parametrize("case", base.CASES, ids=base.case_id)
def test_direct_same_bits(mma, case, fp8):
    q_rows, kv_len = case[0], case[1]
    q, kc, vc, bt, ks, vs = base.inputs(case, fp8)
    q_offset = max(kv_len - q_rows, 0)
    kinds = ["unsplit", "chain"] + (["split"] if kv_len >= base.SPLIT_MIN_KV else [])
    for kind in kinds:
        outs = []
        for mod in (None, mma):  # the installed (wgmma) build, then the mma.sync build
            out = torch.full_like(q, float("nan"))
            o = base.launch(kind, fp8, q, kc, vc, bt, ks, vs, out, case, q_offset, mod=mod)
            assert o.launched, o.reason
            outs.append(out)
        torch.cuda.synchronize()
        assert_same_bits(outs[0], outs[1], f"{kind}, wgmma vs mma.sync")


# (max_kv_len, kv_len, block_size, causal, window)
INDIRECT = [(32768, 20000, 16, 0, 0), (8192, 8192, 16, 1, 2048), (8192, 3000, 64, 0, 0),
            (1000, 700, 16, 0, 0)]


@pytest.mark.parametrize("icase", INDIRECT, ids=lambda c: "max{}-kv{}-bs{}-c{}-w{}".format(*c))
def test_indirect_same_bits(mma, icase):
    max_kv, kv, bs, causal, window = icase
    q_rows, hq, hkv = 16, 32, 8
    gen = base._gen(max_kv + kv)
    q = base._randn(gen, q_rows, hq, base.D)
    K = base._randn(gen, max_kv, hkv, base.D)
    V = base._randn(gen, max_kv, hkv, base.D)
    kc, vc, bt = base.make_paged(K, V, bs, gen, float("nan"))
    dev = lambda v: torch.full((1,), v, dtype=torch.int32, device=base.DEV)  # noqa: E731
    outs = []
    for mod in (base.attn_dflash, mma):
        ws, cnt = base.workspace(q_rows, hq, hkv, max_kv)
        out = torch.full_like(q, float("nan"))
        o = mod.prefill_attn_dflash_bf16_indirect(
            q=q, k_cache=kc, v_cache=vc, out=out, block_table=bt, q_rows=q_rows, kv_len=dev(kv),
            q_offset=dev(kv - q_rows), q_rope_pos=dev(kv - q_rows), max_kv_len=max_kv,
            num_q_heads=hq, num_kv_heads=hkv, block_size=bs, causal=causal, window=window,
            scale=1.0 / math.sqrt(base.D), workspace=ws, counters=cnt)
        assert o.launched, o.reason
        outs.append(out)
    torch.cuda.synchronize()
    assert_same_bits(outs[0], outs[1], "indirect, wgmma vs mma.sync")
