"""GPU tests of the Python bindings' argument checks (src/kernelgen/runtime/src/py_*.cpp),
through the `typed` kernel of the guards fixture project (tests/fixtures/guards): one argument
of every scalar type and six pointers of different element types, each sized by `n`.

Every rejected case asserts the exact exception type and that the message names the kernel
and the argument; every accepted case launches and checks what the GPU wrote.
"""

from __future__ import annotations

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import kernelgen_ops  # noqa: E402
from kernelgen_ops import ArgumentError  # noqa: E402

try:
    import numpy as np
except ImportError:  # only the numpy cases need it
    np = None

TARGET = guards_build.current_target_or_skip()

N = 64
PTRS = ("x", "h", "f", "s32", "s64", "b")
WRITABLE = ("h", "f", "s32", "s64", "b")
DTYPE = {
    "x": torch.bfloat16, "h": torch.float16, "f": torch.float32,
    "s32": torch.int32, "s64": torch.int64, "b": torch.uint8,
}
TYPESTR = {"x": "<V2", "h": "<f2", "f": "<f4", "s32": "<i4", "s64": "<i8", "b": "|u1"}
SCALARS = {"n": N, "a_u32": 3, "a_i32": -5, "a_u64": 7, "a_i64": -9, "a_f32": 0.25}
SPELLING = {"n": "u32", "a_u32": "u32", "a_i32": "i32", "a_u64": "u64", "a_i64": "i64"}
RANGE = {
    "n": (0, 2**32 - 1), "a_u32": (0, 2**32 - 1), "a_i32": (-(2**31), 2**31 - 1),
    "a_u64": (0, 2**64 - 1), "a_i64": (-(2**63), 2**63 - 1),
}
ARG_ORDER = ("x", "h", "f", "s32", "s64", "b", "n", "a_u32", "a_i32", "a_u64", "a_i64", "a_f32")

@pytest.fixture(scope="module")
def g(tmp_path_factory):
    return guards_build.build_and_load(tmp_path_factory, TARGET)


# ---------------------------------------------------------------- helpers


def arrays(n: int = N, device: str = "cuda") -> dict:
    x = (torch.arange(n, device=device, dtype=torch.float32) * 0.5 - 3.0).to(torch.bfloat16)
    return {
        "x": x,
        "h": torch.full((n,), float("nan"), device=device, dtype=torch.float16),
        "f": torch.full((n,), float("nan"), device=device, dtype=torch.float32),
        "s32": torch.full((n,), -7, device=device, dtype=torch.int32),
        "s64": torch.full((n,), -7, device=device, dtype=torch.int64),
        "b": torch.full((n,), 0xAA, device=device, dtype=torch.uint8),
    }


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def check(arrs: dict, **scalars) -> None:
    """What typed_kernel must have written into the first n elements of each output."""
    s = {**SCALARS, **scalars}
    n = int(s["n"])
    torch.cuda.synchronize()
    xf = arrs["x"][:n].float()
    same = {"rtol": 0, "atol": 0, "equal_nan": True}
    torch.testing.assert_close(arrs["h"][:n], (2.0 * xf).half(), **same)
    a_f32 = torch.tensor(float(s["a_f32"]), dtype=torch.float32, device=xf.device)
    torch.testing.assert_close(arrs["f"][:n], xf + a_f32, **same)
    base32 = int(s["a_i32"]) + int(s["a_u32"])
    base64 = int(s["a_i64"]) + int(s["a_u64"])
    assert arrs["s32"][:n].tolist() == [_wrap(base32 + i, 32) for i in range(n)]
    assert arrs["s64"][:n].tolist() == [_wrap(base64 + i, 64) for i in range(n)]
    assert arrs["b"][:n].tolist() == [(int(s["a_u32"]) + i) & 0xFF for i in range(n)]


def launch(g, arrs: dict, ptrs: dict | None = None, **scalars):
    """Calls typed by keyword: ptrs replaces some of the arrays (wrappers, ints, bad values)."""
    kw = {**arrs, **(ptrs or {}), **SCALARS, **scalars}
    return g.typed(**kw)


def launch_ok(g, arrs: dict, ptrs: dict | None = None, **scalars) -> None:
    outcome = launch(g, arrs, ptrs, **scalars)
    assert outcome.launched and bool(outcome), outcome.reason
    assert outcome.kernel == "typed" and outcome.module == "guards"
    check(arrs, **scalars)


def arg_error(call, arg: str, *fragments: str, kernel: str = "typed") -> str:
    with pytest.raises(ArgumentError) as info:
        call()
    assert type(info.value) is ArgumentError
    msg = str(info.value)
    assert msg.startswith(f"{kernel}: argument '{arg}': "), msg
    for frag in fragments:
        assert frag in msg, msg
    return msg


def type_error(call, *fragments: str) -> str:
    with pytest.raises(TypeError) as info:
        call()
    assert type(info.value) is TypeError, repr(info.value)  # not ArgumentError
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, msg
    return msg


class CAI:
    """An object exposing only __cuda_array_interface__ (v3) over a torch tensor's memory."""

    _MISSING = object()

    def __init__(self, t, *, typestr=None, shape=None, strides=_MISSING, readonly=False, stream=_MISSING, ptr=None):
        self.t = t  # keeps the memory alive
        iface = {
            "shape": tuple(t.shape) if shape is None else shape,
            "typestr": typestr or TYPESTR_OF[t.dtype],
            "data": (t.data_ptr() if ptr is None else ptr, readonly),
            "version": 3,
        }
        if strides is CAI._MISSING:
            iface["strides"] = None if t.is_contiguous() else tuple(s * t.element_size() for s in t.stride())
        else:
            iface["strides"] = strides
        if stream is not CAI._MISSING:
            iface["stream"] = stream
        self._iface = iface

    @property
    def __cuda_array_interface__(self):
        return self._iface


TYPESTR_OF = {DTYPE[k]: v for k, v in TYPESTR.items()}


class DLPackOnly:
    """An object exposing only __dlpack__/__dlpack_device__, forwarding to a torch tensor."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, *args, **kwargs):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


# ---------------------------------------------------------------- accepted layouts and producers


def test_positional_call_launches(g):
    arrs = arrays()
    outcome = g.typed(*(arrs[p] for p in PTRS), *(SCALARS[k] for k in ARG_ORDER[6:]))
    assert outcome.launched and outcome.reason is None
    check(arrs)


def test_keyword_names_need_not_be_interned(g):
    arrs = arrays()
    kw = {"".join(list(k)): v for k, v in {**arrs, **SCALARS}.items()}
    assert g.typed(**kw).launched
    check(arrs)


@pytest.mark.parametrize("layout", ["offset_slice", "two_dimensional", "longer_than_needed", "row_of_a_column"])
def test_contiguous_layouts_are_accepted(g, layout):
    base = arrays(4 * N)
    if layout == "offset_slice":
        passed = {k: v[3 : 3 + N] for k, v in base.items()}
    elif layout == "two_dimensional":
        passed = {k: v[:N].view(8, N // 8) for k, v in base.items()}
    elif layout == "longer_than_needed":
        passed = base
    else:  # the (1, N) transpose of an (N, 1) tensor is contiguous
        passed = {k: v[:N].view(N, 1).t() for k, v in base.items()}
    assert all(t.is_contiguous() for t in passed.values())
    launch_ok(g, {k: v.reshape(-1) for k, v in passed.items()}, passed)


def test_raw_int_pointers_are_accepted(g):
    arrs = arrays()
    launch_ok(g, arrs, {p: arrs[p].data_ptr() for p in PTRS})


def test_int_subclass_pointers_are_accepted(g):
    class Ptr(int):
        pass

    arrs = arrays()
    launch_ok(g, arrs, {p: Ptr(arrs[p].data_ptr()) for p in PTRS})


@pytest.mark.parametrize("arg", PTRS)
def test_cuda_array_interface_is_accepted(g, arg):
    arrs = arrays()
    launch_ok(g, arrs, {arg: CAI(arrs[arg])})


@pytest.mark.parametrize("arg", PTRS)
def test_dlpack_producer_is_accepted(g, arg):
    arrs = arrays()
    launch_ok(g, arrs, {arg: DLPackOnly(arrs[arg])})


def test_every_producer_in_one_call(g):
    arrs = arrays()
    ptrs = {"x": CAI(arrs["x"], readonly=True), "h": DLPackOnly(arrs["h"]), "f": arrs["f"].data_ptr(),
            "s32": CAI(arrs["s32"], stream=1), "s64": arrs["s64"], "b": DLPackOnly(arrs["b"])}
    launch_ok(g, arrs, ptrs)


def test_zero_elements_is_not_launched(g):
    arrs = arrays(0)
    outcome = launch(g, arrs, n=0)
    assert not outcome.launched and "grid x is 0" in outcome.reason
    torch.cuda.synchronize()


# ---------------------------------------------------------------- integer ranges

_BOUNDARIES = [-1, 0, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64]


def _range_cases():
    out = []
    for arg in ("a_u32", "a_i32", "a_u64", "a_i64"):
        lo, hi = RANGE[arg]
        extra = [lo, lo - 1] if lo < 0 else []
        for v in _BOUNDARIES + extra:
            ok = lo <= v <= hi
            out.append(pytest.param(arg, v, ok, id=f"{arg}={v}"))
    out += [pytest.param("n", -1, False, id="n=-1"), pytest.param("n", 2**32, False, id="n=2**32")]
    return out


@pytest.mark.parametrize(("arg", "value", "ok"), _range_cases())
def test_integer_range(g, arg, value, ok):
    arrs = arrays()
    if ok:
        launch_ok(g, arrs, **{arg: value})
    else:
        arg_error(lambda: launch(g, arrs, **{arg: value}), arg, f"{value} is out of range for {SPELLING[arg]}")


def test_n_in_range_but_larger_than_the_arrays(g):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, n=2**32 - 1), "x", f"array has {N} elements but the kernel accesses 4294967295")


def test_argument_error_carries_the_kernel_name(g):
    with pytest.raises(ArgumentError) as info:
        launch(g, arrays(), a_u32=-1)
    assert (info.value.kernel, info.value.argument) == ("typed", "a_u32")


# ---------------------------------------------------------------- wrong Python types for scalars

_NON_INTS = [
    (1.0, "expected an integer ({spelling}), got float"),
    (True, "expected {spelling}, got bool"),
    (False, "expected {spelling}, got bool"),
    (None, "expected an integer, got NoneType"),
]


def _non_int_cases():
    out = []
    for arg in ("n", "a_u32", "a_i32", "a_u64", "a_i64"):
        for value, frag in _NON_INTS:
            out.append(pytest.param(arg, value, frag, id=f"{arg}={value!r}"))
    out += [
        pytest.param("a_u32", 2.5, "got float", id="a_u32=2.5"),
        pytest.param("a_i32", float("nan"), "got float", id="a_i32=nan"),
        pytest.param("a_u64", "3", "expected an integer, got str", id="a_u64='3'"),
        pytest.param("a_i64", 3 + 0j, "expected an integer, got complex", id="a_i64=3+0j"),
    ]
    return out


@pytest.mark.parametrize(("arg", "value", "frag"), _non_int_cases())
def test_non_integers_are_rejected_for_integer_args(g, arg, value, frag):
    spelling = SPELLING[arg]
    arg_error(lambda: launch(g, arrays(), **{arg: value}), arg, frag.format(spelling=spelling))


@pytest.mark.parametrize("value", [1, -2, 0.25, 2**80, float("inf"), float("-inf"), float("nan")],
                         ids=lambda v: f"a_f32={v!r}")
def test_f32_accepts_numbers(g, value):
    launch_ok(g, arrays(), a_f32=value)


@pytest.mark.parametrize(("value", "frag"), [
    (True, "expected f32, got bool"),
    (None, "expected a number, got NoneType"),
    ("0.5", "expected a number, got str"),
    (10**400, "is out of range for f32"),
], ids=["True", "None", "str", "10**400"])
def test_f32_rejects_non_numbers(g, value, frag):
    arg_error(lambda: launch(g, arrays(), a_f32=value), "a_f32", frag)


# ---------------------------------------------------------------- numpy scalars


def _np(kind: str, value):
    return lambda: getattr(np, kind)(value)


_NUMPY_CASES = [
    # integer args: numpy integers are accepted through __index__, range-checked like ints
    ("a_u32", _np("uint32", 2**32 - 1), True, None),
    ("a_u32", _np("int64", 5), True, None),
    ("a_i32", _np("int32", -(2**31)), True, None),
    ("a_i32", _np("int8", -3), True, None),
    ("a_u64", _np("uint64", 2**63 - 1), True, None),
    ("a_u64", _np("uint16", 7), True, None),
    ("a_i64", _np("int64", -(2**63)), True, None),
    ("a_i64", _np("uint8", 255), True, None),
    ("n", _np("int32", N), True, None),
    ("n", _np("uint64", N), True, None),
    ("a_u32", _np("int32", -1), False, "-1 is out of range for u32"),
    ("a_i32", _np("uint32", 2**31), False, "2147483648 is out of range for i32"),
    ("a_u64", _np("int64", -1), False, "-1 is out of range for u64"),
    ("a_i32", _np("float32", 1.0), False, "expected an integer, got numpy.float32"),
    ("a_i64", _np("float64", 1.0), False, "got float"),
    # f32 arg
    ("a_f32", _np("float64", 0.5), True, None),
    pytest.param("a_f32", _np("float32", 0.5), True, None),
    pytest.param("a_f32", _np("int32", 2), True, None),
]


def _numpy_id(case) -> str:
    values = case.values if hasattr(case, "values") else case
    return f"{values[0]}-{'ok' if values[2] else 'rejected'}-{values[3] or ''}"


@pytest.mark.parametrize(("arg", "make", "ok", "frag"), _NUMPY_CASES,
                         ids=[f"{i}-{_numpy_id(c)}" for i, c in enumerate(_NUMPY_CASES)])
def test_numpy_scalars(g, arg, make, ok, frag):
    if np is None:
        pytest.skip("numpy is not installed")
    value = make()
    arrs = arrays()
    if ok:
        launch_ok(g, arrs, **{arg: value})
    else:
        arg_error(lambda: launch(g, arrs, **{arg: value}), arg, frag)


# ---------------------------------------------------------------- bad pointer values


def _bad_pointer_cases():
    out = []
    for arg in PTRS:
        out += [
            pytest.param(arg, lambda a: None, "None is not a device pointer", id=f"{arg}-None"),
            pytest.param(arg, lambda a: 0, "null device pointer (0)", id=f"{arg}-0"),
            pytest.param(arg, lambda a: -1, "integer device pointer is negative or does not fit in 64 bits",
                         id=f"{arg}-negative"),
            pytest.param(arg, lambda a: torch.zeros(N, dtype=DTYPE[a]), "tensor is in CPU memory",
                         id=f"{arg}-cpu_tensor"),
        ]
    out += [
        pytest.param("x", lambda a: -(2**40), "is negative or does not fit in 64 bits", id="x-large_negative"),
        pytest.param("h", lambda a: 2**64, "is negative or does not fit in 64 bits", id="h-2**64"),
        pytest.param("f", lambda a: 1.5, "got float", id="f-float"),
        pytest.param("s32", lambda a: True, "got bool", id="s32-bool"),
        pytest.param("s64", lambda a: "0x7f0000000000", "got str", id="s64-str"),
        pytest.param("b", lambda a: object(), "got object", id="b-object"),
        pytest.param("f", lambda a: DLPackOnly(torch.zeros(N, dtype=torch.float32)),
                     "DLPack array is on the CPU (kDLCPU); a CUDA device array is needed", id="f-cpu_dlpack"),
    ]
    if np is not None:
        out += [
            pytest.param("h", lambda a: np.zeros(N, dtype=np.float16),
                         "DLPack array is on the CPU (kDLCPU); a CUDA device array is needed", id="h-numpy_array"),
            pytest.param("s64", lambda a: np.zeros(N, dtype=np.int64),
                         "DLPack array is on the CPU (kDLCPU); a CUDA device array is needed", id="s64-numpy_array"),
        ]
    return out


@pytest.mark.parametrize(("arg", "make", "frag"), _bad_pointer_cases())
def test_bad_pointer_values(g, arg, make, frag):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {arg: make(arg)}), arg, frag)


_WRONG_DTYPES = [
    ("x", torch.float16), ("x", torch.float32), ("x", torch.int16),
    ("h", torch.bfloat16), ("h", torch.float32), ("h", torch.int16),
    ("f", torch.float64), ("f", torch.int32), ("f", torch.float16),
    ("s32", torch.uint32), ("s32", torch.int64), ("s32", torch.float32),
    ("s64", torch.float64), ("s64", torch.int32), ("s64", torch.uint64),
    ("b", torch.int8), ("b", torch.bool), ("b", torch.int32),
]


@pytest.mark.parametrize(("arg", "dtype"), _WRONG_DTYPES, ids=[f"{a}-{d}" for a, d in _WRONG_DTYPES])
def test_wrong_torch_dtype(g, arg, dtype):
    bad = torch.empty(N, device="cuda", dtype=dtype)
    arg_error(lambda: launch(g, arrays(), {arg: bad}), arg, f"expected dtype {DTYPE[arg]}", f"got {dtype}")


@pytest.mark.parametrize("arg", PTRS)
@pytest.mark.parametrize("how", ["transposed", "step_slice"])
def test_non_contiguous_tensor(g, arg, how):
    if how == "transposed":
        bad = torch.zeros(8, N // 8, device="cuda", dtype=DTYPE[arg]).t()
    else:
        bad = torch.zeros(2 * N, device="cuda", dtype=DTYPE[arg])[::2]
    assert bad.numel() == N and not bad.is_contiguous()
    arg_error(lambda: launch(g, arrays(), {arg: bad}), arg, "tensor is not contiguous")


@pytest.mark.parametrize("arg", PTRS)
def test_too_few_elements(g, arg):
    short = arrays(N - 1)[arg]
    arg_error(lambda: launch(g, arrays(), {arg: short}), arg, f"array has {N - 1} elements but the kernel accesses {N}")


def test_empty_tensor_is_too_small(g):
    empty = torch.empty(0, device="cuda", dtype=torch.bfloat16)
    arg_error(lambda: launch(g, arrays(), {"x": empty}), "x", f"array has 0 elements but the kernel accesses {N}")


@pytest.mark.parametrize("producer", ["torch", "dlpack"])
def test_array_on_another_device(g, producer):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices (only one is visible)")
    other = torch.zeros(N, device="cuda:1", dtype=torch.float32)
    value = other if producer == "torch" else DLPackOnly(other)
    arg_error(lambda: launch(g, arrays(), {"f": value}), "f", "array is on CUDA device 1 but the current device is 0")


# ---------------------------------------------------------------- __cuda_array_interface__


@pytest.mark.parametrize("stream", [1, 2, "real", None, "absent"], ids=lambda s: f"stream={s}")
def test_cai_stream_values_are_accepted(g, stream):
    arrs = arrays()
    side = torch.cuda.Stream()
    if stream == "real":
        stream = side.cuda_stream
        assert stream not in (0, 1, 2)
    wrapped = CAI(arrs["h"]) if stream == "absent" else CAI(arrs["h"], stream=stream)
    launch_ok(g, arrs, {"h": wrapped})


@pytest.mark.parametrize("arg", ["x", "h"])
def test_cai_stream_zero_is_rejected(g, arg):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {arg: CAI(arrs[arg], stream=0)}), arg,
              "__cuda_array_interface__ stream 0 is disallowed by the protocol")


@pytest.mark.parametrize("arg", WRITABLE)
def test_cai_read_only_output_is_rejected(g, arg):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {arg: CAI(arrs[arg], readonly=True)}), arg,
              "array is read-only but the kernel writes it")


def test_cai_read_only_const_input_is_accepted(g):
    arrs = arrays()
    launch_ok(g, arrs, {"x": CAI(arrs["x"], readonly=True)})


_CAI_WRONG_TYPESTR = [("x", "<f2"), ("x", "<i2"), ("h", "<V2"), ("f", "<i4"), ("s32", "<u4"), ("s64", "<f8"),
                      ("b", "|i1")]


@pytest.mark.parametrize(("arg", "typestr"), _CAI_WRONG_TYPESTR, ids=[f"{a}-{t}" for a, t in _CAI_WRONG_TYPESTR])
def test_cai_wrong_dtype(g, arg, typestr):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {arg: CAI(arrs[arg], typestr=typestr)}), arg,
              f"(typestr {TYPESTR[arg]}), got typestr {typestr}")


def test_cai_bf16_typestr_spellings(g):
    arrs = arrays()
    launch_ok(g, arrs, {"x": CAI(arrs["x"], typestr="|V2")})


def test_cai_non_contiguous_strides(g):
    t = torch.zeros(8, N // 8, device="cuda", dtype=torch.float32).t()
    arg_error(lambda: launch(g, arrays(), {"f": CAI(t)}), "f", "array is not C-contiguous")


def test_cai_explicit_c_strides_are_accepted(g):
    arrs = arrays()
    two_d = arrs["s64"].view(8, N // 8)
    launch_ok(g, arrs, {"s64": CAI(two_d, strides=(N // 8 * 8, 8))})


def test_cai_too_few_elements(g):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {"h": CAI(arrs["h"], shape=(N - 1,))}), "h",
              f"array has {N - 1} elements but the kernel accesses {N}")


def test_cai_null_pointer(g):
    arrs = arrays()
    arg_error(lambda: launch(g, arrs, {"f": CAI(arrs["f"], ptr=0)}), "f", "array has a null data pointer")


def test_cai_not_a_dict(g):
    class Bad:
        __cuda_array_interface__ = [("shape", (N,))]

    arg_error(lambda: launch(g, arrays(), {"b": Bad()}), "b", "__cuda_array_interface__ is not a dict")


# ---------------------------------------------------------------- DLPack


_DL_WRONG = [("x", torch.float16), ("h", torch.bfloat16), ("f", torch.int32), ("s32", torch.float32),
             ("s64", torch.float64), ("b", torch.int8)]


@pytest.mark.parametrize(("arg", "dtype"), _DL_WRONG, ids=[f"{a}-{d}" for a, d in _DL_WRONG])
def test_dlpack_wrong_dtype(g, arg, dtype):
    bad = DLPackOnly(torch.zeros(N, device="cuda", dtype=dtype))
    arg_error(lambda: launch(g, arrays(), {arg: bad}), arg, "got DLPack dtype")


def test_dlpack_non_contiguous(g):
    t = torch.zeros(8, N // 8, device="cuda", dtype=torch.int32).t()
    arg_error(lambda: launch(g, arrays(), {"s32": DLPackOnly(t)}), "s32", "array is not C-contiguous")


def test_dlpack_too_few_elements(g):
    short = DLPackOnly(torch.zeros(N - 1, device="cuda", dtype=torch.uint8))
    arg_error(lambda: launch(g, arrays(), {"b": short}), "b", f"array has {N - 1} elements but the kernel accesses {N}")


def test_dlpack_offset_slice_is_accepted(g):
    arrs = arrays()
    buf = torch.full((N + 5,), float("nan"), device="cuda", dtype=torch.float32)
    arrs["f"] = buf[5:]
    launch_ok(g, arrs, {"f": DLPackOnly(arrs["f"])})


# ---------------------------------------------------------------- call shape (TypeError)


@pytest.mark.parametrize("missing", ARG_ORDER)
def test_missing_argument(g, missing):
    kw = {**arrays(), **SCALARS}
    del kw[missing]
    type_error(lambda: g.typed(**kw), f"typed() missing required argument '{missing}'")


@pytest.mark.parametrize("dup", ["x", "n", "a_f32"])
def test_duplicate_argument(g, dup):
    arrs = arrays()
    pos = [*(arrs[p] for p in PTRS), *(SCALARS[k] for k in ARG_ORDER[6:])]
    kw = {dup: arrs[dup] if dup in arrs else SCALARS[dup]}
    type_error(lambda: g.typed(*pos, **kw), f"typed() got multiple values for argument '{dup}'")


@pytest.mark.parametrize("bogus", ["bogus", "X", "stream_", "out"])
def test_unknown_keyword(g, bogus):
    kw = {**arrays(), **SCALARS, bogus: 1}
    type_error(lambda: g.typed(**kw), f"typed() got an unexpected keyword argument '{bogus}'")


def test_too_many_positionals(g):
    arrs = arrays()
    pos = [*(arrs[p] for p in PTRS), *(SCALARS[k] for k in ARG_ORDER[6:]), 0]
    type_error(lambda: g.typed(*pos), "typed() takes 12 positional arguments but 13 were given")


@pytest.mark.parametrize("case", [
    "pointer", "positional", "missing", "unknown", "stream",
    "pointer_none",
])
def test_plan_call_shape(g, case):
    ints = {k: v for k, v in SCALARS.items() if k != "a_f32"}
    if case == "pointer":
        type_error(lambda: g.typed.plan(**ints, x=1), "plan of typed() takes scalar arguments only; got pointer 'x'")
    elif case == "pointer_none":
        type_error(lambda: g.typed.plan(**ints, x=None),
                   "plan of typed() takes scalar arguments only; got pointer 'x'")
    elif case == "positional":
        type_error(lambda: g.typed.plan(N), "plan of typed() takes 0 positional arguments but 1 were given")
    elif case == "missing":
        type_error(lambda: g.typed.plan(**{k: v for k, v in ints.items() if k != "n"}),
                   "plan of typed() missing required argument 'n'")
    elif case == "unknown":
        type_error(lambda: g.typed.plan(**ints, bogus=1), "plan of typed() got an unexpected keyword argument 'bogus'")
    else:
        type_error(lambda: g.typed.plan(**ints, stream=0),
                   "plan of typed() got an unexpected keyword argument 'stream'")


def test_plan_range_checks_like_the_launcher(g):
    ints = {k: v for k, v in SCALARS.items() if k != "a_f32"}
    assert g.typed.plan(**ints)["launched"]
    arg_error(lambda: g.typed.plan(**{**ints, "a_i32": 2**31}), "a_i32", "2147483648 is out of range for i32")


# ---------------------------------------------------------------- stream=


class StreamProto:
    """An object exposing the __cuda_stream__ protocol: (version, handle)."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@pytest.mark.parametrize("kind", ["int0", "int_current", "int_side", "legacy_1", "per_thread_2", "torch_stream",
                                  "torch_current_stream", "none", "cuda_stream_protocol"])
def test_stream_keyword_accepted(g, kind):
    arrs = arrays()
    torch.cuda.synchronize()  # the arrays are ready for any stream
    side = torch.cuda.Stream()
    stream = {
        "int0": 0,
        "int_current": torch.cuda.current_stream().cuda_stream,
        "int_side": side.cuda_stream,
        "legacy_1": 1,
        "per_thread_2": 2,
        "torch_stream": side,
        "torch_current_stream": torch.cuda.current_stream(),
        "none": None,
        "cuda_stream_protocol": StreamProto(side.cuda_stream),
    }[kind]
    outcome = launch(g, arrs, stream=stream)
    assert outcome.launched, outcome.reason
    side.synchronize()
    check(arrs)


def x_pending(arrs: dict) -> None:
    """Zeros arrs["x"] now and queues its values on torch's current stream behind a GPU sleep of
    tens of milliseconds: a launch that reads x before that stream's work is done sees zeros."""
    x_final = arrs["x"].clone()
    arrs["x"].fill_(0.0)
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)
    arrs["x"].copy_(x_final)


def test_without_stream_torch_arrays_launch_on_torchs_current_stream(g):
    """No stream named and torch tensors among the arrays: the launch goes to torch's current
    stream, as torch's own operators do. So it can be captured into a CUDA graph without stream=
    (while a stream captures, the legacy default stream may not be used), and inside
    `with torch.cuda.stream(side)` it is ordered after the work queued on side."""
    arrs = arrays()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outcome = launch(g, arrs)
    assert outcome.launched, outcome.reason
    for v in ("h", "f"):
        arrs[v].fill_(float("nan"))
    torch.cuda.synchronize()
    graph.replay()
    check(arrs)  # the replay wrote them

    arrs = arrays()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x_pending(arrs)                  # on side
        assert launch(g, arrs).launched  # must read x after that copy
    side.synchronize()
    check(arrs)


def test_without_stream_a_cai_array_naming_a_stream_launches_there(g):
    """No stream named, no torch tensor, and an array whose __cuda_array_interface__ names a stream
    (the protocol's: the data is ready there): the launch goes to that stream, so it is ordered after
    the work queued on it."""
    arrs = arrays()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x_pending(arrs)
    wrapped = {k: CAI(v, stream=side.cuda_stream if k == "x" else CAI._MISSING) for k, v in arrs.items()}
    assert launch(g, arrs, wrapped).launched
    side.synchronize()
    check(arrs)


class DLPackStream(DLPackOnly):
    """A DLPack producer that honours the consumer's stream, as torch does (__dlpack__(stream=...)
    orders torch's pending work before that stream)."""

    def __init__(self, t):
        super().__init__(t)
        self.streams = []

    def __dlpack__(self, stream=None, **kwargs):
        self.streams.append(stream)
        return self.t.__dlpack__(stream=stream)


def test_dlpack_producers_are_told_the_launch_stream(g):
    """stream= named (a non-blocking side stream): a DLPack producer gets it in __dlpack__(stream=)
    and so orders its pending work (a copy on torch's current stream behind a GPU sleep) before the
    launch; with no stream named and no torch tensor, it is asked without one."""
    arrs = arrays()
    side = torch.cuda.Stream()
    x_pending(arrs)  # on torch's current stream
    x = DLPackStream(arrs["x"])
    assert launch(g, arrs, {"x": x}, stream=side).launched
    assert x.streams == [side.cuda_stream]
    side.synchronize()
    check(arrs)
    y = DLPackStream(arrays()["x"])
    torch.cuda.synchronize()
    assert launch(g, {k: CAI(v) for k, v in arrays().items()}, {"x": y}).launched
    assert y.streams == [None]
    torch.cuda.synchronize()


@pytest.mark.parametrize(("value", "frag"), [
    ("default", "expected an int CUDA stream handle or a stream object, got str"),
    (1.5, "got float"),
    (True, "got bool"),
    (-1, "invalid stream handle"),
    (object(), "got object"),
], ids=["str", "float", "bool", "negative", "object"])
def test_stream_keyword_rejected(g, value, frag):
    arg_error(lambda: launch(g, arrays(), stream=value), "stream", frag)


def test_kernelgen_ops_exports_the_raised_types():
    assert issubclass(ArgumentError, TypeError) and issubclass(ArgumentError, ValueError)
    assert kernelgen_ops.ArgumentError is ArgumentError
