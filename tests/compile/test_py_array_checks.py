"""Build test of the Python launchers' argument checks on a small project written here: element
counts and strides that overflow 64 bits, __cuda_array_interface__ fields (version, mask, data
pointer), integer pointers of any int type (int subclasses, IntEnum, numpy.int64), the alignment of
every typed pointer, dispatchers whose arrays' dtypes cannot tell their instances apart, DLPack
producers told the call's stream, stream objects, plan()'s dtype keys and sizes, a chain of a
vector member and a scalar one, and float scalars beyond their type's range (f32, f16, bf16, f64,
a struct's f32 field; infinity and NaN passed as such are taken). No GPU is
needed: every check runs before the launch, and an argument list that passes them all reaches the
launch, which fails for want of a GPU (LaunchError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ops_python, run_cli, small_project

pytestmark = pytest.mark.build

TARGETS = """hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
"""

SPEC = """module: checks
summary: Array arguments of several element types, a strided view and a dispatcher over FP8 types.
sources: [kernels/checks.cu]
structs:
  Params:
    cpp: Params
    header: kernels/params.h
    fields:
      scale: f32
      n: u32
kernels:
  floats:
    symbol: floats_kernel
    summary: Reads one float scalar of each type, and a struct with a float field.
    args:
      y: {type: f32*, size: n}
      a32: f32
      a16: f16
      ab16: bf16
      a64: f64
      p: Params
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 64}
  typed:
    symbol: typed_kernel
    summary: Reads arrays of several element types.
    args:
      x: {type: const f32*, size: n}
      h: {type: const bf16*, size: n}
      d: {type: const f64*, size: n, nullable: true}
      v: {type: f32x4*, size: n // 4}
      b: {type: const u8*, size: n}
      raw: {type: const void*, size: n}
      s: {type: const f32*, size: (rows - 1) * stride + n, contiguous: false}
      big: {type: const f32*, size: n * stride * stride * 65536, nullable: true}
      n: u32
      rows: u32
      stride: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 64, rows: 2, stride: 64}
  conv:
    symbol: conv_kernel<{T}>
    summary: Widens FP8 or bfloat16 values to float.
    instantiate:
      T: [fp8_e4m3, fp8_e5m2, bf16]
    args:
      x: {type: "const {T}*", size: n}
      y: {type: f32*, size: n}
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 64}
  relu_vec4:
    symbol: relu_vec4_kernel
    summary: Four floats a thread, as float4.
    args:
      x: {type: const f32x4*, size: n // 4}
      y: {type: f32x4*, size: n // 4}
      n: u32
    grid: ["div_ceil(n // 4, 256)", 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    applies_if: [n % 4 == 0]
    examples:
      - {n: 64}
  relu_scalar:
    symbol: relu_scalar_kernel
    summary: One float a thread.
    args:
      x: {type: const f32*, size: n}
      y: {type: f32*, size: n}
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples:
      - {n: 64}
fallbacks:
  relu: [relu_vec4, relu_scalar]
"""

KERNELS = """#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>
#include "params.h"

__global__ void floats_kernel(float* y, float a32, __half a16, __nv_bfloat16 ab16, double a64, Params p, uint32_t n) {}

__global__ void typed_kernel(const float* x, const __nv_bfloat16* h, const double* d, float4* v,
                             const uint8_t* b, const void* raw, const float* s, const float* big, uint32_t n,
                             uint32_t rows, uint32_t stride) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) v[i].x = x[i] + __bfloat162float(h[i]) + (d ? static_cast<float>(d[i]) : 0.f) + b[i] + s[i];
}

__global__ void relu_vec4_kernel(const float4* x, float4* y, uint32_t n) {}
__global__ void relu_scalar_kernel(const float* x, float* y, uint32_t n) {}

template <typename T>
__global__ void conv_kernel(const T* x, float* y, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(x[i]);
}
"""

PARAMS = """#ifndef CHECKS_PARAMS_H
#define CHECKS_PARAMS_H
#include <stdint.h>
struct Params {
  float scale;
  uint32_t n;
};
#endif
"""

PRELUDE = """
import ctypes, enum
import numpy as np
import kernelgen_ops
import kernelgen_ops.hopper.checks as m

P = 1 << 20

class A:
    def __init__(self, typestr, shape, ptr=P, strides=None, **extra):
        self.__cuda_array_interface__ = {'data': (ptr, False), 'typestr': typestr, 'shape': shape,
                                         'strides': strides, 'version': 3, **extra}

def check(label, call):
    try:
        call()
        print(label, 'returned')
    except kernelgen_ops.ArgumentError as e:
        print(label, 'ArgumentError', e.argument, '|', str(e).split(': ', 2)[-1])
    except kernelgen_ops.LaunchError:
        print(label, 'passed the checks')

def args(**over):
    a = dict(x=A('<f4', (64,)), h=A('<V2', (64,)), d=None, v=A('<f4', (64,)), b=A('|u1', (64,)),
             raw=A('|u1', (64,)), s=A('<f4', (128,)), big=None, n=64, rows=2, stride=64)
    a.update(over)
    return a

def typed(**over):
    return lambda: m.typed(**args(**over))

def fcheck(label, **over):  # the float scalars of m.floats
    a = dict(y=A('<f4', (64,)), a32=1.0, a16=1.0, ab16=1.0, a64=1.0, p={'scale': 1.0, 'n': 1}, n=64)
    a.update(over)
    check(label, lambda: m.floats(**a))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = small_project(tmp_path_factory.mktemp("pychecks") / "project",
                         {"specs/targets.yaml": TARGETS, "specs/checks.yaml": SPEC, "kernels/checks.cu": KERNELS,
                          "kernels/params.h": PARAMS})
    res = run_cli("build", "--target", "hopper", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def _run(built: Path, code: str) -> list[str]:
    return ops_python(built, PRELUDE + code)


TOO_LARGE = "invalid shape: the array's size (its shape and strides) does not fit in 64 bits"


def test_sizes_that_overflow_64_bits_are_refused(built: Path) -> None:
    out = _run(built, """
check('good', typed())
check('wraps to 2**64', typed(x=A('<f4', (2**32 + 1, 2**32))))
check('wraps to 0', typed(x=A('<f4', (2**40, 2**40))))
check('bytes overflow', typed(x=A('<f4', (2**62,))))
check('vector lanes overflow', typed(v=A('<f4', (2**62,))))
check('void bytes overflow', typed(raw=A('<f8', (2**61,))))
check('dimension over int64', typed(x=A('<f4', (2**64,))))
check('negative dimension', typed(x=A('<f4', (-64,))))
check('empty with huge dimensions', typed(x=A('<f4', (0, 2**62, 2**62))))
check('stride overflow', typed(s=A('<f4', (2, 64), strides=(2**62, 4))))
check('span sum overflow', typed(s=A('<f4', (2, 2, 64), strides=(2**61, 2**61, 4))))
check('stride over int64', typed(s=A('<f4', (2, 64), strides=(2**64, 4))))
""")
    assert out == [
        "good passed the checks",
        f"wraps to 2**64 ArgumentError x | {TOO_LARGE}",
        f"wraps to 0 ArgumentError x | {TOO_LARGE}",
        f"bytes overflow ArgumentError x | {TOO_LARGE}",
        f"vector lanes overflow ArgumentError v | {TOO_LARGE}",
        f"void bytes overflow ArgumentError raw | {TOO_LARGE}",
        f"dimension over int64 ArgumentError x | {TOO_LARGE}",
        "negative dimension ArgumentError x | invalid shape: a dimension is negative or not an integer",
        "empty with huge dimensions ArgumentError x | array has 0 elements but the kernel accesses 64 (of f32: 0 bytes, "
        "256 needed)",
        f"stride overflow ArgumentError s | {TOO_LARGE}",
        f"span sum overflow ArgumentError s | {TOO_LARGE}",
        "stride over int64 ArgumentError s | invalid strides: each must be an integer in 64 bits",
    ]


def test_cuda_array_interface_fields_are_validated(built: Path) -> None:
    out = _run(built, """
for version in (0, 1, 2, 3):
    check(f'version {version}', typed(x=A('<f4', (64,), version=version)))
check('version 4', typed(x=A('<f4', (64,), version=4)))
check('version -1', typed(x=A('<f4', (64,), version=-1)))
check('version str', typed(x=A('<f4', (64,), version='3')))
check('mask None', typed(x=A('<f4', (64,), mask=None)))
check('mask', typed(x=A('<f4', (64,), mask=A('|b1', (64,)))))
check('negative pointer', typed(x=A('<f4', (64,), ptr=-4096)))
check('pointer over 64 bits', typed(x=A('<f4', (64,), ptr=2**64)))
check('pointer str', typed(x=A('<f4', (64,), ptr='0x1000')))
check('numpy pointer', typed(x=A('<f4', (64,), ptr=np.uint64(P))))
""")
    assert out == [
        "version 0 passed the checks",
        "version 1 passed the checks",
        "version 2 passed the checks",
        "version 3 passed the checks",
        "version 4 ArgumentError x | __cuda_array_interface__ version 4 is not supported (versions 0 to 3 are)",
        "version -1 ArgumentError x | __cuda_array_interface__ version -1 is not supported (versions 0 to 3 are)",
        "version str ArgumentError x | __cuda_array_interface__ version '3' is not supported (versions 0 to 3 are)",
        "mask None passed the checks",
        "mask ArgumentError x | masked arrays (a __cuda_array_interface__ mask) are not supported",
        "negative pointer ArgumentError x | __cuda_array_interface__ pointer is negative",
        "pointer over 64 bits ArgumentError x | __cuda_array_interface__ pointer does not fit in 64 bits",
        "pointer str ArgumentError x | __cuda_array_interface__ pointer is not an integer (got str)",
        "numpy pointer passed the checks",
    ]


def test_every_int_type_is_a_pointer_and_every_typed_pointer_is_aligned(built: Path) -> None:
    out = _run(built, """
class Ptr(int):
    pass

class E(enum.IntEnum):
    GOOD = P
    ODD = P + 4

for label, p in [('int', int), ('int subclass', Ptr), ('numpy.int64', np.int64), ('numpy.uint64', np.uint64)]:
    check(f'{label} aligned', typed(v=p(P)))
    check(f'{label} misaligned', typed(v=p(P + 4)))
    check(f'{label} null, nullable', typed(d=p(0)))
    check(f'{label} null', typed(x=p(0)))
    check(f'{label} f64 at +4', typed(d=p(P + 4)))
check('IntEnum', typed(v=E.GOOD))
check('IntEnum misaligned', typed(v=E.ODD))
check('numpy bool', typed(x=np.bool_(True)))
check('f32 at +1', typed(x=A('<f4', (64,), ptr=P + 1)))
check('f32 at +2', typed(x=A('<f4', (64,), ptr=P + 2)))
check('f32 at +4', typed(x=A('<f4', (64,), ptr=P + 4)))
check('bf16 at +1', typed(h=A('<V2', (64,), ptr=P + 1)))
check('bf16 at +2', typed(h=A('<V2', (64,), ptr=P + 2)))
check('f64 at +4', typed(d=A('<f8', (64,), ptr=P + 4)))
check('u8 at +1', typed(b=A('|u1', (64,), ptr=P + 1)))
check('void at +1', typed(raw=A('|u1', (64,), ptr=P + 1)))
check('int f32 at +2', typed(x=P + 2))
check('int u8 at +1', typed(b=P + 1))
""")
    lines = []
    for label in ("int", "int subclass", "numpy.int64", "numpy.uint64"):
        lines += [
            f"{label} aligned passed the checks",
            f"{label} misaligned ArgumentError v | device pointer 0x100004 is not 16-byte aligned, as f32x4 elements need",
            f"{label} null, nullable passed the checks",
            f"{label} null ArgumentError x | null device pointer (0); the argument is not declared nullable",
            f"{label} f64 at +4 ArgumentError d | device pointer 0x100004 is not 8-byte aligned, as f64 elements need",
        ]
    assert out == [
        *lines,
        "IntEnum passed the checks",
        "IntEnum misaligned ArgumentError v | device pointer 0x100004 is not 16-byte aligned, as f32x4 elements need",
        "numpy bool ArgumentError x | expected a CUDA array or an int device pointer, got numpy.bool",
        "f32 at +1 ArgumentError x | data pointer 0x100001 is not 4-byte aligned, as f32 elements need",
        "f32 at +2 ArgumentError x | data pointer 0x100002 is not 4-byte aligned, as f32 elements need",
        "f32 at +4 passed the checks",
        "bf16 at +1 ArgumentError h | data pointer 0x100001 is not 2-byte aligned, as bf16 elements need",
        "bf16 at +2 passed the checks",
        "f64 at +4 ArgumentError d | data pointer 0x100004 is not 8-byte aligned, as f64 elements need",
        "u8 at +1 passed the checks",
        "void at +1 passed the checks",
        "int f32 at +2 ArgumentError x | device pointer 0x100002 is not 4-byte aligned, as f32 elements need",
        "int u8 at +1 passed the checks",
    ]


def test_a_dispatcher_refuses_arrays_whose_dtype_fits_several_instances(built: Path) -> None:
    out = _run(built, """
y = A('<f4', (64,), ptr=2 * P)
check('bf16', lambda: m.conv(A('<V2', (64,)), y, 64))
check('|V1', lambda: m.conv(A('|V1', (64,)), y, 64))
check('<V1', lambda: m.conv(A('<V1', (64,)), y, 64))
check('int', lambda: m.conv(P, y, 64))
check('numpy.int64', lambda: m.conv(np.int64(P), y, 64))
check('instance', lambda: m.conv_fp8_e5m2(A('|V1', (64,)), y, 64))
print(m.conv(A('<f4', (64,)), y, 64).reason)
""")
    choose = ("and the kernels this call can launch differ in its element type T ('fp8_e4m3', 'fp8_e5m2'); pass an "
              "array whose dtype names one (a torch tensor of torch.float8_e4m3fn, say), or call one instance "
              "directly (conv_fp8_e4m3, conv_fp8_e5m2)")
    assert out == [
        "bf16 passed the checks",
        f"|V1 ArgumentError x | the arrays' dtype fits several element types, {choose}",
        f"<V1 ArgumentError x | the arrays' dtype fits several element types, {choose}",
        "int ArgumentError x | an integer device pointer carries no dtype, and the kernels this call can launch differ "
        "in its element type T ('fp8_e4m3', 'fp8_e5m2', 'bf16'); pass an array whose dtype names one (a torch tensor "
        "of torch.float8_e4m3fn, say), or call one instance directly (conv_fp8_e4m3, conv_fp8_e5m2, conv_bf16)",
        "numpy.int64 ArgumentError x | an integer device pointer carries no dtype, and the kernels this call can "
        "launch differ in its element type T ('fp8_e4m3', 'fp8_e5m2', 'bf16'); pass an array whose dtype names one "
        "(a torch tensor of torch.float8_e4m3fn, say), or call one instance directly (conv_fp8_e4m3, conv_fp8_e5m2, "
        "conv_bf16)",
        "instance passed the checks",
        "conv: not launched: no instantiation for this dtype (T)",
    ]


def test_dlpack_producers_and_streams(built: Path) -> None:
    """A dispatcher reads a DLPack producer's dtype from a capsule it asks for with the call's
    stream, as the conversion does; stream= takes int types and CuPy's streams (their ptr)."""
    out = _run(built, """
class DLDevice(ctypes.Structure):
    _fields_ = [('device_type', ctypes.c_int32), ('device_id', ctypes.c_int32)]
class DLDataType(ctypes.Structure):
    _fields_ = [('code', ctypes.c_uint8), ('bits', ctypes.c_uint8), ('lanes', ctypes.c_uint16)]
class DLTensor(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('device', DLDevice), ('ndim', ctypes.c_int32), ('dtype', DLDataType),
                ('shape', ctypes.POINTER(ctypes.c_int64)), ('strides', ctypes.POINTER(ctypes.c_int64)),
                ('byte_offset', ctypes.c_uint64)]
class DLManaged(ctypes.Structure):
    _fields_ = [('dl_tensor', DLTensor), ('manager_ctx', ctypes.c_void_p), ('deleter', ctypes.c_void_p)]
new_capsule = ctypes.pythonapi.PyCapsule_New
new_capsule.restype = ctypes.py_object
new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
keep = []

class DL:
    def __init__(self):
        self.streams = []
    def __dlpack_device__(self):
        return (2, 0)
    def __dlpack__(self, stream=None, **kw):
        self.streams.append(stream)
        shape = (ctypes.c_int64 * 1)(64)
        t = DLManaged()
        t.dl_tensor = DLTensor(P, DLDevice(2, 0), 1, DLDataType(4, 16, 1), shape, None, 0)
        keep.extend([shape, t])
        return new_capsule(ctypes.addressof(t), b'dltensor', None)

y = A('<f4', (64,), ptr=2 * P)
for stream in (None, 5):
    x = DL()
    check(f'dlpack stream={stream}', lambda: m.conv(x, y, 64, stream=stream))
    print(x.streams)

Stream = type('Stream', (), {'__module__': 'cupy.cuda.stream', 'ptr': 7})
ExternalStream = type('ExternalStream', (Stream,), {'__module__': 'mylib'})
NotCupy = type('Stream', (), {'__module__': 'mylib', 'ptr': 7})
for label, s in [('cupy', Stream()), ('cupy subclass', ExternalStream()), ('other ptr', NotCupy()),
                 ('numpy.int64', np.int64(7)), ('numpy.uint64', np.uint64(7)), ('numpy bool', np.bool_(True))]:
    check(f'stream {label}', typed(stream=s))
""")
    # Without a GPU the DLPack array's device is refused, after the dispatcher read its dtype.
    device = ("dlpack stream={} ArgumentError x | array is on CUDA device 0 but no CUDA device is visible here (no "
              "GPU, or no driver)")
    assert out == [
        device.format(None), "[None]",
        device.format(5), "[5]",
        "stream cupy passed the checks",
        "stream cupy subclass passed the checks",
        "stream other ptr ArgumentError None | expected an int CUDA stream handle or a stream object, got Stream",
        "stream numpy.int64 passed the checks",
        "stream numpy.uint64 passed the checks",
        "stream numpy bool ArgumentError None | expected an int CUDA stream handle or a stream object, got "
        "numpy.bool",
    ]


def test_plans_take_none_for_a_dtype_key_and_report_sizes_as_documented(built: Path) -> None:
    out = _run(built, """
print(m.conv.plan(n=64, T=None) == m.conv.plan(n=64), m.conv.plan(n=64, T=None)['kernel'])
print(m.conv.plan(n=64, T='fp8_e5m2')['kernel'], m.plan_conv(n=64, T=None)['kernel'])
print(m.typed.plan(n=64, rows=2, stride=64)['sizes'])
print(m.typed.plan(n=32, rows=0, stride=64)['sizes'])  # s: (0 - 1) * 64 + 32
print(m.typed.plan(n=2**32 - 1, rows=2, stride=2**32 - 1)['sizes'])
""")
    assert out == [
        "True conv_fp8_e4m3",
        "conv_fp8_e5m2 conv_fp8_e4m3",
        "{'x': 64, 'h': 64, 'd': 64, 'v': 16, 'b': 64, 'raw': 64, 's': 128, 'big': 17179869184}",
        "{'x': 32, 'h': 32, 'd': 32, 'v': 8, 'b': 32, 'raw': 32, 'big': 8589934592}",
        "None",
    ]


def test_a_chain_of_vector_and_scalar_members_takes_lane_arrays_member_by_member(built: Path) -> None:
    """relu: [relu_vec4 (f32x4), relu_scalar (f32)]: a float32 array is either; the first member
    whose arrays suit its element type (count, alignment) and whose rules apply runs, and plan's
    sizes count the planned member's elements. An integer pointer, which carries no dtype, is still
    refused."""
    out = _run(built, """
def ran(label, call):
    try:
        call()
        print(label, 'returned')
    except kernelgen_ops.ArgumentError as e:
        print(label, 'ArgumentError', e.argument, '|', str(e).split(': ', 2)[-1])
    except kernelgen_ops.LaunchError as e:
        print(label, 'launch of', e.kernel)
ran('aligned', lambda: m.relu(A('<f4', (64,)), A('<f4', (64,), ptr=2 * P), 64))
ran('misaligned', lambda: m.relu(A('<f4', (64,), ptr=P + 4), A('<f4', (64,), ptr=2 * P), 64))
ran('n 62', lambda: m.relu(A('<f4', (64,)), A('<f4', (64,), ptr=2 * P), 62))
ran('count 62', lambda: m.relu(A('<f4', (62,)), A('<f4', (64,), ptr=2 * P), 62))
ran('short', lambda: m.relu(A('<f4', (32,)), A('<f4', (64,), ptr=2 * P), 64))
ran('f64', lambda: m.relu(A('<f8', (64,)), A('<f8', (64,), ptr=2 * P), 64))
ran('int', lambda: m.relu(P, 2 * P, 64))
print(m.relu.plan(n=64)['kernel'], m.relu.plan(n=64)['sizes'], m.relu.plan(n=62)['kernel'], m.relu.plan(n=62)['sizes'])
""")
    assert out[:6] == [
        "aligned launch of relu_vec4",
        "misaligned launch of relu_scalar",
        "n 62 launch of relu_scalar",
        "count 62 launch of relu_scalar",
        "short ArgumentError x | array has 8 elements but the kernel accesses 16 (of f32x4: 128 bytes, 256 needed)",
        "f64 returned",
    ], out
    assert out[6].startswith("int ArgumentError x | an integer device pointer carries no dtype"), out
    assert out[7] == "relu_vec4 {'x': 16, 'y': 16} relu_scalar {'x': 62, 'y': 62}", out


# ---------------------------------------------------------------- float scalars

def _over(value: str, type_name: str, largest: str) -> str:
    return (f"{value} is out of range for {type_name} (finite values up to {largest} in magnitude; pass "
            "float('inf') for infinity)")


F16_OVER = "65504"
BF16_OVER = "3.3895314e+38"
F32_OVER = "3.4028235e+38"


def test_16_bit_floats_refuse_finite_values_beyond_their_range(built: Path) -> None:
    out = _run(built, """
for name in ('a16', 'ab16'):
    for value in (65504.0, 65519.0, 65520.0, -70000, 1e39, 2**200, np.float64(-1e39), float('inf'), float('-inf'),
                  float('nan'), 3.3895e38):
        fcheck(f'{name}={value!r}', **{name: value})
""")
    assert out == [
        "a16=65504.0 passed the checks",
        "a16=65519.0 passed the checks",  # rounds to 65504
        f"a16=65520.0 ArgumentError a16 | {_over('65520.0', 'f16', F16_OVER)}",  # rounds to inf
        f"a16=-70000 ArgumentError a16 | {_over('-70000', 'f16', F16_OVER)}",
        f"a16=1e+39 ArgumentError a16 | {_over('1e+39', 'f16', F16_OVER)}",
        f"a16={2**200} ArgumentError a16 | {_over(str(2**200)[:60] + '...', 'f16', F16_OVER)}",
        f"a16=np.float64(-1e+39) ArgumentError a16 | {_over('-1e+39', 'f16', F16_OVER)}",
        "a16=inf passed the checks",
        "a16=-inf passed the checks",
        "a16=nan passed the checks",
        f"a16=3.3895e+38 ArgumentError a16 | {_over('3.3895e+38', 'f16', F16_OVER)}",
        "ab16=65504.0 passed the checks",
        "ab16=65519.0 passed the checks",
        "ab16=65520.0 passed the checks",
        "ab16=-70000 passed the checks",
        f"ab16=1e+39 ArgumentError ab16 | {_over('1e+39', 'bf16', BF16_OVER)}",
        f"ab16={2**200} ArgumentError ab16 | {_over(str(2**200)[:60] + '...', 'bf16', BF16_OVER)}",
        f"ab16=np.float64(-1e+39) ArgumentError ab16 | {_over('-1e+39', 'bf16', BF16_OVER)}",
        "ab16=inf passed the checks",
        "ab16=-inf passed the checks",
        "ab16=nan passed the checks",
        "ab16=3.3895e+38 passed the checks",
    ]


def test_f32_and_f64_refuse_numbers_they_cannot_hold(built: Path) -> None:
    """f32 and f64 arguments and an f32 struct field: values that are no Python float (ints, numpy scalars) and struct fields."""
    out = _run(built, """
for value in (2**200, -2**200, 10**400, np.float64(1e39), np.float64(3.4028235e38), np.float32('inf')):
    fcheck(f'a32={value!r}', a32=value)
fcheck('a64=10**400', a64=10**400)
fcheck('a64=2**200', a64=2**200)
for value in (1e39, float('inf'), float('nan'), 3.4028235e38):
    fcheck(f'p.scale={value!r}', p={'scale': value, 'n': 1})
""")
    assert out == [
        f"a32={2**200} ArgumentError a32 | {_over(str(2**200)[:60] + '...', 'f32', F32_OVER)}",
        f"a32={-2**200} ArgumentError a32 | {_over(str(-2**200)[:60] + '...', 'f32', F32_OVER)}",
        f"a32={10**400} ArgumentError a32 | {_over(str(10**400)[:60] + '...', 'f32', F32_OVER)}",
        f"a32=np.float64(1e+39) ArgumentError a32 | {_over('1e+39', 'f32', F32_OVER)}",
        "a32=np.float64(3.4028235e+38) passed the checks",
        "a32=np.float32(inf) passed the checks",
        f"a64=10**400 ArgumentError a64 | {_over(str(10**400)[:60] + '...', 'f64', '1.7976931e+308')}",
        "a64=2**200 passed the checks",
        f"p.scale=1e+39 ArgumentError p | field 'scale': {_over('1e+39', 'f32', F32_OVER)}",
        "p.scale=inf passed the checks",
        "p.scale=nan passed the checks",
        "p.scale=3.4028235e+38 passed the checks",
    ]


def test_f32_refuses_python_floats_beyond_its_range(built: Path) -> None:
    out = _run(built, """
for value in (1e39, -1e39, 2.0**128 - 2.0**103, 1e308, 3.4028235e38, 2.0**128 - 2.0**104, float('inf'), float('nan')):
    fcheck(f'a32={value!r}', a32=value)
""")
    assert out == [
        f"a32=1e+39 ArgumentError a32 | {_over('1e+39', 'f32', F32_OVER)}",
        f"a32=-1e+39 ArgumentError a32 | {_over('-1e+39', 'f32', F32_OVER)}",
        # half a unit in the last place above FLT_MAX: rounds to inf (ties to even)
        f"a32=3.4028235677973366e+38 ArgumentError a32 | {_over('3.4028235677973366e+38', 'f32', F32_OVER)}",
        f"a32=1e+308 ArgumentError a32 | {_over('1e+308', 'f32', F32_OVER)}",
        "a32=3.4028235e+38 passed the checks",
        "a32=3.4028234663852886e+38 passed the checks",
        "a32=inf passed the checks",
        "a32=nan passed the checks",
    ]
