"""The many-row GEMMs' per-warp mma.sync path, the one gb10 builds, run on this GPU.

On sm_90a (the hopper build) dense_gemm_pipelined and fp8_gemm_n128_row_scaled issue their
products as warpgroup MMAs (wgmma, both operands read from shared memory in the layout the
mma.sync path's ldmatrix reads); every other target (gb10) issues per-warp mma.sync m16n8k16.
Both are the same bf16 products accumulated in the same k order, so they must give the same
bits. This test builds dense_linear and fp8_linear (with fp8_gemv_rt, whose kernels the
fp8_linear chain names) for a target of its own, ``sm90_mma`` (arch sm_90: no sm_90a features,
hence the mma.sync path; gb10's limits otherwise), in a temporary project, and checks that both
GEMMs give outputs bit-identical to the installed hopper build's: 128- and 64-row tilings, N and
K off the tiles, the element-load path (K % 8 != 0).

Needs a GPU of compute capability 9.0 and nvcc; the build takes about a minute on 16 cores.
"""

from __future__ import annotations

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu
torch = guards_build.mma_path_torch()  # before the test module this one builds on is imported

from kernelgen_ops import dense_linear, fp8_linear  # noqa: E402

from tests.gpu import test_fp8_linear as fp8  # noqa: E402
from tests.gpu.bf16_helpers import assert_same_bits, nonzero_randn  # noqa: E402

TARGET = guards_build.MMA_TARGET
MODULES = ("dense_linear", "fp8_linear", "fp8_gemv_rt")


@pytest.fixture(scope="module")
def mma(tmp_path_factory):
    folder = guards_build.build_mma_path(tmp_path_factory, MODULES, ("dflash", "common"), "gemm_mma")
    return guards_build.load(folder, "dense_linear"), guards_build.load(folder, "fp8_linear")


def test_build_is_the_mma_path(mma):
    assert mma[0].TARGET == TARGET and dense_linear.TARGET != TARGET


# (m, n, k): 128-row tiles (m = 2048, >= 256 CTAs), 64-row tiles, N and K off the tiles, K % 8 != 0;
# the FP8 GEMM splits K over 4 CTAs at (256, 4104, 4096) and (100, 1000, 4112), and over 2 on its
# byte path at (64, 1000, 3000)
SHAPES = [(2048, 4096, 4096), (256, 4104, 4096), (100, 1000, 4112), (129, 4104, 1000), (64, 136, 100),
          (64, 1000, 3000)]


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_dense_gemm_pipelined_same_bits(mma, m, n, k):
    x = nonzero_randn(m, k)
    w = nonzero_randn(n, k)
    outs = []
    for mod in (dense_linear, mma[0]):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        o = mod.dense_gemm_pipelined(x, w, out, m, n, k)
        assert o.launched, o.reason
        outs.append(out)
    torch.cuda.synchronize()
    assert_same_bits(outs[0], outs[1], f"dense_gemm_pipelined {m}x{n}x{k}, wgmma vs mma.sync")


@pytest.mark.parametrize("m, n, k", SHAPES)
def test_fp8_gemm_same_bits(mma, m, n, k):
    x, q, scale = fp8.make_inputs(m, n, k, seed=m + n + k)
    outs = []
    for mod in (fp8_linear, mma[1]):
        o, out = fp8.launch(mod.fp8_gemm_n128_row_scaled, x, q, scale, m, n, k)
        assert o.launched, o.reason
        outs.append(out)
    assert_same_bits(outs[0], outs[1], f"fp8_gemm_n128_row_scaled {m}x{n}x{k}, wgmma vs mma.sync")
    fp8.check_product(outs[0], x, q, scale)
