"""GPU tests of specs/dense_linear.yaml (kernels/dflash/dense_gemv.cu, dense_gemm.cu,
dense_gemm_pipelined.cu, dense_gemm_tma.cu) against a float64 reference computed from the same bf16
inputs."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import dense_linear  # noqa: E402

from tests.gpu.bf16_helpers import capture_graph, nonzero_randn  # noqa: E402
from tests.gpu.checks import bound, same_bits  # noqa: E402

DEV = "cuda"
BF16 = torch.bfloat16

# Tolerance, per output element, from k: the kernels multiply bf16 values exactly on the tensor
# cores and add up to k products in f32, each addition off by at most 2^-23 (relative, allowing
# the tensor cores' truncating accumulation) of a partial sum bounded by S = sum_k |x w|; the
# f32 sum is then rounded once to bf16 (half an ulp: 2^-9 relative). So
#     |out - ref| <= 2^-8 |ref| + 2 k 2^-23 S
# (the factors 2 cover the rounding of an already perturbed sum). The integer tests below have
# exact f32 sums and must match bf16(ref) bit for bit.
def tolerance(x, w, ref):
    k = x.shape[1]
    absdot = x.double().abs() @ w.double().abs().T
    return 2.0 ** -8 * ref.abs() + 2.0 * k * 2.0 ** -23 * absdot + 1e-30


def reference(x, w):
    return x.double() @ w.double().T


GEMV_M = [1, 2, 7, 8, 9, 15, 16]
ALL_M = [1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 129, 2048]
# (n, k): n not a multiple of any tile (4104 = 128 * 32 + 8), k a multiple of 16 but not 32,
# k a multiple of 8 but not 16, k not a multiple of 8 (element loads), a tiny odd n; k long enough
# and not a multiple of 8, for dense_gemm_pipelined's split K on its element-load path (2 ranks).
# dense_gemm_pipelined splits K over 4 ranks at (4104, 4096) up to 64 rows, (4096, 4112) and
# (33, 4104), and over 2 at (4104, 4096) with 129 rows.
SHAPES = [(4104, 4096), (4096, 4112), (200, 1000), (136, 100), (33, 4104), (200, 3003)]
# dense_gemv over more clusters than one wave (n = 8456: 133 64-row tiles, the last partial), with
# K ranges that the two ranks and four phases share unevenly (272 k: 4.25 chunks of 64), with
# aligned and element loads.
GEMV_WIDE = [(8456, 272), (8456, 100)]
# dense_gemv_rt1 (hopper) takes weights of more 64-row tiles than half the SMs and at most four
# an SM: n just past the lower bound (off the tile) and at the upper one, with whole-line and
# element loads and K shared unevenly by the four phases (272 k: 4.25 chunks of 64).
SMS = torch.cuda.get_device_properties(0).multi_processor_count
RT1_LOW, RT1_HIGH = 64 * (SMS // 2) + 8, 64 * 4 * SMS
RT1_SHAPES = [(RT1_LOW, 4096), (RT1_HIGH, 272), (RT1_LOW, 100), (RT1_HIGH, 4100)]
KERNELS = {
    "dense_gemv_rt1": lambda *a: dense_linear.dense_gemv_rt1(*a),
    "dense_gemv": lambda *a: dense_linear.dense_gemv(*a),
    "dense_gemm": lambda *a: dense_linear.dense_gemm(*a),
    "dense_gemm_pipelined": lambda *a: dense_linear.dense_gemm_pipelined(*a),
    "dense_gemm_tma": lambda *a: dense_linear.dense_gemm_tma(*a),
}
# dense_gemm_tma (hopper only) takes m >= 65 rows and k % 8 == 0 (its tensor maps' rows are whole
# 16-byte units); on another target it is absent.
TMA_BUILT = dense_linear.plan_dense_gemm_tma(m=256, n=256, k=256)["launched"]
needs_tma = pytest.mark.skipif(not TMA_BUILT, reason="dense_gemm_tma is not built for this target")


def applies(name, m, n, k):
    """Whether the kernel's plan launches for these sizes (its clauses; absent on other targets)."""
    return getattr(dense_linear, f"plan_{name}")(m=m, n=n, k=k)["launched"]


def launch(name, x, w, m, n, k, out=None):
    if out is None:
        out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
    else:
        out.fill_(float("nan"))
    outcome = KERNELS[name](x, w, out, m, n, k)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    return out


def cases():
    for name in KERNELS:
        for m in ALL_M:
            for n, k in SHAPES:
                if m == 2048 and (n, k) not in [(4104, 4096), (136, 100), (4096, 4112)]:
                    continue
                if applies(name, m, n, k):  # (test_tma_not_launched covers dense_gemm_tma's refusals)
                    yield name, m, n, k
    for m in GEMV_M:
        for n, k in GEMV_WIDE:
            yield "dense_gemv", m, n, k
        for n, k in RT1_SHAPES:
            if applies("dense_gemv_rt1", m, n, k):
                yield "dense_gemv_rt1", m, n, k


@pytest.mark.parametrize("name,m,n,k", list(cases()))
def test_random_against_reference(name, m, n, k):
    torch.manual_seed(m * 7919 + n * 31 + k)
    x = nonzero_randn(m, k)
    w = nonzero_randn(n, k, scale=0.05)
    out = launch(name, x, w, m, n, k)
    assert not torch.isnan(out).any(), "some output element was not written"
    ref = reference(x, w)
    bound((out.double() - ref).abs(), tolerance(x, w, ref), f"{name} m={m} n={n} k={k}")
    again = launch(name, x, w, m, n, k)
    same_bits(out, again, f"{name} m={m} n={n} k={k}: a second run")


def int_inputs(m, n, k, seed):
    """Small integers (exact in bf16; every partial sum exact in f32)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    x = torch.randint(-3, 4, (m, k), device=DEV, generator=g).to(BF16)
    w = torch.randint(-3, 4, (n, k), device=DEV, generator=g).to(BF16)
    return x, w


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("m", [1, 9, 16, 129])
@pytest.mark.parametrize("n,k", [(4104, 4096), (72, 4104), (40, 24), (RT1_LOW, 4096)])
def test_integers_exact(name, m, n, k):
    if not applies(name, m, n, k):
        pytest.skip(f"{name} does not take m = {m}, k = {k} (or is not built for this target)")
    x, w = int_inputs(m, n, k, seed=m + n + k)
    out = launch(name, x, w, m, n, k)
    ref = reference(x, w).to(BF16)
    same_bits(out, ref, f"{name} m={m} n={n} k={k}: small integers, bf16(exact sum)")


@pytest.mark.parametrize("name", [n for n in KERNELS if n != "dense_gemm_tma"])
def test_misaligned_pointers(name):
    """Base pointers off 16-byte alignment take the element-load path."""
    m, n, k = 9 if name.startswith("dense_gemv") else 70, RT1_LOW if name == "dense_gemv_rt1" else 300, 512
    if not applies(name, m, n, k):
        pytest.skip(f"{name} is not built for this target")
    xb = nonzero_randn(m * k + 1)
    wb = nonzero_randn(n * k + 3, scale=0.05)
    x, w = xb[1:].view(m, k), wb[3:].view(n, k)
    out = launch(name, x, w, m, n, k)
    ref = reference(x, w)
    bound((out.double() - ref).abs(), tolerance(x, w, ref), f"{name}: misaligned pointers")


def test_pipelined_tilings_agree():
    """128-row and 64-row tilings of dense_gemm_pipelined run the same MMAs in the same k order:
    rows computed under each (m = 2048 uses 128-row tiles, m = 64 64-row tiles) match bit for bit."""
    n, k = 4096, 1024
    x = nonzero_randn(2048, k)
    w = nonzero_randn(n, k, scale=0.05)
    big = launch("dense_gemm_pipelined", x, w, 2048, n, k)
    small = launch("dense_gemm_pipelined", x[:64].contiguous(), w, 64, n, k)
    same_bits(big[:64], small, "128-row and 64-row tiles")


def test_gemv_rows_over_16_not_launched():
    m, n, k = 17, 64, 64
    plan = dense_linear.plan_dense_gemv(m=m, n=n, k=k)
    assert not plan["launched"]
    x, w = nonzero_randn(m, k), nonzero_randn(n, k)
    out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
    outcome = dense_linear.dense_gemv(x, w, out, m, n, k)
    torch.cuda.synchronize()
    assert not outcome.launched
    assert torch.isnan(out).all()


def test_fallback_picks_gemv_then_tma_then_pipelined():
    n, k = 256, 512
    w = nonzero_randn(n, k, scale=0.05)
    many = "dense_gemm_tma" if TMA_BUILT else "dense_gemm_pipelined"
    for m, expected in [(4, "dense_gemv"), (40, "dense_gemm_pipelined"), (65, many), (300, many)]:
        x = nonzero_randn(m, k)
        out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
        outcome = dense_linear.dense_linear_any(x, w, out, m, n, k)
        torch.cuda.synchronize()
        assert outcome.launched and (outcome.kernel or "").split(".")[-1] == expected, outcome.kernel
        ref = reference(x, w)
        bound((out.double() - ref).abs(), tolerance(x, w, ref), f"dense_linear_any m={m}")


def test_fallback_gemv_rt1_bounds():
    """dense_gemv_rt1 (hopper) from more 64-row tiles than half the SMs up to four an SM;
    dense_gemv on either side (and everywhere on a target without it)."""
    built = applies("dense_gemv_rt1", 16, RT1_HIGH, 64)
    k = 64
    for m, n, rt1 in [(16, 64 * (SMS // 2), False), (16, RT1_LOW, True), (1, RT1_HIGH, True),
                      (9, RT1_HIGH + 1, False), (17, RT1_HIGH, False)]:
        w = nonzero_randn(n, k, scale=0.05)
        x = nonzero_randn(m, k)
        out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
        outcome = dense_linear.dense_linear_any(x, w, out, m, n, k)
        torch.cuda.synchronize()
        expected = "dense_gemv_rt1" if rt1 and built else ("dense_gemv" if m <= 16 else "dense_gemm_pipelined")
        assert outcome.launched and (outcome.kernel or "").split(".")[-1] == expected, (m, n, outcome.kernel)
        ref = reference(x, w)
        bound((out.double() - ref).abs(), tolerance(x, w, ref), f"dense_linear_any m={m} n={n}")


def test_plans():
    p = dense_linear.plan_dense_gemv(m=8, n=151936, k=4096)  # 2-CTA clusters of 64 weight rows, an 80 KiB ring
    assert p["launched"] and tuple(p["grid"]) == (4748, 1, 1) and tuple(p["block"]) == (256, 1, 1)
    assert p["shared_mem"] == 2 * 8 * 256 * 16 + 2 * 4 * 16 * 128
    p = dense_linear.plan_dense_gemv(m=16, n=8447, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (264, 1, 1) and p["shared_mem"] == 81920
    p = dense_linear.plan_dense_gemv_rt1(m=16, n=RT1_HIGH, k=4096)  # a CTA a tile, one an SM, a 120 KiB ring
    if p["launched"]:
        assert tuple(p["grid"]) == (4 * SMS, 1, 1) and p["shared_mem"] == 3 * 8 * 256 * 16 + 3 * 4 * 16 * 128, p
    p = dense_linear.plan_dense_gemm(m=2048, n=4104, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (65, 32, 1) and tuple(p["block"]) == (128, 1, 1)
    p = dense_linear.plan_dense_gemm_pipelined(m=2048, n=4104, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (33, 32, 1) and p["shared_mem"] == 65536
    p = dense_linear.plan_dense_gemm_pipelined(m=64, n=4096, k=4096)  # 32 tiles: K split over 4 CTAs
    assert p["launched"] and tuple(p["grid"]) == (32, 1, 4), p
    p = dense_linear.plan_dense_gemm_pipelined(m=256, n=4096, k=12288)  # 128 tiles: over 2
    assert p["launched"] and tuple(p["grid"]) == (32, 4, 2), p
    if TMA_BUILT:
        # 16 x 33 tiles of 128 x 128 (4 waves; 128 x 256 tiles would take 3 waves of twice the work)
        p = dense_linear.plan_dense_gemm_tma(m=2048, n=4104, k=4096)
        assert p["launched"] and tuple(p["grid"]) == (528, 1, 1) and tuple(p["block"]) == (384, 1, 1), p
        p = dense_linear.plan_dense_gemm_tma(m=2048, n=1000, k=4096)  # 16 x 4 tiles of 128 x 256, K over 2 CTAs
        assert p["launched"] and tuple(p["grid"]) == (64, 1, 2), p
        p = dense_linear.plan_dense_gemm_tma(m=256, n=1000, k=4112)  # 16 tiles of 128 x 128: K split over 2
        assert p["launched"] and tuple(p["grid"]) == (16, 1, 2), p
        p = dense_linear.plan_dense_gemm_tma(m=256, n=6144, k=4096)  # 2 x 32 tiles of 128 x 192, K over 2
        assert p["launched"] and tuple(p["grid"]) == (64, 1, 2), p


@needs_tma
def test_tma_not_launched():
    """dense_gemm_tma reports not launched, writing nothing, for rows under TMA_MIN_M, for k not a
    multiple of 8 (the clause) and for arrays off 16-byte alignment (UNALIGNED, at launch); the chain
    then runs dense_gemm_pipelined, whose outputs are checked."""
    n = 300
    xb, wb = nonzero_randn(130 * 520 + 8), nonzero_randn(n * 520 + 8, scale=0.05)
    cases = [
        (64, 512, xb[: 64 * 512].view(64, 512), wb[: n * 512].view(n, 512), "m >= TMA_MIN_M"),
        (130, 100, xb[: 130 * 100].view(130, 100), wb[: n * 100].view(n, 100), "(k % 8) == 0"),
        (130, 512, xb[1: 1 + 130 * 512].view(130, 512), wb[: n * 512].view(n, 512), "16-byte aligned"),
        (130, 512, xb[: 130 * 512].view(130, 512), wb[4: 4 + n * 512].view(n, 512), "16-byte aligned"),
    ]
    for m, k, x, w, why in cases:
        out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
        outcome = dense_linear.dense_gemm_tma(x, w, out, m, n, k)
        torch.cuda.synchronize()
        assert not outcome.launched and outcome.code > 0, (why, outcome.reason)
        assert why in outcome.reason or (why == "16-byte aligned" and "tensor map" in outcome.reason), outcome.reason
        assert torch.isnan(out).all(), "a kernel that did not launch wrote"
        outcome = dense_linear.dense_linear_any(x, w, out, m, n, k)
        torch.cuda.synchronize()
        assert outcome.launched and outcome.kernel.split(".")[-1] == "dense_gemm_pipelined", outcome.kernel
        ref = reference(x, w)
        bound((out.double() - ref).abs(), tolerance(x, w, ref), f"dense_linear_any m={m}: {why}")


@needs_tma
@pytest.mark.parametrize("m,n,k,width", [(2048, 4104, 4096, 128), (130, 1000, 1000, 128), (300, 6144, 1000, 192),
                                         (1000, 3003, 1000, 192), (1000, 4096, 1000, 256), (2048, 6144, 512, 256)])
def test_tma_bits_equal_pipelined(m, n, k, width):
    """Unsplit (at these shapes neither kernel splits K), dense_gemm_tma runs dense_gemm_pipelined's
    products in its k order: the same bits, for each tile width (the grid's tiles along n tell it),
    with a last row tile that ends at row m where m is not a multiple of 128."""
    grid = tuple(dense_linear.plan_dense_gemm_tma(m=m, n=n, k=k)["grid"])
    assert grid[2] == 1 and grid[0] == -(-m // 128) * -(-n // width), grid
    assert tuple(dense_linear.plan_dense_gemm_pipelined(m=m, n=n, k=k)["grid"])[2] == 1
    torch.manual_seed(m + n + k)
    x, w = nonzero_randn(m, k), nonzero_randn(n, k, scale=0.05)
    same_bits(launch("dense_gemm_tma", x, w, m, n, k), launch("dense_gemm_pipelined", x, w, m, n, k), "dense_gemm_tma and dense_gemm_pipelined")


@needs_tma
def test_tma_graph_replay_reads_current_data():
    """The tensor maps are kernel parameters captured by value: a replayed graph reads whatever the
    arrays hold then (same addresses), split K included (256 x 4096 x 4096: 2 ranks)."""
    m, n, k = 256, 4096, 4096
    assert tuple(dense_linear.plan_dense_gemm_tma(m=m, n=n, k=k)["grid"]) == (64, 1, 2)
    x, w = nonzero_randn(m, k), nonzero_randn(n, k, scale=0.05)
    out = torch.empty((m, n), device=DEV, dtype=BF16)
    g, outcome = capture_graph(lambda s: dense_linear.dense_gemm_tma(x, w, out, m, n, k, stream=s))
    assert outcome.launched, outcome.reason
    for seed in (1, 2):
        torch.manual_seed(seed)
        x.copy_(nonzero_randn(m, k))
        w.copy_(nonzero_randn(n, k, scale=0.05))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref = reference(x, w)
        bound((out.double() - ref).abs(), tolerance(x, w, ref), f"dense_gemm_tma graph replay, seed {seed}")
