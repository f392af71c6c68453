"""The 128-row twins' per-warp mma.sync path, the one gb10 builds, run on this GPU.

The hopper build issues the twins' products as warpgroup MMAs (sm_90a only); gb10 (sm_121a)
builds the per-warp mma.sync path instead, and no GPU here is a gb10. That path compiles for
any architecture without sm_90a's features, so this test builds the two attention modules for
a target of its own, ``sm90_mma`` (arch sm_90, compute capability 9.0, gb10's limits otherwise),
in a temporary copy of the project, and checks on every twin-applicable case of
test_attn_prefill's sweep that this build's twins are bit-identical to the installed build's
64-row kernels (and so to its warpgroup-MMA twins), and that its fallback chains pick the twin.

Needs a GPU of compute capability 9.0 and nvcc; the build takes about 20 s on 16 cores.
"""

from __future__ import annotations

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu
torch = guards_build.mma_path_torch()  # before the test module this one builds on is imported

from tests.gpu import test_attn_prefill as base  # noqa: E402

TARGET = guards_build.MMA_TARGET
MODULES = ("attn_prefill", "attn_prefill_fa128")


@pytest.fixture(scope="module")
def mma(tmp_path_factory):
    folder = guards_build.build_mma_path(tmp_path_factory, MODULES, ("attention", "common"), "attn_mma")
    return guards_build.load(folder, "attn_prefill_fa128")


TWIN_PAGED = [c for c in base.PAGED_CASES if base.twin_applies(c[0], c[5], c[6])]
TWIN_CONTIG = [c for c in base.CONTIG_CASES if base.twin_applies(c[0], c[5], c[6])]


def test_build_is_the_mma_path(mma):
    assert mma.TARGET == TARGET
    assert len(TWIN_PAGED) >= 10 and len(TWIN_CONTIG) >= 8


@pytest.mark.parametrize("case", TWIN_PAGED, ids=lambda c: "d{}-hq{}-hkv{}-q{}-off{}-c{}-w{}-bs{}".format(*c))
def test_paged_twin(mma, case):
    d, hq, hkv, q_len, q_offset, causal, window, cbs = case
    q, _, _, kc, vc, bt, kv_len, scale = base.paged_inputs(case)

    out64 = torch.full_like(q, float("nan"))
    a = base.paged_args(q, kc, vc, out64, bt, q_len, kv_len, q_offset, hq, hkv, cbs, causal,
                        window, scale)
    o = base.run_paged_64(a, d)
    assert o.launched, o.reason

    out = torch.full_like(q, float("nan"))
    o = base.run_paged_twin(dict(a, output=out), d, mod=mma)
    assert o.launched, o.reason
    chained = torch.full_like(q, float("nan"))
    o = mma.attn_paged(**dict(a, output=chained), head_dim=d)
    assert o.launched and base._kernel_name(o) == "attn_prefill_fa128_paged", o.kernel
    torch.cuda.synchronize()
    assert not torch.isnan(out64).any()
    assert base.count_bit_diffs(out, out64) == 0, "mma.sync twin not bit-identical to the 64-row kernel"
    assert base.count_bit_diffs(chained, out64) == 0


@pytest.mark.parametrize("case", TWIN_CONTIG, ids=lambda c: "d{}-hq{}-hkv{}-L{}-b{}-c{}-w{}".format(*c))
def test_contiguous_twin(mma, case):
    d, hq, hkv, L, B, causal, window = case
    q, k, v, scale = base.contig_inputs(case)

    out64 = torch.full_like(q, float("nan"))
    a = base.contig_args(q, k, v, out64, L, hq, hkv, causal, window, scale)
    o = base.run_contig_64(a, d, B)
    assert o.launched, o.reason

    out = torch.full_like(q, float("nan"))
    o = base.run_contig_twin(dict(a, output=out), d, B, mod=mma)
    assert o.launched, o.reason
    chained = torch.full_like(q, float("nan"))
    o = mma.attn_contiguous(**dict(a, output=chained), head_dim=d, batch=B)
    assert o.launched and base._kernel_name(o) == "attn_prefill_fa128", o.kernel
    torch.cuda.synchronize()
    assert not torch.isnan(out64).any()
    assert base.count_bit_diffs(out, out64) == 0, "mma.sync twin not bit-identical to the 64-row kernel"
    assert base.count_bit_diffs(chained, out64) == 0
