"""GPU tests of specs/w4a16_gemm.yaml (kernels/dflash/w4a16_gemm.cu): NVFP4 weights x bf16
activations, against a float64 reference over the exactly dequantized weights, and the
dequantization itself against a table built from the E2M1 and E4M3 format definitions."""

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import w4a16_gemm  # noqa: E402

from tests.gpu.bf16_helpers import clause_in, nonzero_randn  # noqa: E402
from tests.gpu.checks import bound, identical, same_bits  # noqa: E402

DEV = "cuda"
BF16 = torch.bfloat16
F64 = torch.float64

# E2M1: codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 (exponent bias 1, one mantissa bit, code 1
# the subnormal 0.5); bit 3 is the sign.
E2M1_MAG = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1_table():
    mags = torch.tensor(E2M1_MAG, dtype=F64)
    return torch.cat([mags, -mags]).to(DEV)


def e4m3_value(byte_tensor):
    """E4M3 (fn: no infinities, 0x7F / 0xFF NaN) bytes to float64, through torch's own type."""
    return byte_tensor.contiguous().view(torch.float8_e4m3fn).to(torch.float32).to(F64)


def dequantize(wq, ws, global_scale, k):
    """W [n, k] in float64: e2m1(code) * e4m3(scale) * global, the low nibble the even k."""
    codes = torch.empty(wq.shape[0], k, dtype=torch.long, device=DEV)
    codes[:, 0::2] = (wq & 0xF).long()
    codes[:, 1::2] = (wq >> 4).long()
    scale = e4m3_value(ws).repeat_interleave(16, dim=1)
    return e2m1_table()[codes] * scale * global_scale


def random_weights(n, k, seed):
    """Random codes (all 16) and finite scale bytes of moderate size (2^-6 .. 2^3)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    wq = torch.randint(0, 256, (n, k // 2), device=DEV, generator=g, dtype=torch.int32).to(torch.uint8)
    ws = torch.randint(0x08, 0x58, (n, k // 16), device=DEV, generator=g, dtype=torch.int32).to(torch.uint8)
    return wq, ws


# Tolerance, per output element, from k (as for the dense kernels): the dequantized weights are
# exact in bf16 (times 2^-8, a power of two folded into the global scale), the tensor cores
# multiply exactly and add up to k products in f32, each addition off by at most 2^-23 of a
# partial sum bounded by S = sum_k |x W|; the sum is scaled by global * 2^8 (one more f32
# rounding, 2^-24 relative) and rounded once to bf16 (2^-9 relative). So
#     |out - ref| <= 2^-8 |ref| + 2 k 2^-23 S.
def tolerance(x, w64, ref):
    k = x.shape[1]
    absdot = x.double().abs() @ w64.abs().T
    return 2.0 ** -8 * ref.abs() + 2.0 * k * 2.0 ** -23 * absdot + 1e-30


def launch(name, x, wq, ws, gs, m, n, k, packed_dtype=False):
    """wq: uint8 [n, k / 2] (two E2M1 codes a byte), or viewed as torch's float4_e2m1fn_x2 with
    packed_dtype; ws: uint8 scale bytes, passed as float8_e4m3fn (the spec's fp8_e4m3)."""
    out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
    wq_arg = wq.view(torch.float4_e2m1fn_x2) if packed_dtype else wq
    outcome = getattr(w4a16_gemm, name)(x, wq_arg, ws.view(torch.float8_e4m3fn), gs, out, m, n, k)
    torch.cuda.synchronize()
    assert outcome.launched and bool(outcome), outcome.reason
    return out


GEMV_M = [1, 2, 7, 8, 9, 15, 16]


def built(name):
    """False for a kernel this target's build leaves out (its launcher reports it absent)."""
    return "absent" not in getattr(w4a16_gemm, f"plan_{name}")(m=1, n=64, k=256)["reason"]


# The few-row kernels: w4a16_gemv_rt1_128, w4a16_gemv_rt1 and w4a16_gemv_rt2 (hopper builds only;
# their shared memory exceeds gb10's) and w4a16_gemv. w4a16_gemv_rt1 takes weights of at least
# RT1_LEAST rows, w4a16_gemv_rt1_128 9-16 rows of x over weights of at least RT128_LEAST rows.
GEMVS = [name for name in ("w4a16_gemv_rt1_128", "w4a16_gemv_rt1", "w4a16_gemv_rt2", "w4a16_gemv") if built(name)]
RT1 = "w4a16_gemv_rt1"
RT128 = "w4a16_gemv_rt1_128"
SMS = torch.cuda.get_device_properties(0).multi_processor_count


# The fewest weight rows w4a16_gemv_rt1 takes: w4a16_gemv_rt2's grid (two CTAs a 64-row tile)
# must exceed the SM count.
RT1_LEAST = 64 * (SMS // 2) + 1
# ... and w4a16_gemv_rt1_128's 128-row tiles must number at least 4 (RT1_128_WAVES) times the SMs.
RT128_LEAST = 128 * (4 * SMS - 1) + 1


def rt1_rows(n, least=RT1_LEAST):
    """n moved up to at least `least`, keeping n % 256."""
    return n + 256 * -(-max(0, least - n) // 256)


def gemv_rows(name, n):
    """The weight rows a case of `name` takes: n, or moved up to the kernel's least."""
    return {RT1: rt1_rows(n), RT128: rt1_rows(n, RT128_LEAST)}.get(name, n)


# The fewest x rows each GEMV takes (w4a16_gemv_rt1_128 is for 9-16 rows; the others from 1).
LEAST_M = {RT128: 9}


def takes_m(name, m):
    return m >= LEAST_M.get(name, 1)
ALL_M = [1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 129, 2048]
# (n, k): n not a multiple of the tiles, k % 256 == 0 (every vector path), k % 32 == 16 (byte
# paths), k % 256 == 32 (w4a16_gemv_rt2's byte path, the others' vector paths), small odd
# shapes, and a long k (w4a16_gemv_rt2: 24 chunks a rank, a 400-byte scale window row).
SHAPES = [(4104, 4096), (4096, 4112), (33, 1024), (200, 48), (70, 2080), (96, 12288)]


def cases():
    for name, ms in [(g, [m for m in GEMV_M if takes_m(g, m)]) for g in GEMVS] + [("w4a16_gemm", ALL_M)]:
        for m in ms:
            for n, k in SHAPES:
                if m == 2048 and (n, k) != (4104, 4096):
                    continue
                if name in (RT1, RT128) and k > 8192:  # their k limit
                    continue
                yield name, m, gemv_rows(name, n), k


@pytest.mark.parametrize("name,m,n,k", list(cases()))
def test_random_against_reference(name, m, n, k):
    torch.manual_seed(m * 131 + n + k)
    x = nonzero_randn(m, k)
    wq, ws = random_weights(n, k, seed=n * 7 + k)
    gs = 0.0371
    out = launch(name, x, wq, ws, gs, m, n, k)
    assert not torch.isnan(out).any(), "some output element was not written"
    w64 = dequantize(wq, ws, gs, k)
    ref = x.double() @ w64.T
    bound((out.double() - ref).abs(), tolerance(x, w64, ref), f"{name} m={m} n={n} k={k}")
    again = launch(name, x, wq, ws, gs, m, n, k, packed_dtype=True)
    same_bits(out, again, f"{name} m={m} n={n} k={k}: a second run (float4_e2m1fn_x2 weights)")


def table_weights(n, k=32):
    """k = 32 (two scale groups) by default. Row n: every scale byte n % 256; code of k =
    (k + n // 256) % 16. Rows 0..255 put code c at k = c and c + 16 (the parity of c), rows
    256..511 at k = c - 1 mod 16 and c + 15 (the other parity): every code at every scale byte in
    both nibble positions."""
    rows = torch.arange(n, device=DEV)
    kk = torch.arange(k, device=DEV)
    codes = (kk[None, :] + (rows[:, None] // 256)) % 16
    wq = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8)
    ws = (rows % 256)[:, None].expand(n, k // 16).to(torch.uint8).contiguous()
    return wq, ws, codes


def expected_table(n, codes):
    """The exact weights from the format definitions (NaN rows where the scale byte is NaN)."""
    scale = e4m3_value((torch.arange(n, device=DEV) % 256).to(torch.uint8))
    return e2m1_table()[codes] * scale[:, None]


def check_table(out, want):
    """out[m, n] (bf16) must equal want[n, m] exactly, NaN where a NaN weight is in row n."""
    want = want.T
    nan_rows = torch.isnan(want).any(dim=0)
    want = torch.where(nan_rows[None, :], torch.full_like(want, float("nan")), want)
    assert torch.equal(torch.isnan(out), torch.isnan(want))
    ok = ~torch.isnan(want)
    assert torch.equal(out.double()[ok], want[ok]), "dequantized value differs from the table"
    identical(out.numel(), f"dequantized weights against the exact table ({out.shape[1]} rows)")


TABLE_CASES = [(g, gemv_rows(g, n)) for g in GEMVS for n in (512, 513)]


@pytest.mark.parametrize("name,n", TABLE_CASES)
def test_dequantization_table_gemv(name, n):
    """One-hot x rows read single weights: out[m, n] = W[n, k_m] exactly (global 1: every E2M1 x
    E4M3 product is a bf16 value). 16 rows per launch, so k = 0..15 and 16..31 in two."""
    wq, ws, codes = table_weights(n)
    want = expected_table(n, codes)
    assert int(torch.isnan(want).any(dim=1).sum()) == 2 * (n // 256)  # the 0x7F and 0xFF rows
    for half in range(2):
        x = torch.zeros(16, 32, device=DEV, dtype=BF16)
        x[torch.arange(16), torch.arange(16) + 16 * half] = 1
        out = launch(name, x, wq, ws, 1.0, 16, n, 32)
        check_table(out, want[:, 16 * half:16 * half + 16])


@pytest.mark.parametrize("name,n", TABLE_CASES)
def test_dequantization_table_gemv_fast_path(name, n):
    """The same table at k = 256 (k % 256 == 0, aligned pointers: the GEMVs' cp.async paths), 16
    one-hot x rows per launch, sixteen launches."""
    k = 256
    wq, ws, codes = table_weights(n, k)
    want = expected_table(n, codes)
    for part in range(k // 16):
        x = torch.zeros(16, k, device=DEV, dtype=BF16)
        x[torch.arange(16), torch.arange(16) + 16 * part] = 1
        out = launch(name, x, wq, ws, 1.0, 16, n, k)
        check_table(out, want[:, 16 * part:16 * part + 16])


@pytest.mark.parametrize("n", [512, 513])
def test_dequantization_table_gemm(n):
    wq, ws, codes = table_weights(n)
    want = expected_table(n, codes)
    x = torch.eye(32, device=DEV, dtype=BF16)
    out = launch("w4a16_gemm", x, wq, ws, 1.0, 32, n, 32)
    check_table(out, want)


def test_table_is_exact_in_bf16():
    """The premise of the exact checks: every finite E2M1 x E4M3 product is a bf16 value."""
    prods = e2m1_table()[:, None] * e4m3_value(torch.arange(256, device=DEV).to(torch.uint8))[None, :]
    fin = prods[torch.isfinite(prods)]
    assert torch.equal(fin.to(BF16).double(), fin)
    # and E4M3 subnormals are in the table: byte 0x01 is 2^-9
    assert e4m3_value(torch.tensor([1], dtype=torch.uint8, device=DEV)).item() == 2.0 ** -9


@pytest.mark.parametrize("name", GEMVS + ["w4a16_gemm"])
def test_misaligned_pointers(name):
    m, n, k = 70 if name == "w4a16_gemm" else max(5, LEAST_M.get(name, 1)), gemv_rows(name, 100), 256
    xb = nonzero_randn(m * k + 1)
    x = xb[1:].view(m, k)
    wq0, ws0 = random_weights(n, k, seed=3)
    qb = torch.empty(n * k // 2 + 1, dtype=torch.uint8, device=DEV)
    sb = torch.empty(n * k // 16 + 1, dtype=torch.uint8, device=DEV)
    qb[1:] = wq0.view(-1)
    sb[1:] = ws0.view(-1)
    wq, ws = qb[1:].view(n, k // 2), sb[1:].view(n, k // 16)
    out = launch(name, x, wq, ws, 0.5, m, n, k)
    w64 = dequantize(wq0, ws0, 0.5, k)
    ref = x.double() @ w64.T
    bound((out.double() - ref).abs(), tolerance(x, w64, ref), f"{name}: misaligned pointers")


@pytest.mark.parametrize("m", [1, 16])
def test_kernels_agree_on_lm_head(m):
    """Every kernel on the lm_head shape, each within the k-derived tolerance of the reference."""
    n, k = 151936, 4096
    x = nonzero_randn(m, k)
    wq, ws = random_weights(n, k, seed=11)
    w64 = dequantize(wq, ws, 0.02, k)
    ref = x.double() @ w64.T
    tol = tolerance(x, w64, ref)
    for name in [g for g in GEMVS if takes_m(g, m)] + ["w4a16_gemm"]:
        out = launch(name, x, wq, ws, 0.02, m, n, k)
        bound((out.double() - ref).abs(), tol, f"{name} on the lm_head, m={m}")


def test_k_not_multiple_of_16_not_launched():
    m, n, k = 9, 64, 4104  # 9 rows: within every GEMV's row clauses
    for name in GEMVS + ["w4a16_gemm"]:
        plan = getattr(w4a16_gemm, f"plan_{name}")(m=m, n=n, k=k)
        assert not plan["launched"] and clause_in(plan["reason"], "k % 16 == 0")


def test_gemv_rows_over_16_not_launched_and_fallback():
    m, n, k = 17, 96, 256
    for name in GEMVS:
        assert not getattr(w4a16_gemm, f"plan_{name}")(m=m, n=n, k=k)["launched"]
    x = nonzero_randn(m, k)
    wq, ws = random_weights(n, k, seed=5)
    out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
    outcome = w4a16_gemm.w4a16_linear(x, wq, ws.view(torch.float8_e4m3fn), 1.0, out, m, n, k)
    torch.cuda.synchronize()
    assert outcome.launched and (outcome.kernel or "").split(".")[-1] == "w4a16_gemm", outcome.kernel
    w64 = dequantize(wq, ws, 1.0, k)
    ref = x.double() @ w64.T
    bound((out.double() - ref).abs(), tolerance(x, w64, ref), "w4a16_linear m=17: w4a16_gemm")


def test_plans():
    p = w4a16_gemm.plan_w4a16_gemv(m=16, n=151936, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (1187, 1, 1) and tuple(p["block"]) == (256, 1, 1)
    assert p["shared_mem"] == 73728
    p = w4a16_gemm.plan_w4a16_gemm(m=129, n=4104, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (65, 3, 1)


@pytest.mark.skipif(not built(RT1), reason="w4a16_gemv_rt1 / rt2 are built for hopper only")
def test_stream_plans_and_chain():
    """w4a16_gemv_rt2: 2-CTA clusters over 64 rows; shared memory: the ring (x slots of 8 rows up
    to m = 8, of 16 above) and the scale window (64 rows x (a rank's chunks + 1) x 16 bytes).
    w4a16_gemv_rt1: one CTA a 64-row tile, the window over all of k; w4a16_gemv_rt1_128: one CTA
    a 128-row tile, x slots of 16 rows, the window over all of k. The chain takes rt1_128 for
    9-16 rows once its tiles number 4 times the SMs, rt1 once rt2's grid would exceed the SM
    count (k <= 8192), rt2 below, w4a16_gemv past rt2's k limit, w4a16_gemm past 16 rows."""
    p = w4a16_gemm.plan_w4a16_gemv_rt2(m=16, n=151936, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (2 * 2374, 1, 1)
    assert p["shared_mem"] == 131072 + 64 * (8 + 1) * 16
    p = w4a16_gemm.plan_w4a16_gemv_rt2(m=8, n=151936, k=12288)
    assert p["shared_mem"] == 98304 + 64 * (24 + 1) * 16
    p = w4a16_gemm.plan_w4a16_gemv_rt1(m=1, n=151936, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (2374, 1, 1) and p["shared_mem"] == 98304 + 64 * (16 + 1) * 16
    p = w4a16_gemm.plan_w4a16_gemv_rt1_128(m=16, n=151936, k=4096)
    assert p["launched"] and tuple(p["grid"]) == (1187, 1, 1) and p["shared_mem"] == 98304 + 128 * (16 + 1) * 16
    for m, n, k in [(8, 151936, 4096), (17, 151936, 4096), (16, RT128_LEAST - 1, 4096), (16, 151936, 8208)]:
        assert not w4a16_gemm.plan_w4a16_gemv_rt1_128(m=m, n=n, k=k)["launched"], (m, n, k)
    big = rt1_rows(64)
    for (m, n, k), want in {(1, 64, 4096): "w4a16_gemv_rt2", (16, 64, 4112): "w4a16_gemv_rt2",
                            (16, 64, 32784): "w4a16_gemv", (17, 64, 4096): "w4a16_gemm",
                            (16, big, 4096): "w4a16_gemv_rt1", (1, RT1_LEAST - 1, 4096): "w4a16_gemv_rt2",
                            (1, RT1_LEAST, 4096): "w4a16_gemv_rt1",
                            (9, RT128_LEAST, 4096): "w4a16_gemv_rt1_128",
                            (16, RT128_LEAST - 1, 4096): "w4a16_gemv_rt1",
                            (8, RT128_LEAST, 4096): "w4a16_gemv_rt1",
                            (8, big, 8208): "w4a16_gemv_rt2"}.items():
        x = nonzero_randn(m, k)
        wq, ws = random_weights(n, k, seed=k)
        out = torch.full((m, n), float("nan"), device=DEV, dtype=BF16)
        outcome = w4a16_gemm.w4a16_linear(x, wq, ws.view(torch.float8_e4m3fn), 0.5, out, m, n, k)
        torch.cuda.synchronize()
        assert outcome.launched and (outcome.kernel or "").split(".")[-1] == want, (m, n, k, outcome.kernel)
        w64 = dequantize(wq, ws, 0.5, k)
        ref = x.double() @ w64.T
        bound((out.double() - ref).abs(), tolerance(x, w64, ref), f"chain m={m} n={n} k={k}")


def test_packed_and_scale_types_are_checked():
    """wq counts E2M1 values (two a byte) and wscale is E4M3: short arrays are refused in
    elements and bytes, raw scale bytes are refused by dtype."""
    from kernelgen_ops import ArgumentError

    m, n, k = 1, 64, 128
    x = nonzero_randn(m, k)
    wq, ws = random_weights(n, k, seed=5)
    out = torch.empty((m, n), device=DEV, dtype=BF16)
    short = wq.reshape(-1)[:-1]
    with pytest.raises(ArgumentError, match=r"wq.*array has 8190 elements but the kernel accesses 8192 "
                                            r"\(of fp4_e2m1: 4095 bytes, 4096 needed\)"):
        w4a16_gemm.w4a16_gemv(x, short, ws.view(torch.float8_e4m3fn), 1.0, out, m, n, k)
    with pytest.raises(ArgumentError, match=r"wscale.*float8_e4m3fn"):
        w4a16_gemm.w4a16_gemv(x, wq, ws, 1.0, out, m, n, k)
