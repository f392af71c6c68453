"""GPU tests of the argument kinds of tests/fixtures/arrays: nullable pointers (a layer norm with
optional weight, mean and rstd), strided views checked by the memory they span, a non-const
pointer declared read_only, bool/f16/bf16/f64 scalars arriving exactly, float4 vectors with
their alignment, void* byte sizes and an array of device pointers. Every array reader is used:
torch tensors (the C++ reader and, for subclasses, the Python path), __cuda_array_interface__,
DLPack and integer pointers; outputs are compared with torch."""

from __future__ import annotations

import math
import shutil
from fractions import Fraction

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from kernelgen_ops import ArgumentError  # noqa: E402

TARGET = guards_build.current_target_or_skip()
FIXTURE = guards_build.REPO / "tests" / "fixtures" / "arrays"


def populate(root):
    shutil.copytree(FIXTURE, root, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("generated", "build", "bindings"))


@pytest.fixture(scope="module", name="m")
def built(tmp_path_factory):
    folder = guards_build.build(tmp_path_factory, TARGET, populate=populate, name="arrays")
    return guards_build.load(folder, "arrays")


def refused(call, kernel, argument, text):
    with pytest.raises(ArgumentError) as e:
        call()
    assert (e.value.kernel, e.value.argument) == (kernel, argument), str(e.value)
    assert text in str(e.value), str(e.value)
    return e.value


class Cai:
    """A producer with only __cuda_array_interface__ (optionally read-only, or other strides)."""

    def __init__(self, t, read_only=False, strides=None, shape=None, offset_items=0):
        cai = dict(t.__cuda_array_interface__)
        ptr, _ = cai["data"]
        cai["data"] = (ptr + offset_items * t.element_size(), read_only)
        if strides is not None:
            cai["strides"] = strides
        if shape is not None:
            cai["shape"] = shape
        self.__cuda_array_interface__ = cai
        self.keep = t


class DL:
    """A producer with only the DLPack protocol."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class Sub(torch.Tensor):
    """A tensor subclass: the C++ reader declines it, so the Python path reads it."""


# ---- nullable pointers: a layer norm with optional weight, mean and rstd


def _layer_norm_ref(x, weight, eps):
    mean = x.double().mean(1)
    var = ((x.double() - mean[:, None]) ** 2).mean(1)
    rstd = torch.rsqrt(var + eps)
    y = (x.double() - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * weight.double()
    return y.float(), mean.float(), rstd.float()


ROWS, COLS, EPS = 4, 1024, 1e-5


def _ln_inputs():
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(ROWS, COLS, device="cuda", generator=g) * 2 + 0.5
    w = torch.rand(COLS, device="cuda", generator=g) + 0.5
    return x, w


def test_layer_norm_with_every_optional_argument(m):
    x, w = _ln_inputs()
    y = torch.full_like(x, math.nan)
    mean = torch.full((ROWS,), math.nan, device="cuda")
    rstd = torch.full((ROWS,), math.nan, device="cuda")
    assert m.layer_norm(x, w, y, mean, rstd, ROWS, COLS, EPS).launched
    torch.cuda.synchronize()
    ry, rmean, rrstd = _layer_norm_ref(x, w, EPS)
    torch.testing.assert_close(y, ry, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean, rmean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, rrstd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("null", [None, 0])
def test_layer_norm_with_null_optional_arguments(m, null):
    x, _ = _ln_inputs()
    y = torch.full_like(x, math.nan)
    assert m.layer_norm(x, null, y, null, null, ROWS, COLS, EPS).launched
    torch.cuda.synchronize()
    ry, _, _ = _layer_norm_ref(x, None, EPS)
    torch.testing.assert_close(y, ry, rtol=1e-4, atol=1e-4)
    # mean given, weight and rstd null, by keyword
    mean = torch.full((ROWS,), math.nan, device="cuda")
    assert m.layer_norm(x=x, weight=null, y=y, mean=mean, rstd=null, rows=ROWS, cols=COLS, eps=EPS).launched
    torch.cuda.synchronize()
    torch.testing.assert_close(mean, x.double().mean(1).float(), rtol=1e-5, atol=1e-5)


def test_null_is_refused_where_not_declared_nullable(m):
    x, w = _ln_inputs()
    y = torch.empty_like(x)
    refused(lambda: m.layer_norm(None, w, y, None, None, ROWS, COLS, EPS), "layer_norm", "x",
            "None is not a device pointer; the argument is not declared nullable")
    refused(lambda: m.layer_norm(x, w, 0, None, None, ROWS, COLS, EPS), "layer_norm", "y",
            "null device pointer (0); the argument is not declared nullable")
    refused(lambda: m.byte_copy(None, torch.empty(16, device="cuda", dtype=torch.uint8), 16), "byte_copy", "src",
            "not declared nullable")
    # a nullable argument that is given is checked as usual
    refused(lambda: m.layer_norm(x, w, y, torch.empty(ROWS - 1, device="cuda"), None, ROWS, COLS, EPS),
            "layer_norm", "mean", f"array has {ROWS - 1} elements but the kernel accesses {ROWS}")
    refused(lambda: m.layer_norm(x, w.to(torch.float16), y, None, None, ROWS, COLS, EPS), "layer_norm", "weight",
            "expected dtype torch.float32")


# ---- strided views


def _wide():
    g = torch.Generator(device="cuda").manual_seed(3)
    return torch.randint(-8, 8, (8, 64), device="cuda", generator=g).float()  # exact sums


def _views(t):
    return {"torch": t, "subclass": t.as_subclass(Sub), "cai": Cai(t), "dlpack": DL(t)}


@pytest.mark.parametrize("reader", ["torch", "subclass", "cai", "dlpack"])
def test_row_sum_over_a_strided_view(m, reader):
    big = _wide()
    view = big[:, 16:32]  # 8 rows of 16 columns, 64 floats apart: spans 7 * 64 + 16 elements
    assert not view.is_contiguous()
    out = torch.full((8,), math.nan, device="cuda")
    assert m.row_sum(_views(view)[reader], out, 8, 16, 64).launched
    torch.cuda.synchronize()
    assert torch.equal(out, view.sum(1))


@pytest.mark.parametrize("reader", ["torch", "subclass", "cai", "dlpack"])
def test_a_view_that_spans_too_little_is_refused(m, reader):
    big = _wide()
    short = big[:7, 16:32]  # spans 6 * 64 + 16 = 400 elements; 8 rows need 464
    out = torch.empty(8, device="cuda")
    refused(lambda: m.row_sum(_views(short)[reader], out, 8, 16, 64), "row_sum", "x",
            "array spans 400 elements but the kernel accesses 464")


def test_strided_view_edge_cases(m):
    big = _wide()
    out = torch.empty(8, device="cuda")
    # a contiguous array is counted by its elements
    refused(lambda: m.row_sum(torch.zeros(463, device="cuda"), out, 8, 16, 64), "row_sum", "x",
            "array spans 463 elements but the kernel accesses 464")
    flat = big.reshape(-1)[16:16 + 464]
    assert m.row_sum(flat, out, 8, 16, 64).launched
    torch.cuda.synchronize()
    assert torch.equal(out, big[:, 16:32].sum(1))
    # a negative stride (only __cuda_array_interface__ can say one)
    neg = Cai(big, strides=(-64 * 4, 4), shape=(8, 64), offset_items=7 * 64)
    refused(lambda: m.row_sum(neg, out, 8, 16, 64), "row_sum", "x", "negative stride")
    # contiguous: true still refuses strided views
    x, w = _ln_inputs()
    wide = torch.zeros(ROWS, 2 * COLS, device="cuda")[:, :COLS]
    refused(lambda: m.layer_norm(wide, w, torch.empty_like(x), None, None, ROWS, COLS, EPS), "layer_norm", "x",
            "not contiguous")


# ---- read_only on a non-const pointer the kernel only reads


def test_read_only_arrays_are_accepted_for_read_only_arguments(m):
    table = torch.arange(32 * 8, device="cuda", dtype=torch.float32).reshape(32, 8)
    idx = torch.tensor([3, 0, 31, 7], device="cuda", dtype=torch.int32)
    out = torch.full((4, 8), math.nan, device="cuda")
    assert m.gather(Cai(table, read_only=True), idx, out, 4, 8).launched
    torch.cuda.synchronize()
    assert torch.equal(out, table[idx.long()])
    out2 = torch.full((4, 8), math.nan, device="cuda")
    assert m.gather(table, Cai(idx, read_only=True), out2, 4, 8).launched  # const i32*: as before
    torch.cuda.synchronize()
    assert torch.equal(out2, table[idx.long()])
    refused(lambda: m.gather(table, idx, Cai(out, read_only=True), 4, 8), "gather", "out",
            "read-only but the kernel writes it")


# ---- scalars: bool, f16, bf16, f64, f32


def _round_16(v: float, mant: int) -> float:
    """v rounded once, to nearest even, to a 16-bit float with mant fraction bits (exact, on
    rationals): what the binding documents for f16 (10) and bf16 (7)."""
    exp_bits = 15 - mant
    bias = (1 << (exp_bits - 1)) - 1
    if v == 0 or math.isinf(v) or math.isnan(v):
        return v
    x = Fraction(abs(v))
    e = math.frexp(abs(v))[1] - 1
    q_exp = max(e, 1 - bias) - mant
    r = round(x / Fraction(2) ** q_exp)  # round() of a Fraction: half to even
    value = r * Fraction(2) ** q_exp
    largest = (2 - Fraction(2) ** -mant) * Fraction(2) ** bias
    out = math.inf if value > largest else float(value)
    return math.copysign(out, v)


HALF_VALUES = [1.0, 1 / 3, -2.5, 65504.0, 65519.0, math.inf, -math.inf, 2.0 ** -24, 2.0 ** -25 * 1.5,
               1 + 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -40, 0.1, -0.0]
BF16_VALUES = [1.0, 1 / 3, -2.5, 3.0e38, 1 + 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -40, 1e-40, 0.1]


def test_the_reference_rounding_is_round_once_to_nearest_even():
    assert _round_16(1 + 2.0 ** -11 + 2.0 ** -40, 10) == 1 + 2.0 ** -10  # above the tie: up
    assert _round_16(1 + 2.0 ** -11, 10) == 1.0  # the tie: to even
    assert _round_16(65520.0, 10) == math.inf and _round_16(65504.0, 10) == 65504.0
    assert _round_16(1 + 2.0 ** -8 + 2.0 ** -40, 7) == 1 + 2.0 ** -7


def _run_scalars(m, flag, h, b, d, f, reps=3):
    out = torch.full((4,), math.nan, device="cuda")
    out64 = torch.full((2,), math.nan, device="cuda", dtype=torch.float64)
    outcome = m.scalars(out, out64, flag, h, b, d, f, reps)
    torch.cuda.synchronize()
    return outcome, out.tolist(), out64.tolist()


@pytest.mark.parametrize("h", HALF_VALUES)
def test_f16_scalars_arrive_rounded_once(m, h):
    outcome, out, _ = _run_scalars(m, True, h, 1.0, 0.0, 0.0)
    assert outcome.launched
    assert out[0] == _round_16(h, 10) and math.copysign(1, out[0]) == math.copysign(1, _round_16(h, 10))


@pytest.mark.parametrize("h", [65520.0, 1e5, -1e5])
def test_f16_scalars_that_round_to_infinity_are_refused(m, h):
    """A finite value beyond f16's range (it would round to inf) is an ArgumentError naming it."""
    with pytest.raises(ArgumentError, match=rf"argument 'h': {h!r} is out of range for f16 \(finite values up to "
                       "65504"):
        _run_scalars(m, True, h, 1.0, 0.0, 0.0)


@pytest.mark.parametrize("b", BF16_VALUES)
def test_bf16_scalars_arrive_rounded_once(m, b):
    outcome, out, _ = _run_scalars(m, True, 1.0, b, 0.0, 0.0)
    assert outcome.launched
    assert out[1] == _round_16(b, 7)


def test_f16_nan_stays_nan_and_every_scalar_reaches_its_output(m):
    _, out, _ = _run_scalars(m, True, math.nan, math.nan, 0.0, 0.0)
    assert math.isnan(out[0]) and math.isnan(out[1])
    d = 0.1 + 2.0 ** -50  # not a float32: arrives as the exact double
    f = 1 / 3
    _, out, out64 = _run_scalars(m, True, 2.0, 3.0, d, f, reps=3)
    assert out == [2.0, 3.0, torch.tensor(f, dtype=torch.float32).item(), 1.0]
    assert out64 == [d, d * 3]
    _, out, out64 = _run_scalars(m, False, 2.0, 3.0, d, f, reps=5)
    assert out[2:] == [-torch.tensor(f, dtype=torch.float32).item(), 0.0] and out64 == [d, d * 5]
    for flag, want in ((1, 1.0), (0, 0.0)):  # the integers 0 and 1 are booleans too
        _, out, _ = _run_scalars(m, flag, 1.0, 1.0, 0.0, 1.0)
        assert out[3] == want


def test_bool_in_clauses_and_plans(m):
    assert m.scalars.plan(flag=True, reps=0)["launched"]
    plan = m.scalars.plan(flag=False, reps=0)
    assert not plan["launched"] and "flag" in plan["reason"]
    outcome, out, _ = _run_scalars(m, False, 1.0, 1.0, 0.0, 1.0, reps=0)
    assert not outcome.launched and "flag" in outcome.reason and math.isnan(out[0])
    out = torch.empty(4, device="cuda")
    out64 = torch.empty(2, device="cuda", dtype=torch.float64)
    refused(lambda: m.scalars(out, out64, 2, 1.0, 1.0, 1.0, 1.0, 1), "scalars", "flag", "expected a bool")
    refused(lambda: m.scalars(out, out64, 1.0, 1.0, 1.0, 1.0, 1.0, 1), "scalars", "flag", "expected a bool")
    refused(lambda: m.scalars(out, out64, True, "x", 1.0, 1.0, 1.0, 1), "scalars", "h", "expected a number")


# ---- float4 vectors


def test_float4_scale(m):
    x = torch.randn(4096, device="cuda")
    y = torch.full_like(x, math.nan)
    assert m.scale4(x, y, 1.5, 1024).launched
    torch.cuda.synchronize()
    assert torch.equal(y, x * 1.5)
    # a (4096,) float32 array holds 1024 float4s: 1025 is too many
    refused(lambda: m.scale4(x, y, 1.5, 1025), "scale4", "x", "array has 1024 elements but the kernel accesses 1025")


@pytest.mark.parametrize("reader", ["torch", "subclass", "cai", "dlpack"])
def test_misaligned_or_partial_vector_arrays_are_refused(m, reader):
    base = torch.zeros(4100, device="cuda")
    y = torch.empty(4096, device="cuda")
    shifted = base[1:4097]  # 4 bytes past a 16-byte boundary
    refused(lambda: m.scale4(_views(shifted)[reader], y, 1.0, 1024), "scale4", "x", "is not 16-byte aligned")
    partial = base[:4094]  # 4094 floats: not whole float4s
    refused(lambda: m.scale4(_views(partial)[reader], y, 1.0, 1), "scale4", "x", "not a multiple of the 4")


def test_misaligned_integer_pointers_are_refused(m):
    x = torch.zeros(4100, device="cuda")
    y = torch.empty(4096, device="cuda")
    refused(lambda: m.scale4(x.data_ptr() + 4, y, 1.0, 1024), "scale4", "x", "is not 16-byte aligned")
    assert m.scale4(x.data_ptr() + 16, y.data_ptr(), 2.0, 1024).launched
    torch.cuda.synchronize()
    assert torch.equal(y, x[4:4100] * 2.0)


# ---- void*: any array, counted in bytes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.uint8, torch.int64])
def test_void_byte_copy_takes_any_dtype(m, dtype):
    src = torch.randint(0, 255, (4096,), device="cuda", dtype=torch.uint8).view(dtype)
    dst = torch.zeros(4096, device="cuda", dtype=torch.uint8)
    assert m.byte_copy(src, dst, 4096).launched
    torch.cuda.synchronize()
    assert torch.equal(dst, src.view(torch.uint8))
    src_cai = Cai(src.view(torch.int16) if dtype == torch.bfloat16 else src)  # no bf16 typestr in torch's CAI
    dst2 = torch.zeros(4096, device="cuda", dtype=torch.uint8)
    assert m.byte_copy(src_cai, DL(dst2), 4096).launched
    torch.cuda.synchronize()
    assert torch.equal(dst2, dst)


def test_void_sizes_are_bytes(m):
    src = torch.zeros(1024, device="cuda")  # 4096 bytes
    refused(lambda: m.byte_copy(src, torch.zeros(4095, device="cuda", dtype=torch.uint8), 4096), "byte_copy", "dst",
            "array has 4095 elements but the kernel accesses 4096")
    refused(lambda: m.byte_copy(src, torch.zeros(511, device="cuda", dtype=torch.float64), 4096), "byte_copy", "dst",
            "array has 4088 elements but the kernel accesses 4096")
    assert m.byte_copy(src, torch.zeros(512, device="cuda", dtype=torch.float64), 4096).launched


# ---- an array of device pointers


def test_sum_rows_through_an_array_of_device_pointers(m):
    rows = [torch.randint(-8, 8, (256,), device="cuda").float() for _ in range(3)]
    ptrs = torch.tensor([r.data_ptr() for r in rows], device="cuda", dtype=torch.int64)
    out = torch.full((256,), math.nan, device="cuda")
    assert m.sum_rows(ptrs, out, 3, 256).launched
    torch.cuda.synchronize()
    assert torch.equal(out, rows[0] + rows[1] + rows[2])
    out2 = torch.full((256,), math.nan, device="cuda")
    assert m.sum_rows(Cai(ptrs, read_only=True), out2, 2, 256).launched  # const f32* const*: read-only ok
    torch.cuda.synchronize()
    assert torch.equal(out2, rows[0] + rows[1])


def test_pointer_arrays_are_checked(m):
    out = torch.empty(256, device="cuda")
    ptrs = torch.zeros(3, device="cuda", dtype=torch.int64)
    refused(lambda: m.sum_rows(ptrs[:2], out, 3, 256), "sum_rows", "rows",
            "array has 2 elements but the kernel accesses 3")
    refused(lambda: m.sum_rows(ptrs.float(), out, 3, 256), "sum_rows", "rows", "expected dtype torch.int64")
    refused(lambda: m.sum_rows(ptrs.cpu(), out, 3, 256), "sum_rows", "rows", "CPU memory")


def test_bf16x2_add_and_its_4_byte_alignment(m):
    a = torch.randint(-100, 100, (1024,), device="cuda").to(torch.bfloat16)  # exact sums
    b = torch.randint(-100, 100, (1024,), device="cuda").to(torch.bfloat16)
    out = torch.zeros_like(a)
    assert m.add_bf16x2(a, b, out, 512).launched
    torch.cuda.synchronize()
    assert torch.equal(out, a + b)
    base = torch.zeros(1026, device="cuda", dtype=torch.bfloat16)
    refused(lambda: m.add_bf16x2(base[1:1025], b, out, 512), "add_bf16x2", "a", "is not 4-byte aligned")
    refused(lambda: m.add_bf16x2(a[:1023], b, out, 1), "add_bf16x2", "a", "not a multiple of the 2")


# ---------------------------------------------------------------- device scalars


def test_device_scalar_is_read_on_the_device_in_every_graph_replay(m):
    """fill_prefix reads count from device memory when it runs: one captured graph serves every
    value written there later, including values beyond the host bound and negative ones."""
    cap = 1000
    out = torch.full((cap,), -1.0, device="cuda")
    count = torch.tensor([10], dtype=torch.int32, device="cuda")
    assert m.fill_prefix(out, count, 2.5, cap).launched  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outcome = m.fill_prefix(out, count, 2.5, cap, stream=torch.cuda.current_stream())
        assert outcome.launched, outcome.reason
    index = torch.arange(cap, device="cuda")
    for n in (0, 1, 17, 999, 1000, 5000, -3, 333):
        count.fill_(n)
        out.fill_(-1.0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, torch.where(index < n, 2.5, 0.0)), n


def test_device_scalar_must_be_one_device_element_of_its_type(m):
    out = torch.zeros(64, device="cuda")
    for bad, text in ((torch.zeros(2, dtype=torch.int32, device="cuda"), "this array has 2 elements"),
                      (torch.zeros(0, dtype=torch.int32, device="cuda"), "this array has 0 elements"),
                      (torch.zeros(1, dtype=torch.int64, device="cuda"), "expected dtype torch.int32"),
                      (torch.zeros(1, dtype=torch.int32), "CPU memory")):
        refused(lambda bad=bad: m.fill_prefix(out, bad, 1.0, 64), "fill_prefix", "count", text)
    refused(lambda: m.fill_prefix(out, None, 1.0, 64), "fill_prefix", "count", "not declared nullable")
    ok = torch.tensor([5], dtype=torch.int32, device="cuda")
    assert m.fill_prefix(out, Cai(ok), 1.0, 64).launched  # any producer of one element
    torch.cuda.synchronize()
    assert float(out.sum()) == 5.0


def test_device_scalar_in_host_memory_is_refused_by_the_launcher(m):
    """A raw pointer is not size-checked in Python; the launcher itself refuses host memory, an
    ArgumentError naming the argument as the binding's own checks do."""
    import ctypes

    from kernelgen_ops import ArgumentError

    out = torch.zeros(64, device="cuda")
    host = (ctypes.c_int32 * 1)(5)
    with pytest.raises(ArgumentError) as e:
        m.fill_prefix(out, ctypes.addressof(host), 1.0, 64)
    assert "fill_prefix: argument 'count': a device scalar must point to one element in device memory" in str(
        e.value), str(e.value)
    assert e.value.argument == "count"
    ok = torch.tensor([3], dtype=torch.int32, device="cuda")
    assert m.fill_prefix(out, ok.data_ptr(), 1.0, 64).launched  # an int pointer to device memory
    torch.cuda.synchronize()
    assert float(out.sum()) == 3.0


# ---------------------------------------------------------------- integer spellings


def test_a_kernel_spelling_its_integers_long_long_gets_the_values(m):
    """spelled_ints's spec says i64 / u64 pointers and scalars; the kernel takes long long and
    unsigned long long: the launcher passes the arrays as the kernel's types, the values intact."""
    n = 1000
    x = torch.arange(n, dtype=torch.int64, device="cuda") * (1 << 40) - (1 << 50)
    out = torch.zeros(n, dtype=torch.uint64, device="cuda")
    count = torch.tensor([700], dtype=torch.int64, device="cuda")
    bias = -(1 << 45) + 7
    assert m.spelled_ints(x, out, count, bias, n).launched
    torch.cuda.synchronize()
    got = out.cpu().view(torch.int64)  # the same bits, read as signed
    want = torch.where(torch.arange(n) < 700, x.cpu() + bias, 0)
    assert torch.equal(got, want)


def test_narrow_integer_scalars_arrive_intact(m):
    """narrow_ints takes unsigned char, signed char, unsigned short and short: the spec's u8, i8,
    u16 and i16 reach it with their values, the extremes included."""
    n = 1000
    x = torch.arange(n, dtype=torch.int32, device="cuda") - 500
    for flag, scale8, shift in ((0, -128, -32768), (255, 127, 32767), (1, -3, -200)):
        out = torch.full((n,), -7, dtype=torch.int32, device="cuda")
        assert m.narrow_ints(x, out, flag, scale8, n, shift).launched
        torch.cuda.synchronize()
        want = (x.cpu().long() + shift) * scale8 + (1000 if flag else 0)
        assert torch.equal(out.cpu().long(), want.to(torch.int32).long()), (flag, scale8, shift)
    out = torch.full((n,), -7, dtype=torch.int32, device="cuda")
    assert m.narrow_ints(x, out, 1, 2, 999, 0).launched  # n = 999: the last element untouched
    torch.cuda.synchronize()
    assert out[-1].item() == -7 and out[-2].item() == 2 * 498 + 1000


def test_overloaded_kernels_each_launch_their_overload(m):
    """add_value has an f32 and an f64 overload (the f64 one adds twice v, cooperatively): each
    launcher runs its own."""
    x32 = torch.zeros(1000, device="cuda")
    x64 = torch.zeros(1000, device="cuda", dtype=torch.float64)
    assert m.add_value_f32(x32, 999, 1.5).launched
    assert m.add_value_f64(x64, 999, 1.25).launched
    torch.cuda.synchronize()
    assert torch.all(x32[:999] == 1.5) and x32[999].item() == 0
    assert torch.all(x64[:999] == 2.5) and x64[999].item() == 0
    # the chain over both: picked by x's dtype, v narrowed to f32 for the f32 member
    assert m.add_value_any(x32, 1000, 0.1).kernel == "add_value_f32"
    assert m.add_value_any(x64, 1000, 0.1).kernel == "add_value_f64"
    torch.cuda.synchronize()
    assert x32[0].item() == torch.tensor(1.5, dtype=torch.float32).add(torch.tensor(0.1, dtype=torch.float32)).item()
    assert x64[0].item() == 2.5 + 0.2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_a_scalar_of_the_element_type_follows_the_arrays(m, dtype):
    """axpy's alpha is '{T}': the dispatcher picks the instance by the arrays' dtype and passes
    alpha converted to that type; the result is alpha x + y within the element type's rounding."""
    n = 1000
    x = torch.linspace(-4, 4, n, device="cuda").to(dtype)
    y = torch.linspace(1, 2, n, device="cuda").to(dtype)
    alpha = torch.tensor(1 / 3, dtype=dtype).item()  # 1/3 rounded once to the element type
    want = (torch.tensor(alpha, dtype=torch.float32).double() * x.float().double() + y.float().double())
    outcome = m.axpy(n, 1 / 3, x, y)
    assert outcome.launched and outcome.kernel == "axpy_" + {torch.float32: "f32", torch.float16: "f16",
                                                             torch.bfloat16: "bf16", torch.float64: "f64"}[dtype]
    torch.cuda.synchronize()
    # the kernel computes in float (one FMA) and stores T: within half an ulp of T, or of float for f32/f64
    ulp = {torch.float32: 2 ** -23, torch.float16: 2 ** -10, torch.bfloat16: 2 ** -7, torch.float64: 2 ** -23}[dtype]
    torch.testing.assert_close(y.double(), want, rtol=ulp, atol=1e-6)


def test_more_vector_element_types(m):
    """u32x4 (uint4), i32x2 (int2) and u8x4 (uchar4) take arrays of their lane type, n vectors."""
    n = 1000
    a = torch.randint(-2**31, 2**31 - 1, (n, 4), dtype=torch.int64).to(torch.int32).view(torch.uint32).cuda()
    out = torch.zeros((n, 4), dtype=torch.uint32, device="cuda")
    p = torch.randint(-1000, 1000, (n, 2), dtype=torch.int32, device="cuda")
    sums = torch.zeros(n, dtype=torch.int32, device="cuda")
    px = torch.randint(0, 256, (n, 4), dtype=torch.uint8, device="cuda")
    luma = torch.zeros(n, dtype=torch.uint32, device="cuda")
    assert m.vec_mix(a, out, p, sums, px, luma, n).launched
    torch.cuda.synchronize()
    a64, out64 = a.cpu().view(torch.int32).long() & 0xffffffff, out.cpu().view(torch.int32).long() & 0xffffffff
    assert torch.equal(out64[:, :3], a64[:, [3, 2, 1]]) and torch.equal(out64[:, 3], a64[:, 0] ^ 0xffffffff)
    assert torch.equal(sums.cpu(), p.cpu().sum(1).to(torch.int32))
    assert torch.equal(luma.cpu().long(), px.cpu().long().sum(1))
    shifted = torch.zeros(4 * n + 4, dtype=torch.uint32, device="cuda")[1:4 * n + 1]  # 4 bytes past 16
    with pytest.raises(ArgumentError, match="vec_mix"):
        m.vec_mix(shifted, out, p, sums, px, luma, n)


def test_bool_masks(m):
    """bool*: torch bool tensors reach the kernel as bool; uint8 tensors are refused."""
    n = 5000
    mask = torch.rand(n, device="cuda") < 0.3
    count = torch.zeros(1, dtype=torch.int32, device="cuda").view(torch.uint32)
    assert m.mask_count(mask, count, n).launched
    torch.cuda.synchronize()
    assert int(count.view(torch.int32).item()) == int(mask.sum().item())
    with pytest.raises(ArgumentError, match="mask_count"):
        m.mask_count(mask.to(torch.uint8), count, n)


def test_float3_points(m):
    """f32x3*: a float tensor of n x 3 reaches the kernel as n float3 points."""
    n = 1000
    pts = torch.randn(n, 3, device="cuda")
    norms = torch.full((n,), float("nan"), device="cuda")
    assert m.point_norms(pts, norms, n).launched
    torch.cuda.synchronize()
    torch.testing.assert_close(norms, pts.norm(dim=1), rtol=1e-6, atol=1e-6)
    # a view starting one float on (4-byte aligned) is a valid float3 array
    flat = torch.randn(3 * n + 1, device="cuda")
    assert m.point_norms(flat[1:], norms, n).launched
    torch.cuda.synchronize()
    torch.testing.assert_close(norms, flat[1:].view(n, 3).norm(dim=1), rtol=1e-6, atol=1e-6)


def test_void_pointers_reach_a_kernel_taking_its_own_types(m):
    """particle_com takes const Particle* and float3*; the spec says void*: any array, counted in
    bytes, passed as the kernel's pointer types."""
    n = 100
    ps = torch.rand((n, 4), device="cuda") + 0.5  # pos x, y, z, mass
    out = torch.full((3,), float("nan"), device="cuda")
    assert m.particle_com(ps, out, n).launched
    torch.cuda.synchronize()
    want = (ps[:, :3].double() * ps[:, 3:].double()).sum(0) / ps[:, 3].double().sum()
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ArgumentError, match="particle_com"):
        m.particle_com(ps[:50], out, n)  # 800 bytes, 1600 needed


def test_an_enum_parameter_gets_the_integer(m):
    """apply_act's kernel takes `enum class Act : int32_t`; the spec says i32 and the launcher passes
    the value as the enum. Values outside the spec's range are refused by its `requires`."""
    base = torch.linspace(-3, 3, 1000, device="cuda")
    for act, want in ((0, base), (1, -base), (2, 2 * base)):
        x = base.clone()
        assert m.apply_act(x, act, 1000).launched
        torch.cuda.synchronize()
        assert torch.equal(x, want), act
    refused(lambda: m.apply_act(base.clone(), 3, 1000), "apply_act", "act", "act <= 2")
