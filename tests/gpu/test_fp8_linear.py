"""GPU tests of specs/fp8_linear.yaml and specs/fp8_gemv_rt.yaml (kernels/dflash/fp8_*.cu*):
BF16 -> FP8 quantization bit for bit against torch, every FP8-weight product against an exact
reference, repeatability, and the engine's fallback chain rt2 -> rt2_16 -> m16 -> n128 (each
register-tiled GEMV preceded by its K-split form for few weight rows and its whole-K form for
many; on hopper the chain has the 32- and 64-row GEMVs before m16 and fp8_gemm_tma before n128)."""

import os

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import kernelgen_ops  # noqa: E402
from kernelgen_ops import fp8_gemv_rt, fp8_linear  # noqa: E402

from tests.gpu.bf16_helpers import capture_graph, clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import bound, same_bits  # noqa: E402

DEV = "cuda"
E4M3 = torch.float8_e4m3fn
RT_SWITCH = "METRALE_NO_DFLASH_FP8_RT"
# The whole-K GEMVs (fp8_gemv_rt1, _rt1_16, _rt1_16_x3) apply when the 2-CTA grid would exceed
# one CTA an SM: weights of more than SMS / 2 tiles of 64 rows. RT1_N: the fewest such tiles,
# the last one partial; RT2_N: the most tiles that keep the split K.
SMS = torch.cuda.get_device_properties(0).multi_processor_count
RT1_N = 64 * (SMS // 2) + 8
RT2_N = 64 * (SMS // 2)
LINEAR_SWITCH = "METRALE_NO_DFLASH_FP8_LINEAR"
# The 32-row GEMVs (hopper).
RT32_BUILT = fp8_gemv_rt.plan_fp8_gemv_rt2_32(rows=32, n=RT2_N, k=4096)["launched"]
# The 64-row GEMVs (hopper); the 128-row-tile form past WAVES_128 = 4 of its tiles an SM.
RT64_BUILT = fp8_gemv_rt.plan_fp8_gemv_rt2_64(rows=64, n=RT2_N, k=4096)["launched"]
RT128_N = 128 * 4 * SMS + 8


# --------------------------------------------------------------------------------------------
# quantize_bf16_to_fp8


def reference_quantize(w):
    """torch's row-wise quantization. The scale is max |w| / 448 as an IEEE f32 division: the
    divisor is a tensor, because torch turns division by a Python scalar into a multiplication
    by its reciprocal (which can differ in the last bit)."""
    amax = w.abs().amax(dim=1).float()
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / torch.full_like(amax, 448.0))
    q = (w.float() / scale[:, None]).to(E4M3)
    return q, scale


def run_quantize(w):
    n, k = w.shape
    q = torch.full((n, k), float("nan"), device=DEV).to(E4M3)  # 0x7f everywhere
    scale = torch.full((n,), float("nan"), device=DEV)
    outcome = fp8_linear.quantize_bf16_to_fp8(w, q, scale, n, k)
    torch.cuda.synchronize()
    assert outcome.launched, outcome.reason
    return q, scale


def assert_quantize_exact(w):
    q, scale = run_quantize(w)
    rq, rscale = reference_quantize(w)
    same_bits(scale, rscale, f"quantize {tuple(w.shape)}: scales against torch's")
    same_bits(q, rq, f"quantize {tuple(w.shape)}: E4M3 bytes against torch's")


def special_rows(k, gen):
    """Rows that exercise the corner cases: all zero, a power-of-two maximum, a maximum far
    above the rest (quotients in E4M3's subnormal range and below), negative maximum, a single
    nonzero value, and values spread over many binades."""
    rows = []
    rows.append(torch.zeros(k, device=DEV))
    r = torch.randn(k, device=DEV, generator=gen)
    r = r / r.abs().max() * 0.99
    r[k // 2] = 4.0  # power of two max
    rows.append(r)
    r = torch.randn(k, device=DEV, generator=gen) * 2.0**-15
    r[0] = -1.0  # quotients of the rest ~ 448 * 2^-15 * N(0,1): E4M3 subnormals and zeros
    rows.append(r)
    r = torch.zeros(k, device=DEV)
    r[k - 1] = -3.0e-3
    rows.append(r)
    r = torch.randn(k, device=DEV, generator=gen) * torch.exp2(torch.randint(-30, 10, (k,), device=DEV, generator=gen).float())
    rows.append(r)
    r = torch.full((k,), 2.0**-120, device=DEV)  # tiny maximum: the scale is an f32 subnormal
    r[::3] = 2.0**-122
    rows.append(r)
    return torch.stack(rows).to(torch.bfloat16)


@pytest.mark.parametrize("k", [1, 7, 8, 24, 1000, 1001, 4096, 4104, 8192, 8200, 12288])
def test_quantize_bit_exact(k):
    gen = torch.Generator(device=DEV).manual_seed(k)
    rnd = (torch.randn(40, k, device=DEV, generator=gen)
           * torch.exp2(torch.randint(-8, 8, (40, 1), device=DEV, generator=gen).float())).to(torch.bfloat16)
    w = torch.cat([rnd, special_rows(k, gen)])
    assert_quantize_exact(w)


def test_quantize_special_rows_values():
    gen = torch.Generator(device=DEV).manual_seed(1)
    w = special_rows(4096, gen)
    q, scale = run_quantize(w)
    assert scale[0].item() == 1.0  # all-zero row
    assert (q[0].view(torch.uint8) == 0).all()
    four_by_448 = (torch.tensor([4.0]) / torch.tensor([448.0])).item()  # f32 IEEE division
    assert scale[1].item() == four_by_448  # power-of-two maximum
    assert q[1, 4096 // 2].float().item() == 448.0
    sub = q[2].view(torch.uint8) & 0x7F
    assert ((sub > 0) & (sub < 8)).any(), "no subnormal E4M3 result in the subnormal row"
    assert q[2, 0].float().item() == -448.0


def test_quantize_every_bf16_value():
    """Every non-negative finite bf16 value, and its negation, in rows whose maximum ranges over
    every binade: each row holds all values up to its maximum (zero above it), so the quotient's
    fast path (scale >= 2^-80) and the division path (smaller scales) both meet every bf16
    value they can, signed zeros included."""
    k = 0x7F80  # the finite non-negative bf16 bit patterns
    bits = torch.arange(k, dtype=torch.int32, device=DEV)
    rows = []
    for exponent in range(0, 255):
        amax = (exponent << 7) | (exponent * 37 % 128)
        row = torch.where(bits <= amax, bits, torch.zeros_like(bits))
        row = torch.where(bits % 2 == 1, row | 0x8000, row)  # odd positions negative (-0 above the max)
        rows.append(row)
    w = torch.stack(rows)
    assert_quantize_exact(as_bf16(w))  # rows longer than 8192: vectors read twice
    # The same values in rows of 8160 (the register-held path), each row ending with its
    # maximum so that it keeps the scale of the row it comes from.
    quarters = w.reshape(255, 4, k // 4).clone()
    quarters[:, :, -1] = torch.tensor([(e << 7) | (e * 37 % 128) for e in range(255)], device=DEV)[:, None]
    assert_quantize_exact(as_bf16(quarters.reshape(255 * 4, k // 4)))


def as_bf16(bits32):
    """bf16 tensor from int32 tensor of 16-bit patterns."""
    return torch.where(bits32 >= 0x8000, bits32 - 0x10000, bits32).to(torch.int16).view(torch.bfloat16)


def test_quantize_4096_shape():
    w = nonzero_randn(4096, 4096)
    assert_quantize_exact(w)


# --------------------------------------------------------------------------------------------
# products

# Tolerance. The reference is exact (float64) from the same bf16 x, the same E4M3 bytes and the
# same scales: ref[m, n] = scale[n] * sum_k x[m, k] * q[n, k]. The kernels multiply exactly
# (bf16 x E4M3 products are exact in f32) and add K products in f32 (tensor-core or FMA
# accumulation, each addition off by at most one f32 ulp, 2^-23 relative): error <= K * 2^-23 * S
# with S[m, n] = scale[n] * sum_k |x[m, k] * q[n, k]|; the scale multiplication adds 2^-24
# relative and the final bf16 rounding at most half a bf16 ulp, 2^-8 relative. So
#   |out - ref| <= 2^-8 * |ref| + K * 2^-22 * S
# (the second term doubled for the scale rounding and the effect of the f32 error on the bf16
# rounding). A wrong element, index or scale shows up as an error of the order of S / sqrt(K) or
# more, above this bound for every K used here.


def random_e4m3(n, k, gen, codes=None):
    """E4M3 weights: uniform over every finite code (all binades, subnormals, +-0), or over
    `codes`."""
    if codes is None:
        b = torch.randint(0, 256, (n, k), device=DEV, generator=gen, dtype=torch.int32)
        b = torch.where((b & 0x7F) == 0x7F, b - 1, b)  # no NaN codes
    else:
        c = torch.tensor(codes, device=DEV, dtype=torch.int32)
        b = c[torch.randint(0, len(codes), (n, k), device=DEV, generator=gen)]
    return b.to(torch.uint8).view(E4M3)


def make_inputs(rows, n, k, seed, codes=None):
    gen = torch.Generator(device=DEV).manual_seed(seed)
    x = nonzero_randn(rows, k)
    q = random_e4m3(n, k, gen, codes)
    scale = (torch.rand(n, device=DEV, generator=gen) + 0.5) * 2.0**-8
    return x, q, scale


def reference(x, q, scale):
    xd, qd, sd = x.double(), q.float().double(), scale.double()
    ref = (xd @ qd.t()) * sd[None, :]
    mag = (xd.abs() @ qd.abs().t()) * sd[None, :]
    return ref, mag


def check_product(out, x, q, scale):
    k = x.shape[1]
    assert not torch.isnan(out).any(), "some output element was not written"
    ref, mag = reference(x, q, scale)
    bound((out.double() - ref).abs(), 2.0**-8 * ref.abs() + k * 2.0**-22 * mag,
          f"rows={x.shape[0]} n={q.shape[0]} k={k}")


def launch(kernel, x, q, scale, rows, n, k):
    out = torch.full((rows, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = kernel(x, q, scale, out, rows, n, k)
    torch.cuda.synchronize()
    return outcome, out


def product_twice(kernel, name, rows, n, k, seed):
    """One launch against the exact reference, and a second with the same bits."""
    x, q, scale = make_inputs(rows, n, k, seed=seed)
    outcome, out = launch(kernel, x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)
    _, again = launch(kernel, x, q, scale, rows, n, k)
    same_bits(out, again, f"{name} rows={rows} n={n} k={k}: a second run")


KERNELS = {
    "dense_gemv_fp8w": (lambda: fp8_linear.dense_gemv_fp8w, 8, True),
    "fp8_gemv_rt2": (lambda: fp8_gemv_rt.fp8_gemv_rt2, 8, False),
    "fp8_gemv_rt2_16": (lambda: fp8_gemv_rt.fp8_gemv_rt2_16, 16, False),
    "fp8_gemm_n128_row_scaled_m16": (lambda: fp8_linear.fp8_gemm_n128_row_scaled_m16, 16, True),
    "fp8_gemm_n128_row_scaled": (lambda: fp8_linear.fp8_gemm_n128_row_scaled, None, True),
}
# fp8_gemv_tma: hopper only (absent elsewhere)
GEMV_TMA_BUILT = fp8_gemv_rt.plan_fp8_gemv_tma(rows=16, n=256, k=256)["launched"]
if GEMV_TMA_BUILT:
    KERNELS["fp8_gemv_tma"] = (lambda: fp8_gemv_rt.fp8_gemv_tma, 16, False)
needs_gemv_tma = pytest.mark.skipif(not GEMV_TMA_BUILT, reason="fp8_gemv_tma is built for hopper only")
ROWS = [1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 129, 2048]
SHAPES_K16 = [(4104, 4096), (1001, 1040)]          # N off the 128 tile (odd N too); K % 64 != 0
SHAPES_ANY_K = [(4104, 1000), (37, 1), (130, 24)]  # K % 16 != 0
# fp8_gemm_n128_row_scaled splits K over a cluster when its tiles are few: 3 ranks of 16-17 K
# steps (ring path), and 2 ranks on the byte path (K % 16 != 0)
SHAPES_SPLIT = [(4104, 3088), (1000, 3000)]


def product_cases():
    for name, (_, max_rows, any_k) in KERNELS.items():
        shapes = SHAPES_K16 + (SHAPES_ANY_K if any_k else [])
        if name == "fp8_gemm_n128_row_scaled":
            shapes = shapes + SHAPES_SPLIT
        for rows in ROWS:
            if max_rows is not None and rows > max_rows:
                continue
            for n, k in shapes:
                if rows == 2048 and (n, k) != (4104, 4096) and k != 1000:
                    continue
                if (n, k) in SHAPES_SPLIT and rows not in (1, 17, 64, 129):
                    continue
                yield pytest.param(name, rows, n, k, id=f"{name}-m{rows}-n{n}-k{k}")


@pytest.mark.parametrize("name,rows,n,k", list(product_cases()))
def test_product(name, rows, n, k):
    kernel = KERNELS[name][0]()
    x, q, scale = make_inputs(rows, n, k, seed=rows * 7919 + n * 31 + k)
    outcome, out = launch(kernel, x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


@pytest.mark.parametrize("name", ["fp8_gemv_rt2", "fp8_gemv_rt2_16"] + (["fp8_gemv_tma"] if GEMV_TMA_BUILT else []))
@pytest.mark.parametrize("rows", [1, 8, 16])
@pytest.mark.parametrize("n,k", [(200, 16), (72, 48), (130, 12288), (64, 4160), (6144, 4096)])
def test_rt_split_edges(name, rows, n, k):
    """The 2-CTA split along K and the per-warp chunk interleave at their edges: K of one or a
    few 128-k chunks (rank 1 or some warps get none, a partial last chunk), long K, N on and
    off the 64-row tile. fp8_gemv_tma: one step, K split over 8 ranks of 24 steps or of 8-9
    steps (one rank's last step partial), and over 2 ranks (6144 x 4096)."""
    kernel, max_rows, _ = KERNELS[name]
    if rows > max_rows:
        pytest.skip("beyond the kernel's rows")
    x, q, scale = make_inputs(rows, n, k, seed=rows * 131 + n + k)
    outcome, out = launch(kernel(), x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


# The K-split forms for few weight rows: (instance, rows at most, its C); shapes within their
# grid bound (div_ceil(n, 64) * C <= 64): N on and off the 64-row tile, one 128-k chunk (ranks
# past it get none), K of a few chunks (some warps get none), a partial last chunk, long K.
KS = [("fp8_gemv_rt2_ks_8", 8, 8), ("fp8_gemv_rt2_ks_4", 8, 4),
      ("fp8_gemv_rt2_16_ks_8", 16, 8), ("fp8_gemv_rt2_16_ks_4", 16, 4)]
if RT32_BUILT:  # hopper
    KS += [("fp8_gemv_rt2_32_ks_8", 32, 8), ("fp8_gemv_rt2_32_ks_4", 32, 4)]
if RT64_BUILT:
    KS += [("fp8_gemv_rt2_64_ks_8", 64, 8), ("fp8_gemv_rt2_64_ks_4", 64, 4)]
KS_SHAPES = [(512, 4096), (264, 1040), (200, 16), (65, 4112), (130, 12288), (1000, 4096)]


def ks_cases():
    for name, max_rows, c in KS:
        for rows in (1, 2, 7, 8, 9, 15, 16, 17, 32, 33, 48, 49, 64):
            for n, k in KS_SHAPES:
                if rows <= max_rows and (rows <= 32 or max_rows == 64) and -(-n // 64) * c <= 64:
                    yield pytest.param(name, rows, n, k, id=f"{name}-m{rows}-n{n}-k{k}")


@pytest.mark.parametrize("name,rows,n,k", list(ks_cases()))
def test_rt_ks_product(name, rows, n, k):
    """The K split over 4 or 8 ranks (each finalising 16 or 8 of a tile's 64 rows, the ranks'
    partials added in rank order) against the exact reference, and bitwise repeatable."""
    kernel = getattr(fp8_gemv_rt, name)
    product_twice(kernel, name, rows, n, k, seed=rows * 17 + n * 3 + k)


@pytest.mark.parametrize("name", [name for name, _, _ in KS])
def test_rt_ks_byte_path_and_subnormals(name):
    """Misaligned bases (the byte path) and weights of only subnormals and the smallest normals."""
    check_misaligned(getattr(fp8_gemv_rt, name), codes=list(range(0, 16)) + list(range(0x80, 0x90)))


def test_rt_ks_plans():
    """C = 8 up to 8 tiles of 64 weight rows, C = 4 up to 16, beyond neither (the grid bound)."""
    p = fp8_gemv_rt.fp8_gemv_rt2_16_ks_8.plan(rows=16, n=512, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (64, 1, 1), p
    p = fp8_gemv_rt.fp8_gemv_rt2_16_ks_8.plan(rows=16, n=513, k=4096)
    assert not p["launched"] and "KS_CTAS" in p["reason"], p
    p = fp8_gemv_rt.fp8_gemv_rt2_ks_4.plan(rows=1, n=1024, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (64, 1, 1), p
    assert not fp8_gemv_rt.fp8_gemv_rt2_ks_4.plan(rows=1, n=1025, k=4096)["launched"]
    assert not fp8_gemv_rt.fp8_gemv_rt2_ks_8.plan(rows=9, n=512, k=4096)["launched"]  # rows <= 8


def launch_x3(kernel, x, parts, rows, k):
    """One launch of a three-product GEMV over parts [(q_i, scale_i, out_i)], synchronised."""
    args = {}
    for i, (q, scale, out) in enumerate(parts):
        args.update({f"q{i}": q, f"scale{i}": scale, f"out{i}": out, f"n{i}": q.shape[0]})
    outcome = kernel(x=x, rows=rows, k=k, **args)
    assert outcome.launched, outcome.reason
    torch.cuda.synchronize()


@pytest.mark.parametrize("rows", [1, 9, 16])
@pytest.mark.parametrize("ns,k", [((4096, 1024, 1024), 4096), ((100, 0, 65), 4096), ((64, 130, 1), 48),
                                  ((0, 0, 200), 12288)])
def test_rt2_16_x3_equals_three_launches(rows, ns, k):
    """fp8_gemv_rt2_16_x3: each of its three outputs has the bits of a separate fp8_gemv_rt2_16
    launch on that weight (segments of any size, empty ones, N off the 64-row tile, misaligned
    third weight), and lies within the reference bound."""
    x = nonzero_randn(rows, k)
    parts = []
    for i, n in enumerate(ns):
        _, q, scale = make_inputs(1, n, k, seed=rows * 17 + n * 3 + k + i)
        if i == 2 and n:  # a weight off 16-byte alignment: that segment's clusters take the byte path
            qb = torch.empty(n * k + 1, device=DEV, dtype=torch.uint8)
            qb[1:] = q.view(torch.uint8).reshape(-1)
            q = qb[1:].view(E4M3).view(n, k)
        parts.append((q, scale, torch.full((rows, n), float("nan"), device=DEV, dtype=torch.bfloat16)))
    launch_x3(fp8_gemv_rt.fp8_gemv_rt2_16_x3, x, parts, rows, k)
    for i, (q, scale, out) in enumerate(parts):
        if q.shape[0] == 0:
            continue
        single, expect = launch(fp8_gemv_rt.fp8_gemv_rt2_16, x, q, scale, rows, q.shape[0], k)
        assert single.launched, single.reason
        same_bits(out, expect, f"fp8_gemv_rt2_16_x3 output {i} against its own launch")
        check_product(out, x, q, scale)


RT1 = {"fp8_gemv_rt1": 8, "fp8_gemv_rt1_16": 16}
# N just past the split-K kernels' range (off the 64-row tile) with K of one 16-k piece, of a
# partial last 128-k chunk, of several and of many chunks; N of a gate / up projection.
RT1_SHAPES = [(RT1_N, 16), (RT1_N, 1040), (RT1_N, 4096), (RT1_N, 12288), (24576, 4096)]


@pytest.mark.parametrize("name", list(RT1))
@pytest.mark.parametrize("rows", [1, 2, 7, 8, 9, 15, 16])
@pytest.mark.parametrize("n,k", RT1_SHAPES)
def test_rt1_product(name, rows, n, k):
    """The whole-K GEMVs against the reference, and repeatable bits."""
    if rows > RT1[name]:
        pytest.skip("beyond the kernel's rows")
    if n == 24576 and rows not in (1, 16):
        pytest.skip("the large weight at the row counts of the drafter only")
    kernel = getattr(fp8_gemv_rt, name)
    product_twice(kernel, name, rows, n, k, seed=rows * 613 + n + k)


@pytest.mark.parametrize("name", list(RT1))
def test_rt1_misaligned_and_bounds(name):
    """Base pointers off 16-byte alignment take the byte path; the grid bound holds both ways."""
    check_misaligned(getattr(fp8_gemv_rt, name), n=RT1_N)
    rows = RT1[name]
    p = getattr(fp8_gemv_rt, name).plan(rows=rows, n=RT1_N, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (SMS // 2 + 1, 1, 1), p
    p = getattr(fp8_gemv_rt, name).plan(rows=rows, n=RT2_N, k=4096)
    assert not p["launched"] and clause_in(p["reason"], "div_ceil(n, TILE_N) * CLUSTER > device.sm_count"), p


@pytest.mark.parametrize("rows", [1, 9, 16])
@pytest.mark.parametrize("ns,k", [((4096, 1024, 1024), 4096), ((RT1_N - 100, 0, 65), 4096),
                                  ((RT2_N, 130, 1), 48), ((0, 0, RT1_N), 12288)])
def test_rt1_16_x3_equals_three_launches(rows, ns, k):
    """fp8_gemv_rt1_16_x3: each output has the bits of a separate fp8_gemv_rt1_16 launch on that
    weight (segments of any size, empty ones, N off the tile), within the reference bound."""
    x = nonzero_randn(rows, k)
    parts = []
    for i, n in enumerate(ns):
        _, q, scale = make_inputs(1, n, k, seed=rows * 19 + n * 5 + k + i)
        parts.append((q, scale, torch.full((rows, n), float("nan"), device=DEV, dtype=torch.bfloat16)))
    launch_x3(fp8_gemv_rt.fp8_gemv_rt1_16_x3, x, parts, rows, k)
    for i, (q, scale, out) in enumerate(parts):
        n = q.shape[0]
        if n == 0:
            continue
        # the single launch of a weight too small for rt1_16 on its own: the same tiles computed
        # by a launch of rt1_16 over a larger weight whose first rows these are
        big_n = max(n, RT1_N)
        qb = torch.zeros(big_n, k, device=DEV, dtype=torch.uint8)
        qb[:n] = q.view(torch.uint8)
        sb = torch.ones(big_n, device=DEV)
        sb[:n] = scale
        single, expect = launch(fp8_gemv_rt.fp8_gemv_rt1_16, x, qb.view(E4M3), sb, rows, big_n, k)
        assert single.launched, single.reason
        same_bits(out, expect[:, :n], f"fp8_gemv_rt1_16_x3 output {i} against its own launch")
        check_product(out, x, q, scale)


# The 32-row GEMVs: (kernel, N where the chain takes it): split K past the K-split forms' 16
# tiles (off the tile) up to SMS / 2 tiles, whole K beyond.
RT32 = {"fp8_gemv_rt2_32": [1100, RT2_N], "fp8_gemv_rt1_32": [RT1_N, 24576]}
needs_rt32 = pytest.mark.skipif(not RT32_BUILT, reason="the 32-row GEMVs are built for hopper only")


@needs_rt32
@pytest.mark.parametrize("name", list(RT32))
@pytest.mark.parametrize("rows", [1, 9, 16, 17, 24, 31, 32])
@pytest.mark.parametrize("which,k", [(0, 16), (0, 1040), (0, 4096), (1, 4096), (0, 12288)])
def test_rt32_product(name, rows, which, k):
    """The 32-row GEMVs against the reference at 1-32 rows (x tiles past `rows` zero), K of one
    16-k piece, of a partial last chunk, of several and many chunks; repeatable bits."""
    n = RT32[name][which]
    if n == 24576 and rows not in (17, 32):
        pytest.skip("the large weight at two row counts only")
    kernel = getattr(fp8_gemv_rt, name)
    product_twice(kernel, name, rows, n, k, seed=rows * 421 + n + k)


# The 64-row GEMVs: (kernel, N where the chain takes it), as RT32; the 128-row-tile form just
# past its bound (off the tile) and on the lm_head.
RT64 = {"fp8_gemv_rt2_64": [1100, RT2_N], "fp8_gemv_rt1_64": [RT1_N, 24576],
        "fp8_gemv_rt1_64_128": [RT128_N, 151936]}
needs_rt64 = pytest.mark.skipif(not RT64_BUILT, reason="the 64-row GEMVs are built for hopper only")


def rt64_cases():
    for name, ns in RT64.items():
        big = name == "fp8_gemv_rt1_64_128"
        for rows in (1, 16, 33, 47, 48, 49, 57, 64):
            for which, k in [(0, 16), (0, 1040), (0, 4096), (1, 4096), (0, 12288)]:
                n = ns[which]
                if (big or n == 24576) and (rows not in (33, 64) or k == 12288):
                    continue  # the large weights at two row counts, K of at most 4096
                yield pytest.param(name, rows, n, k, id=f"{name}-m{rows}-n{n}-k{k}")


@needs_rt64
@pytest.mark.parametrize("name,rows,n,k", list(rt64_cases()))
def test_rt64_product(name, rows, n, k):
    """The 64-row GEMVs against the reference at 1-64 rows: both forms (six x tiles up to 48 rows,
    eight above; tiles past `rows` zero), K of one 16-k piece, of a partial last chunk, of several
    and many chunks; repeatable bits."""
    product_twice(getattr(fp8_gemv_rt, name), name, rows, n, k, seed=rows * 613 + n + k)


# The 32- and 64-row GEMVs with the most rows each takes.
WIDE = ([pytest.param(name, 32, marks=needs_rt32, id=name) for name in RT32] +
        [pytest.param(name, 64, marks=needs_rt64, id=name) for name in RT64])


@pytest.mark.parametrize("name,max_rows", WIDE)
def test_wide_byte_path_subnormals_and_bounds(name, max_rows):
    """Misaligned bases (the byte path; the 64-row kernels at 3 and 60 rows, both tile counts),
    weights of only subnormals and the smallest normals at the most rows, and the plan's bounds on
    either side."""
    kernel = getattr(fp8_gemv_rt, name)
    low, _ = (RT32 if max_rows == 32 else RT64)[name]
    for rows in (3,) if max_rows == 32 else (3, 60):
        check_misaligned(kernel, n=low, rows=rows)
    x, q, scale = make_inputs(max_rows, low, 4096, seed=6, codes=list(range(0, 16)) + list(range(0x80, 0x90)))
    outcome, out = launch(kernel, x, q, scale, max_rows, low, 4096)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)
    p = kernel.plan(rows=max_rows + 1, n=low, k=4096)
    assert not p["launched"] and clause_in(p["reason"], f"rows <= {max_rows}"), p
    p = kernel.plan(rows=max_rows, n=low, k=4096)
    phases = 2 if name == "fp8_gemv_rt1_64_128" else 4
    assert p["launched"] and p["shared_mem"] == 2 * 8 * 256 * 16 + 2 * phases * max_rows * 256, p
    if name.startswith("fp8_gemv_rt2"):
        assert tuple(p["grid"]) == (2 * 18, 1, 1), p
    elif name == "fp8_gemv_rt1_64_128":
        assert tuple(p["grid"]) == (4 * SMS + 1, 1, 1), p
        p = kernel.plan(rows=64, n=RT128_N - 8, k=4096)
        assert not p["launched"] and clause_in(p["reason"], "div_ceil(n, 2 * TILE_N) > WAVES_128 * device.sm_count"), p
    else:
        assert tuple(p["grid"]) == (SMS // 2 + 1, 1, 1), p
        p = kernel.plan(rows=max_rows, n=RT2_N, k=4096)
        assert not p["launched"] and clause_in(p["reason"], "div_ceil(n, TILE_N) * CLUSTER > device.sm_count"), p


def test_rt2_16_x3_grid():
    p = fp8_gemv_rt.fp8_gemv_rt2_16_x3.plan(rows=16, n0=4096, n1=1024, n2=1024, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (2 * (64 + 16 + 16), 1, 1), p
    p = fp8_gemv_rt.fp8_gemv_rt2_16_x3.plan(rows=17, n0=64, n1=64, n2=64, k=4096)
    assert not p["launched"] and "rows <= 16" in p["reason"], p
    p = fp8_gemv_rt.fp8_gemv_rt1_16_x3.plan(rows=16, n0=4096, n1=1024, n2=1024, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (64 + 16 + 16, 1, 1), p
    p = fp8_gemv_rt.fp8_gemv_rt1_16_x3.plan(rows=16, n0=RT2_N - 128, n1=64, n2=64, k=4096)
    assert not p["launched"] and clause_in(p["reason"], "tiles * CLUSTER > device.sm_count"), p


@pytest.mark.parametrize("name", list(KERNELS))
def test_product_subnormal_weights(name):
    """Weights of only E4M3 subnormals and the smallest normals: a conversion that flushed the
    subnormals would be off by a large fraction of every output."""
    kernel = KERNELS[name][0]()
    codes = list(range(0, 16)) + list(range(0x80, 0x90))
    rows, n, k = 4, 520, 4096
    x, q, scale = make_inputs(rows, n, k, seed=5, codes=codes)
    outcome, out = launch(kernel, x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


def check_misaligned(kernel, codes=None, n=300, rows=3):
    """x and q at base pointers off 16-byte alignment (invisible to the launcher): launched, and
    the product exact (rows x 1024 by n weight rows)."""
    k = 1024
    x, q, scale = make_inputs(rows, n, k, seed=9, codes=codes)
    xb = torch.empty(rows * k + 1, device=DEV, dtype=torch.bfloat16)
    xb[1:] = x.reshape(-1)
    qb = torch.empty(n * k + 3, device=DEV, dtype=torch.uint8)
    qb[3:] = q.view(torch.uint8).reshape(-1)
    out = torch.full((rows, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = kernel(xb[1:], qb[3:].view(E4M3), scale, out, rows, n, k)
    torch.cuda.synchronize()
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


@pytest.mark.parametrize("name", [n for n in KERNELS if n != "fp8_gemv_tma"])  # TMA: not launched
def test_product_misaligned_pointers(name):
    """Base pointers off 16-byte alignment (invisible to the launcher) take the byte paths."""
    check_misaligned(KERNELS[name][0]())


@pytest.mark.parametrize("name", list(KERNELS))
def test_repeatable_bits(name):
    kernel = KERNELS[name][0]()
    rows = 7 if KERNELS[name][1] is not None else 300
    n, k = 4104, 4096
    x, q, scale = make_inputs(rows, n, k, seed=11)
    _, first = launch(kernel, x, q, scale, rows, n, k)
    for _ in range(3):
        _, again = launch(kernel, x, q, scale, rows, n, k)
        same_bits(first, again, f"{name} rows={rows}: a later run against the first")


def test_rows_clauses_not_launched():
    x, q, scale = make_inputs(17, 256, 4096, seed=3)
    o, out = launch(fp8_gemv_rt.fp8_gemv_rt2, x, q, scale, 9, 256, 4096)
    assert not o.launched and clause_in(o.reason, "rows <= 8")
    o, out = launch(fp8_gemv_rt.fp8_gemv_rt2_16, x, q, scale, 17, 256, 4096)
    assert not o.launched and clause_in(o.reason, "rows <= 16")
    assert torch.isnan(out).all()
    x, q, scale = make_inputs(1, 256, 1000, seed=4)
    o, out = launch(fp8_gemv_rt.fp8_gemv_rt2, x, q, scale, 1, 256, 1000)
    assert not o.launched and clause_in(o.reason, "k % 16 == 0")
    assert torch.isnan(out).all()


# --------------------------------------------------------------------------------------------
# the engine's chain


def set_switch(name, on):
    if on:
        os.environ[name] = "1"
    else:
        os.environ.pop(name, None)
    kernelgen_ops.refresh()


@pytest.fixture
def switches():
    yield
    set_switch(RT_SWITCH, False)
    set_switch(LINEAR_SWITCH, False)


CHAIN = [  # (rows, n, k, kernel)
    (1, 264, 4096, "fp8_gemv_rt2_ks_8"),
    (8, 264, 4096, "fp8_gemv_rt2_ks_8"),
    (9, 264, 4096, "fp8_gemv_rt2_16_ks_8"),
    (16, 264, 4096, "fp8_gemv_rt2_16_ks_8"),
    (1, 1000, 4096, "fp8_gemv_rt2_ks_4"),     # 16 tiles: C = 4
    (16, 1000, 4096, "fp8_gemv_rt2_16_ks_4"),
    (1, 1100, 4096, "fp8_gemv_rt2"),          # 18 tiles: C = 2
    (8, 1100, 4096, "fp8_gemv_rt2"),
    (9, 1100, 4096, "fp8_gemv_rt2_16"),
    (16, 1100, 4096, "fp8_gemv_rt2_16"),
    (1, RT2_N, 4096, "fp8_gemv_rt2"),         # SMS / 2 tiles: 2-CTA clusters fit one CTA an SM
    (16, RT2_N, 4096, "fp8_gemv_rt2_16"),
    (1, RT1_N, 4096, "fp8_gemv_rt1"),         # more: the whole of K a CTA
    (8, RT1_N, 4096, "fp8_gemv_rt1"),
    (9, 151936, 4096, "fp8_gemv_rt1_16"),
    (16, RT1_N, 4096, "fp8_gemv_rt1_16"),
    (17, 264, 4096, "fp8_gemv_rt2_32_ks_8" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),
    (32, 1000, 4096, "fp8_gemv_rt2_32_ks_4" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),
    (17, 1100, 4096, "fp8_gemv_rt2_32" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),  # 18 tiles: C = 2
    (32, RT2_N, 4096, "fp8_gemv_rt2_32" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),
    (17, RT1_N, 4096, "fp8_gemv_rt1_32" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),
    (32, 24576, 4096, "fp8_gemv_rt1_32" if RT32_BUILT else "fp8_gemm_n128_row_scaled"),
    (33, 264, 4096, "fp8_gemv_rt2_64_ks_8" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (64, 1000, 4096, "fp8_gemv_rt2_64_ks_4" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (33, 1100, 4096, "fp8_gemv_rt2_64" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (64, RT2_N, 4096, "fp8_gemv_rt2_64" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (33, RT1_N, 4096, "fp8_gemv_rt1_64" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (64, RT128_N - 8, 4096, "fp8_gemv_rt1_64" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (48, RT128_N, 4096, "fp8_gemv_rt1_64_128" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (65, RT1_N, 4096, "fp8_gemm_tma" if RT64_BUILT else "fp8_gemm_n128_row_scaled"),
    (32, RT1_N, 1000, "fp8_gemm_n128_row_scaled"),
    (64, RT1_N, 1000, "fp8_gemm_n128_row_scaled"),
    (1, 264, 1000, "fp8_gemm_n128_row_scaled_m16"),
    (16, 264, 1000, "fp8_gemm_n128_row_scaled_m16"),
    (17, 264, 1000, "fp8_gemm_n128_row_scaled"),
    (4, 264, 32768, "fp8_gemm_n128_row_scaled"),  # beyond the register-tiled kernels' K limit
]


def run_chain(rows, n, k, seed=0):
    x, q, scale = make_inputs(rows, n, k, seed=seed + rows + k)
    out = torch.full((rows, n), float("nan"), device=DEV, dtype=torch.bfloat16)
    outcome = fp8_linear.fp8_linear(x, q, scale, out, rows, n, k)
    torch.cuda.synchronize()
    return outcome, out, x, q, scale


def kernel_name(outcome):
    return (outcome.kernel or "").split(".")[-1]


@pytest.mark.parametrize("rows,n,k,expect", CHAIN, ids=[f"m{r}-n{n}-k{k}" for r, n, k, _ in CHAIN])
def test_chain_picks(rows, n, k, expect, switches):
    set_switch(RT_SWITCH, False)
    outcome, out, x, q, scale = run_chain(rows, n, k)
    assert outcome.launched and kernel_name(outcome) == expect, (outcome.kernel, outcome.reason)
    check_product(out, x, q, scale)


@pytest.mark.parametrize("rows", [1, 8, 9, 16])
def test_chain_rt_kill_switch(rows, switches):
    set_switch(RT_SWITCH, True)
    outcome, out, x, q, scale = run_chain(rows, 264, 4096)
    assert outcome.launched and kernel_name(outcome) == "fp8_gemm_n128_row_scaled_m16", outcome.kernel
    check_product(out, x, q, scale)
    assert not fp8_gemv_rt.fp8_gemv_rt2(x, q, scale, out, rows, 264, 4096).launched
    assert not fp8_gemv_rt.fp8_gemv_rt2_16_ks(x, q, scale, out, rows, 264, 4096).launched
    set_switch(RT_SWITCH, False)  # live: the same call now takes the module's GEMVs again
    outcome, out, *_ = run_chain(rows, 264, 4096)
    expect = "fp8_gemv_rt2_ks_8" if rows <= 8 else "fp8_gemv_rt2_16_ks_8"
    assert outcome.launched and kernel_name(outcome) == expect, outcome.kernel


def test_chain_linear_kill_switch(switches):
    set_switch(LINEAR_SWITCH, True)
    outcome, *_ = run_chain(4, 264, 4096)
    assert outcome.launched and kernel_name(outcome) == "fp8_gemv_rt2_ks_8"  # another module
    outcome, out, *_ = run_chain(65, 264, 4096)  # beyond every GEMV's rows
    assert not outcome.launched
    assert torch.isnan(out).all()
    set_switch(LINEAR_SWITCH, False)
    outcome, *_ = run_chain(65, 264, 4096)
    assert outcome.launched and kernel_name(outcome) == ("fp8_gemm_tma" if TMA_BUILT else "fp8_gemm_n128_row_scaled")


def test_plans():
    p = fp8_gemv_rt.plan_fp8_gemv_rt2(rows=1, n=4104, k=4096)
    # 2-CTA clusters over 64 weight rows; a 3-slot ring of 8 x 16-byte pieces per thread, or half
    # an SM's shared memory when the grid has at most one CTA an SM (130 CTAs here)
    ring = 3 * 8 * 256 * 16
    props = torch.cuda.get_device_properties(0)
    assert p["launched"] and tuple(p["grid"]) == (65 * 2, 1, 1) and tuple(p["block"]) == (256, 1, 1)
    one_per_sm = 65 * 2 <= props.multi_processor_count
    assert p["shared_mem"] == (max(ring, props.shared_memory_per_multiprocessor // 2) if one_per_sm else ring)
    p = fp8_gemv_rt.plan_fp8_gemv_rt2_16(rows=16, n=24576, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (384 * 2, 1, 1) and p["shared_mem"] == ring  # several waves
    p = fp8_linear.plan_quantize_bf16_to_fp8(n=4097, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (4097, 1, 1)  # one CTA per row
    p = fp8_linear.plan_fp8_gemm_n128_row_scaled(rows=300, n=4104, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (3, 33, 2), p  # 99 tiles: K split over 2 CTAs
    p = fp8_linear.plan_fp8_gemm_n128_row_scaled(rows=64, n=4096, k=12288)
    assert p["launched"] and tuple(p["grid"]) == (1, 32, 4), p
    p = fp8_linear.plan_fp8_gemm_n128_row_scaled(rows=2048, n=4096, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (16, 32, 1), p  # 512 tiles: no split
    p = fp8_linear.plan_fp8_gemm_n128_row_scaled(rows=17, n=1000, k=1000)
    assert p["launched"] and tuple(p["grid"]) == (1, 8, 1), p  # K below SPLIT_K_MIN: no split
    assert p["shared_mem"] == 3 * (128 * 64 * 2 + 128 * 64) + 128 * 64 * 2  # the sm_90a ring


# ---------------------------------------------------------------- fp8_gemm_tma (hopper)

TMA_BUILT = fp8_linear.plan_fp8_gemm_tma(rows=256, n=256, k=256)["launched"]
needs_tma = pytest.mark.skipif(not TMA_BUILT, reason="fp8_gemm_tma is built for hopper only")


def tma_cases():
    # rows from TMA_MIN_ROWS; N off the tile (odd N), K % 64 != 0, K splits over 3 ranks (4104 x
    # 3088 at 65 rows), one step of K; 256-row tiles (at least TMA_WIDE_MIN of them): 300 rows
    # over 4104 (K split in 2), 2048 rows, and 1000 rows (the last tile 232 rows, its second x
    # box partly past the rows)
    for rows in (65, 129, 300, 2048):
        for n, k in SHAPES_K16 + SHAPES_SPLIT[:1] + [(136, 16)]:
            if rows == 2048 and (n, k) != (4104, 4096):
                continue
            yield pytest.param(rows, n, k, id=f"m{rows}-n{n}-k{k}")
    yield pytest.param(1000, 8200, 1040, id="m1000-n8200-k1040")


@needs_tma
@pytest.mark.parametrize("rows,n,k", list(tma_cases()))
def test_tma_product(rows, n, k):
    x, q, scale = make_inputs(rows, n, k, seed=rows * 7919 + n * 31 + k)
    outcome, out = launch(fp8_linear.fp8_gemm_tma, x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)
    _, again = launch(fp8_linear.fp8_gemm_tma, x, q, scale, rows, n, k)
    same_bits(out, again, f"fp8_gemm_tma rows={rows} n={n} k={k}: a second run")


@needs_tma
def test_tma_subnormal_weights():
    codes = list(range(0, 16)) + list(range(0x80, 0x90))
    rows, n, k = 130, 520, 4096
    x, q, scale = make_inputs(rows, n, k, seed=5, codes=codes)
    outcome, out = launch(fp8_linear.fp8_gemm_tma, x, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


@needs_tma
def test_tma_not_launched_then_chain_runs_n128():
    """Not launched, writing nothing: rows under TMA_MIN_ROWS, K % 16 != 0 (clauses) and arrays off
    16-byte alignment (UNALIGNED, at launch); the chain then runs fp8_gemm_n128_row_scaled (at 64
    rows, the 64-row GEMV for few weight rows)."""
    rows, n = 130, 264
    cases = []
    x, q, scale = make_inputs(64, n, 512, seed=1)
    cases.append((64, 512, x, q, scale, "rows >= TMA_MIN_ROWS"))
    x, q, scale = make_inputs(rows, n, 1000, seed=2)
    cases.append((rows, 1000, x, q, scale, "(k % 16) == 0"))
    x, q, scale = make_inputs(rows, n, 512, seed=3)
    xb = torch.empty(rows * 512 + 8, device=DEV, dtype=torch.bfloat16)
    xb[1:1 + rows * 512] = x.reshape(-1)
    cases.append((rows, 512, xb[1:1 + rows * 512].view(rows, 512), q, scale, "16-byte aligned"))
    qb = torch.empty(n * 512 + 8, device=DEV, dtype=torch.uint8)
    qb[3:3 + n * 512] = q.view(torch.uint8).reshape(-1)
    cases.append((rows, 512, x, qb[3:3 + n * 512].view(E4M3).view(n, 512), scale, "16-byte aligned"))
    for r, k, x, q, scale, why in cases:
        outcome, out = launch(fp8_linear.fp8_gemm_tma, x, q, scale, r, n, k)
        assert not outcome.launched and outcome.code > 0 and why in outcome.reason, (why, outcome.reason)
        assert torch.isnan(out).all(), "a kernel that did not launch wrote"
        outcome, out = launch(fp8_linear.fp8_linear, x, q, scale, r, n, k)
        expect = "fp8_gemv_rt2_64_ks_8" if r <= 64 and RT64_BUILT else "fp8_gemm_n128_row_scaled"
        assert outcome.launched and kernel_name(outcome) == expect, (why, outcome.kernel)
        check_product(out, x, q, scale)


@needs_tma
def test_tma_in_the_chain():
    outcome, out, x, q, scale = run_chain(129, 4104, 4096)
    assert outcome.launched and kernel_name(outcome) == "fp8_gemm_tma", outcome.kernel
    check_product(out, x, q, scale)


@needs_tma
def test_tma_graph_replay_reads_current_data():
    """The tensor maps are kernel parameters, captured by value: a replay reads what the arrays
    hold then, split K included (256 x 4096 x 4096: 64 tiles, 2 ranks)."""
    rows, n, k = 256, 4096, 4096
    assert tuple(fp8_linear.plan_fp8_gemm_tma(rows=rows, n=n, k=k)["grid"]) == (64, 1, 2)
    check_replays(fp8_linear.fp8_gemm_tma, rows, n, k, seeds=(1, 2, 3))


def check_replays(kernel, rows, n, k, seeds):
    """One launch of `kernel` captured in a CUDA graph with the inputs of seeds[0], then replayed
    with the arrays refilled from each further seed: every replay matches the reference."""
    x, q, scale = make_inputs(rows, n, k, seed=seeds[0])
    out = torch.empty((rows, n), device=DEV, dtype=torch.bfloat16)
    g, outcome = capture_graph(lambda s: kernel(x, q, scale, out, rows, n, k, stream=s))
    assert outcome.launched, outcome.reason
    for seed in seeds[1:]:
        x2, q2, scale2 = make_inputs(rows, n, k, seed=seed)
        x.copy_(x2)
        q.copy_(q2)
        scale.copy_(scale2)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check_product(out, x, q, scale)


@needs_tma
def test_tma_plans():
    p = fp8_linear.plan_fp8_gemm_tma(rows=2048, n=4104, k=4096)  # 8 x 33 tiles of 256 x rows
    assert p["launched"] and tuple(p["grid"]) == (264, 1, 1) and tuple(p["block"]) == (384, 1, 1), p
    assert p["shared_mem"] == 5 * (256 * 64 * 2 + 128 * 64) + 2 * 8 * 8
    p = fp8_linear.plan_fp8_gemm_tma(rows=1000, n=8200, k=1040)  # 4 x 65 wide tiles: 260
    assert tuple(p["grid"]) == (260, 1, 1), p
    p = fp8_linear.plan_fp8_gemm_tma(rows=96, n=8192, k=4096)  # 64 tiles of 128 x rows: K split in 2
    assert tuple(p["grid"]) == (64, 1, 2), p
    p = fp8_linear.plan_fp8_gemm_tma(rows=129, n=1000, k=4112)  # 8 wide tiles are too few: 16 of 128
    assert p["launched"] and tuple(p["grid"]) == (16, 1, 4), p  # x rows, K split over 4 (one wave)
    p = fp8_linear.plan_fp8_gemm_tma(rows=300, n=4104, k=4096)  # 2 x 33 wide tiles, K split in 2
    assert p["launched"] and tuple(p["grid"]) == (66, 1, 2), p
    p = fp8_linear.plan_fp8_gemm_tma(rows=256, n=24576, k=4096)  # 192 tiles: 1.5 waves unsplit, 3 of half K
    assert tuple(p["grid"]) == (192, 1, 2), p
    p = fp8_linear.plan_fp8_gemm_tma(rows=2048, n=24576, k=4096)  # 1536 tiles, past two waves: never split
    assert tuple(p["grid"]) == (1536, 1, 1), p


# ---------------------------------------------------------------- fp8_gemv_tma (hopper)


@needs_gemv_tma
def test_gemv_tma_x_rows_past_rows_read_as_zero():
    """The x box covers 16 rows; rows past `rows` (here NaN in the caller's buffer) land as
    zeros and leave the output alone."""
    rows, n, k = 3, 4104, 4096
    x, q, scale = make_inputs(rows, n, k, seed=21)
    xb = torch.full((16, k), float("nan"), device=DEV, dtype=torch.bfloat16)
    xb[:rows] = x
    outcome, out = launch(fp8_gemv_rt.fp8_gemv_tma, xb, q, scale, rows, n, k)
    assert outcome.launched, outcome.reason
    check_product(out, x, q, scale)


@needs_gemv_tma
def test_gemv_tma_not_launched_then_chain_runs_rt2():
    """x or q off 16-byte alignment: not launched (UNALIGNED), nothing written; the chain then
    runs the register-tiled GEMV (its K-split form for these few rows, its byte path)."""
    rows, n, k = 5, 264, 512
    x, q, scale = make_inputs(rows, n, k, seed=22)
    xb = torch.empty(rows * k + 8, device=DEV, dtype=torch.bfloat16)
    xb[1:1 + rows * k] = x.reshape(-1)
    qb = torch.empty(n * k + 8, device=DEV, dtype=torch.uint8)
    qb[3:3 + n * k] = q.view(torch.uint8).reshape(-1)
    for xa, qa in ((xb[1:1 + rows * k].view(rows, k), q), (x, qb[3:3 + n * k].view(E4M3).view(n, k))):
        outcome, out = launch(fp8_gemv_rt.fp8_gemv_tma, xa, qa, scale, rows, n, k)
        assert not outcome.launched and outcome.code > 0 and "16-byte aligned" in outcome.reason, outcome.reason
        assert torch.isnan(out).all(), "a kernel that did not launch wrote"
        outcome, out = launch(fp8_linear.fp8_linear, xa, qa, scale, rows, n, k)
        assert outcome.launched and kernel_name(outcome) == "fp8_gemv_rt2_ks_8", outcome.kernel
        check_product(out, x, q, scale)


@needs_gemv_tma
def test_gemv_tma_graph_replay_reads_current_data():
    """Captured once with K split over 4 ranks; each replay reads the arrays' current contents."""
    rows, n, k = 16, 4096, 4096
    assert tuple(fp8_gemv_rt.plan_fp8_gemv_tma(rows=rows, n=n, k=k)["grid"]) == (32, 1, 4)
    check_replays(fp8_gemv_rt.fp8_gemv_tma, rows, n, k, seeds=(23, 24, 25))


@pytest.mark.parametrize("rows", [8, 9, 16])
def test_chain_vocabulary_sized_weight(rows):
    """A vocabulary-sized N (65536 weight rows) takes the register-tiled GEMVs like any other, in
    their whole-K form (1024 tiles): fp8_gemv_rt1 at 8 rows, fp8_gemv_rt1_16 at 9-16 (the split
    fp8_gemv_rt2_16 was on the H200 faster than fp8_gemv_tma on the 151936 x 4096 lm_head at 16
    rows, 180.7 against 187.1 us, and rt1_16 is faster than rt2_16 there)."""
    outcome, out, x, q, scale = run_chain(rows, 512 * 128, 64)
    expect = "fp8_gemv_rt1_16" if rows > 8 else "fp8_gemv_rt1"
    assert outcome.launched and kernel_name(outcome) == expect, outcome.kernel
    check_product(out, x, q, scale)


@needs_gemv_tma
def test_gemv_tma_plans():
    # 128-row tiles; K split while they are fewer than 132 (at most 8 ranks, 512 k each at least)
    for (rows, n, k), grid in {(16, 4096, 4096): (32, 1, 4), (1, 6144, 4096): (48, 1, 2),
                               (8, 24576, 4096): (192, 1, 1), (16, 151936, 4096): (1187, 1, 1),
                               (16, 1001, 1040): (8, 1, 2), (2, 256, 256): (2, 1, 1),
                               (9, 256, 12288): (2, 1, 8)}.items():
        p = fp8_gemv_rt.plan_fp8_gemv_tma(rows=rows, n=n, k=k)
        assert p["launched"] and tuple(p["grid"]) == grid and tuple(p["block"]) == (384, 1, 1), (rows, n, k, p)
        assert p["shared_mem"] == 10 * (16 * 64 * 2 + 128 * 64) + 2 * 10 * 8
    p = fp8_gemv_rt.plan_fp8_gemv_tma(rows=17, n=256, k=256)
    assert not p["launched"] and clause_in(p["reason"], "rows <= 16"), p
