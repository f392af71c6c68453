"""Build test of tests/fixtures/arrays (nullable, strided, read_only, vector, void and
pointer-array arguments; bool/f16/bf16/f64 scalars): nvcc accepts the launchers against the
kernels' signatures (float4, __half, const float* const*...), and the binding's argument checks
behave as documented without a GPU. The arrays are __cuda_array_interface__ objects and
integer pointers at made-up addresses: every check runs before the launch, and an argument
list that passes them all reaches the launch, which fails for want of a GPU (LaunchError)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cargo_tests_pass, contract_tests_pass, ops_python, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"

PRELUDE = """
import kernelgen_ops
import kernelgen_ops.hopper.arrays as m

class A:
    def __init__(self, typestr, shape, ptr=1 << 20, read_only=False, strides=None):
        self.__cuda_array_interface__ = {'data': (ptr, read_only), 'typestr': typestr, 'shape': shape,
                                         'strides': strides, 'version': 3}

def check(label, call):
    try:
        call()
        print(label, 'returned')
    except kernelgen_ops.ArgumentError as e:
        print(label, 'ArgumentError', e.argument, '|', str(e).split(': ', 2)[-1])
    except kernelgen_ops.LaunchError:
        print(label, 'passed the checks')
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("arrays") / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "arrays", root)
    res = run_cli("build", "--target", TARGET, cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def _run(built: Path, code: str) -> list[str]:
    return ops_python(built, PRELUDE + code)


def test_nullable_pointers(built: Path) -> None:
    out = _run(built, """
x = A('<f4', (4, 1024)); y = A('<f4', (4, 1024), ptr=2 << 20)
check('all null', lambda: m.layer_norm(x, None, y, 0, None, 4, 1024, 1e-5))
check('x null', lambda: m.layer_norm(None, None, y, None, None, 4, 1024, 1e-5))
check('y zero', lambda: m.layer_norm(x, None, 0, None, None, 4, 1024, 1e-5))
check('mean short', lambda: m.layer_norm(x, None, y, A('<f4', (3,)), None, 4, 1024, 1e-5))
""")
    assert out == [
        "all null passed the checks",
        "x null ArgumentError x | None is not a device pointer; the argument is not declared nullable",
        "y zero ArgumentError y | null device pointer (0); the argument is not declared nullable",
        "mean short ArgumentError mean | array has 3 elements but the kernel accesses 4 (of f32: 12 bytes, 16 needed)",
    ]


def test_a_device_scalar_check_without_a_gpu_reports_the_missing_driver_or_device(built: Path) -> None:
    """The launcher asks CUDA where a device scalar's pointer points; where CUDA cannot answer (no
    usable driver here, or no visible GPU) that is what it reports, as every launcher does, not a
    bad argument."""
    out = _run(built, """
try:
    m.fill_prefix(A('<f4', (1000,)), 1 << 20, 1.0, 1000)
    print('returned')
except kernelgen_ops.ArgumentError as e:
    print('ArgumentError', e)
except kernelgen_ops.LaunchError as e:
    print('LaunchError', e)
""")
    (line,) = out
    assert line.startswith("LaunchError fill_prefix: ") and "device scalar" not in line, line
    assert "no usable NVIDIA driver" in line or "no CUDA GPU is visible" in line, line


def test_strided_views_are_checked_by_their_span(built: Path) -> None:
    out = _run(built, """
out = A('<f4', (8,), ptr=3 << 20)
check('view', lambda: m.row_sum(A('<f4', (8, 16), strides=(256, 4)), out, 8, 16, 64))
check('short view', lambda: m.row_sum(A('<f4', (7, 16), strides=(256, 4)), out, 8, 16, 64))
check('negative', lambda: m.row_sum(A('<f4', (8, 16), strides=(-256, 4)), out, 8, 16, 64))
check('odd strides', lambda: m.row_sum(A('<f4', (8, 16), strides=(258, 4)), out, 8, 16, 64))
check('contiguous', lambda: m.row_sum(A('<f4', (464,)), out, 8, 16, 64))
check('needs contiguous', lambda: m.layer_norm(A('<f4', (4, 1024), strides=(8192, 4)), None,
                                               A('<f4', (4096,)), None, None, 4, 1024, 1e-5))
""")
    assert out == [
        "view passed the checks",
        "short view ArgumentError x | array spans 400 elements but the kernel accesses 464 (of f32: 1600 bytes, "
        "1856 needed)",
        "negative ArgumentError x | array has a negative stride; views with non-negative strides are accepted",
        "odd strides ArgumentError x | strides are not whole items",
        "contiguous passed the checks",
        "needs contiguous ArgumentError x | array is not C-contiguous",
    ]


def test_read_only_arguments_accept_read_only_arrays(built: Path) -> None:
    out = _run(built, """
table = A('<f4', (32, 8), read_only=True); idx = A('<i4', (4,)); o = A('<f4', (4, 8), ptr=2 << 20)
check('read-only table', lambda: m.gather(table, idx, o, 4, 8))
check('read-only out', lambda: m.gather(table, idx, A('<f4', (4, 8), read_only=True), 4, 8))
check('read-only pointer array', lambda: m.sum_rows(A('<i8', (3,), read_only=True), o, 3, 32))
""")
    assert out == [
        "read-only table passed the checks",
        "read-only out ArgumentError out | array is read-only but the kernel writes it",
        "read-only pointer array passed the checks",
    ]


def test_vectors_void_and_pointer_arrays(built: Path) -> None:
    out = _run(built, """
y = A('<f4', (4096,), ptr=2 << 20)
check('float4', lambda: m.scale4(A('<f4', (4096,)), y, 1.0, 1024))
check('float4 too few', lambda: m.scale4(A('<f4', (4096,)), y, 1.0, 1025))
check('float4 partial', lambda: m.scale4(A('<f4', (4094,)), y, 1.0, 1))
check('float4 misaligned', lambda: m.scale4(A('<f4', (4096,), ptr=(1 << 20) + 4), y, 1.0, 1024))
check('float4 int misaligned', lambda: m.scale4((1 << 20) + 8, y, 1.0, 1024))
check('float4 wrong dtype', lambda: m.scale4(A('<f2', (4096,)), y, 1.0, 1024))
check('void', lambda: m.byte_copy(A('<f8', (512,)), A('|u1', (4096,), ptr=2 << 20), 4096))
check('void short', lambda: m.byte_copy(A('<f8', (511,)), A('|u1', (4096,), ptr=2 << 20), 4096))
check('bf16x2', lambda: m.add_bf16x2(A('<V2', (1024,)), A('<V2', (1024,), ptr=(1 << 20) + 4096),
                                      A('<V2', (1024,), ptr=2 << 20), 512))
check('bf16x2 misaligned', lambda: m.add_bf16x2(A('<V2', (1024,), ptr=(1 << 20) + 2), A('<V2', (1024,)),
                                                 A('<V2', (1024,), ptr=2 << 20), 512))
check('pointers', lambda: m.sum_rows(A('<i8', (3,)), A('<f4', (256,), ptr=2 << 20), 3, 256))
check('pointers u64', lambda: m.sum_rows(A('<u8', (3,)), A('<f4', (256,), ptr=2 << 20), 3, 256))
check('pointers short', lambda: m.sum_rows(A('<i8', (2,)), A('<f4', (256,), ptr=2 << 20), 3, 256))
check('pointers f8', lambda: m.sum_rows(A('<f8', (3,)), A('<f4', (256,), ptr=2 << 20), 3, 256))
""")
    assert out == [
        "float4 passed the checks",
        "float4 too few ArgumentError x | array has 1024 elements but the kernel accesses 1025 (of f32x4: 16384 bytes, "
        "16400 needed)",
        "float4 partial ArgumentError x | array has 4094 lanes, not a multiple of the 4 of one f32x4 element",
        "float4 misaligned ArgumentError x | data pointer 0x100004 is not 16-byte aligned, as f32x4 elements need",
        "float4 int misaligned ArgumentError x | device pointer 0x100008 is not 16-byte aligned, as f32x4 elements need",
        "float4 wrong dtype ArgumentError x | expected f32x4 elements (typestr <f4), got typestr <f2",
        "void passed the checks",
        "void short ArgumentError src | array has 4088 elements but the kernel accesses 4096 (of void: 4088 bytes, "
        "4096 needed)",
        "bf16x2 passed the checks",
        "bf16x2 misaligned ArgumentError a | data pointer 0x100002 is not 4-byte aligned, as bf16x2 elements need",
        "pointers passed the checks",
        "pointers u64 passed the checks",
        "pointers short ArgumentError rows | array has 2 elements but the kernel accesses 3 (of ptr: 16 bytes, "
        "24 needed)",
        "pointers f8 ArgumentError rows | expected ptr elements (typestr <i8), got typestr <f8",
    ]


def test_more_vector_element_types_are_checked(built: Path) -> None:
    """uint4, int2 and uchar4 (u32x4, i32x2, u8x4): arrays of the lane type, whole vectors,
    aligned to the vector."""
    out = _run(built, """
def ok(**k):
    args = dict(a=A('<u4', (4000,)), out=A('<u4', (4000,), ptr=2 << 20), p=A('<i4', (2000,), ptr=3 << 20),
                sums=A('<i4', (1000,), ptr=4 << 20), px=A('|u1', (4000,), ptr=5 << 20),
                luma=A('<u4', (1000,), ptr=6 << 20), n=1000)
    args.update(k)
    return lambda: m.vec_mix(**args)
check('vectors', ok())
check('uint4 misaligned', ok(a=A('<u4', (4000,), ptr=(1 << 20) + 4)))
check('uint4 signed', ok(a=A('<i4', (4000,))))
check('int2 partial', ok(p=A('<i4', (1999,), ptr=3 << 20)))
check('uchar4 short', ok(px=A('|u1', (3996,), ptr=5 << 20)))
""")
    assert out == [
        "vectors passed the checks",
        "uint4 misaligned ArgumentError a | data pointer 0x100004 is not 16-byte aligned, as u32x4 elements need",
        "uint4 signed ArgumentError a | expected u32x4 elements (typestr <u4), got typestr <i4",
        "int2 partial ArgumentError p | array has 1999 lanes, not a multiple of the 2 of one i32x2 element",
        "uchar4 short ArgumentError px | array has 999 elements but the kernel accesses 1000 (of u8x4: 3996 bytes, "
        "4000 needed)",
    ], out


def test_bool_arrays_are_checked(built: Path) -> None:
    """bool*: arrays of booleans (typestr |b1), a byte each; bytes of another type are refused."""
    out = _run(built, """
c = A('<u4', (1,), ptr=2 << 20)
check('bools', lambda: m.mask_count(A('|b1', (1000,)), c, 1000))
check('bools short', lambda: m.mask_count(A('|b1', (999,)), c, 1000))
check('bytes', lambda: m.mask_count(A('|u1', (1000,)), c, 1000))
""")
    assert out == [
        "bools passed the checks",
        "bools short ArgumentError mask | array has 999 elements but the kernel accesses 1000 (of bool: 999 bytes, "
        "1000 needed)",
        "bytes ArgumentError mask | expected bool elements (typestr |b1), got typestr |u1",
    ], out
    header = (built / "generated" / TARGET / "include" / "kernelgen" / "arrays.h").read_text()
    assert "kernelgen::Outcome mask_count(const bool* mask, uint32_t* count, uint32_t n," in header


def test_float3_arrays_are_checked(built: Path) -> None:
    """f32x3 (float3): arrays of f32, three lanes a point, aligned to 4 bytes (not 12 or 16)."""
    out = _run(built, """
norms = A('<f4', (1000,), ptr=2 << 20)
check('points', lambda: m.point_norms(A('<f4', (1000, 3)), norms, 1000))
check('points at 4 bytes', lambda: m.point_norms(A('<f4', (3000,), ptr=(1 << 20) + 4), norms, 1000))
check('points partial', lambda: m.point_norms(A('<f4', (2999,)), norms, 1000))
check('points short', lambda: m.point_norms(A('<f4', (2997,)), norms, 1000))
check('points at 2 bytes', lambda: m.point_norms(A('<f4', (3000,), ptr=(1 << 20) + 2), norms, 1000))
""")
    assert out == [
        "points passed the checks",
        "points at 4 bytes passed the checks",
        "points partial ArgumentError pts | array has 2999 lanes, not a multiple of the 3 of one f32x3 element",
        "points short ArgumentError pts | array has 999 elements but the kernel accesses 1000 (of f32x3: 11988 bytes, "
        "12000 needed)",
        "points at 2 bytes ArgumentError pts | data pointer 0x100002 is not 4-byte aligned, as f32x3 elements need",
    ], out


def test_void_pointers_to_the_kernels_own_types(built: Path) -> None:
    """particle_com's kernel takes const Particle* and float3*; its spec's void* builds (the
    signature check takes any object pointer for void*) and counts bytes."""
    src = (built / "generated" / TARGET / "src" / "arrays.cu").read_text()
    assert "(kg::arg<kg_f, 0>(ps), kg::arg<kg_f, 1>(out), kg::arg<kg_f, 2>(n))" in src
    out = _run(built, """
check('bytes', lambda: m.particle_com(A('<f4', (400,)), A('<f4', (3,), ptr=2 << 20), 100))
check('short', lambda: m.particle_com(A('<f4', (399,)), A('<f4', (3,), ptr=2 << 20), 100))
""")
    assert out == ["bytes passed the checks",
                   "short ArgumentError ps | array has 1596 elements but the kernel accesses 1600 (of void: 1596 "
                   "bytes, 1600 needed)"], out


def test_scalars_and_bool_plans(built: Path) -> None:
    out = _run(built, """
o = A('<f4', (4,)); o64 = A('<f8', (2,), ptr=2 << 20)
for flag in (True, 0, 1):
    check(f'flag {flag!r}', lambda: m.scalars(o, o64, flag, 1.0, 1.0, 1.0, 1.0, 1))
for flag in (2, 1.0, None):
    check(f'flag {flag!r}', lambda: m.scalars(o, o64, flag, 1.0, 1.0, 1.0, 1.0, 1))
check('f16 text', lambda: m.scalars(o, o64, True, 'x', 1.0, 1.0, 1.0, 1))
check('f16 huge', lambda: m.scalars(o, o64, True, 1e300, -1e300, 1e300, 1.0, 1))
print(m.scalars.plan(flag=True, reps=0)['launched'], m.scalars.plan(flag=False, reps=0)['reason'])
print(m.scalars(o, o64, False, 1.0, 1.0, 1.0, 1.0, 0).reason)
""")
    assert out == [
        "flag True passed the checks",
        "flag 0 passed the checks",
        "flag 1 passed the checks",
        "flag 2 ArgumentError flag | expected a bool (True, False, 0 or 1), got int",
        "flag 1.0 ArgumentError flag | expected a bool (True, False, 0 or 1), got float",
        "flag None ArgumentError flag | expected a bool (True, False, 0 or 1), got NoneType",
        "f16 text ArgumentError h | expected a number, got str",
        "f16 huge ArgumentError h | 1e+300 is out of range for f16 (finite values up to 65504 in magnitude; pass "
        "float('inf') for infinity)",
        "True scalars: not launched: (flag == 1) or (reps > 0) is false",
        "scalars: not launched: (flag == 1) or (reps > 0) is false",
    ]


def test_numpy_bools_are_bools(built: Path) -> None:
    """numpy.bool (numpy 1's numpy.bool_) is a bool argument's value, in launches and plans, and is
    refused where an integer or a real number is expected, as a Python bool is."""
    out = _run(built, """
import numpy as np
o = A('<f4', (4,)); o64 = A('<f8', (2,), ptr=2 << 20)
check('np.bool_ flag', lambda: m.scalars(o, o64, np.bool_(True), 1.0, 1.0, 1.0, 1.0, 1))
print(m.scalars.plan(flag=np.bool_(True), reps=0)['launched'], m.scalars.plan(flag=np.bool_(False), reps=0)['launched'])
check('np.bool_ f32', lambda: m.scalars(o, o64, True, 1.0, 1.0, 1.0, np.bool_(True), 1))
check('np.bool_ u32', lambda: m.scalars(o, o64, True, 1.0, 1.0, 1.0, 1.0, np.bool_(True)))
""")
    assert out == [
        "np.bool_ flag passed the checks",
        "True False",
        "np.bool_ f32 ArgumentError f | expected f32, got numpy.bool",
        "np.bool_ u32 ArgumentError reps | expected u32, got numpy.bool",
    ], out


def test_plans_need_only_the_integers_their_expressions_use(built: Path) -> None:
    """plan() requires the integer arguments the plan's expressions read, as `kernelgen plan`
    asks for; the other scalars (floats too, checked as a launch checks them) may be left out or
    given (None included); its docstring and signature list them, and its errors name plan()
    and the argument's own type."""
    out = _run(built, """
import inspect
print(m.narrow_ints.plan(n=1000, scale8=-3)['launched'], m.narrow_ints.plan(n=1000, scale8=0)['launched'],
      m.narrow_ints.plan(n=1000, scale8=-3, flag=1, shift=None)['launched'])
print(m.spelled_ints.plan(n=8)['sizes'])
print(m.scalars.plan(flag=True, reps=0, h=1.0, b=-2.5, d=1e300, f=0.25)['launched'],
      m.scalars.plan(flag=False, reps=0, d=None)['launched'])
for call in (lambda: m.narrow_ints.plan(n=1000), lambda: m.narrow_ints.plan(n=1000, scale8=1, m=2),
             lambda: m.scalars.plan(flag=True, reps=0, out=1), lambda: m.scalars.plan(flag=True, reps=0, h=1e6),
             lambda: m.scalars.plan(flag=True, reps=0, f='x'),
             lambda: m.narrow_ints.plan(n=1000, scale8=1, flag=300)):
    try:
        call()
    except TypeError as e:
        print(type(e).__name__, e)
print(inspect.signature(m.narrow_ints.plan), inspect.signature(m.plan_axpy))
print(m.narrow_ints.plan.__doc__.splitlines()[-1])
print(m.axpy.plan.__doc__.splitlines()[-1])
""")
    assert out == [
        "True False True",
        "{'x': 8, 'out': 8, 'count': 1}",
        "True False",
        "TypeError plan of narrow_ints() missing required argument 'scale8'",
        "TypeError plan of narrow_ints() got an unexpected keyword argument 'm'",
        "TypeError plan of scalars() takes scalar arguments only; got pointer 'out'",
        "ArgumentError scalars: argument 'h': 1000000.0 is out of range for f16 (finite values up to 65504 in "
        "magnitude; pass float('inf') for infinity)",
        "ArgumentError scalars: argument 'f': expected a number, got str",
        "ArgumentError narrow_ints: argument 'flag': 300 is out of range for u8 [0, 2**8-1]",
        "(*, flag=None, scale8, n, shift=None) (*, n, alpha=None, T=None)",
        "Arguments: flag (u8, not used by the plan: may be left out); scale8 (i8); n (u16); shift (i16, not used by "
        "the plan: may be left out).",
        "Arguments: n (u32); alpha (f64, not used by the plan: may be left out); T (an element type name: 'f32', "
        "'f16', 'bf16', 'f64'; left out: every instance is considered).",
    ], out


def test_launchers_have_signatures_and_requires_errors_name_their_argument(built: Path) -> None:
    """inspect.signature(launcher): the arguments in order, typed as the docstring spells them (a
    nullable pointer `| None`); a requires clause that names one argument gives the ArgumentError
    that argument, one naming several none; outcomes are immutable."""
    out = _run(built, """
import inspect
print(inspect.signature(m.layer_norm))
print(m.layer_norm.__doc__.splitlines()[0])
check('act 5', lambda: m.apply_act(A('<f4', (1000,)), 5, 1000))
check('cols > row_stride', lambda: m.row_sum(A('<f4', (10000,)), A('<f4', (8,)), 8, 65, 64))
o = m.scalars(A('<f4', (4,)), A('<f8', (2,), ptr=2 << 20), False, 1.0, 1.0, 1.0, 1.0, 0)
for change in (lambda: setattr(o, 'launched', True), lambda: delattr(o, 'reason')):
    try:
        change()
    except AttributeError as e:
        print(e)
print(o.launched, m.scalars(A('<f4', (4,)), A('<f8', (2,), ptr=2 << 20), False, 1.0, 1.0, 1.0, 1.0, 0) is o)
""")
    assert out == [
        "(x: 'const f32*', weight: 'const f32* | None', y: 'f32*', mean: 'f32* | None', rstd: 'f32* | None', "
        "rows: 'u32', cols: 'u32', eps: 'f32', *, stream=None) -> 'Outcome'",
        "(x: const f32*, weight: const f32* | None, y: f32*, mean: f32* | None, rstd: f32* | None, rows: u32, "
        "cols: u32, eps: f32, *, stream=None) -> Outcome",
        "act 5 ArgumentError act | requires act <= 2",
        "cols > row_stride ArgumentError None | requires cols <= row_stride",
        "Outcome is read-only (cannot change 'launched'): launchers return the same Outcome object from many calls",
        "Outcome is read-only (cannot change 'reason'): launchers return the same Outcome object from many calls",
        "False True",
    ], out


def test_the_package_is_typed(built: Path) -> None:
    """The install carries PEP 561's py.typed and each module's stub beside the package's __init__,
    so type checkers read `from kernelgen_ops import arrays` as the module's stub."""
    pkg = built / "bindings" / "kernelgen_ops"
    assert (pkg / "py.typed").is_file()
    assert (pkg / "arrays.pyi").read_text() == (pkg / TARGET / "arrays.pyi").read_text()


def test_narrow_integer_scalars_are_range_checked(built: Path) -> None:
    """u8, i8, u16 and i16 scalars take the integers their type holds, and refuse the ones beside
    its range with the argument's name; plans take them as integers in expressions."""
    out = _run(built, """
x = A('<i4', (1000,)); o = A('<i4', (1000,), ptr=2 << 20)
for label, args in (('ok', (255, -128, 1000, -32768)), ('u8 256', (256, 1, 1000, 0)), ('u8 -1', (-1, 1, 1000, 0)),
                    ('i8 128', (0, 128, 1000, 0)), ('i8 -129', (0, -129, 1000, 0)), ('u16 65536', (0, 1, 65536, 0)),
                    ('i16 32768', (0, 1, 1000, 32768))):
    check(label, lambda: m.narrow_ints(x, o, *args))
print(m.narrow_ints.plan(flag=1, scale8=0, n=1000, shift=0)['reason'])
print(m.narrow_ints.plan(flag=1, scale8=-1, n=65535, shift=0)['grid'])
""")
    assert out[0] == "ok passed the checks", out
    for line, (name, value) in zip(out[1:7], [("flag", 256), ("flag", -1), ("scale8", 128), ("scale8", -129),
                                             ("n", 65536), ("shift", 32768)]):
        assert line.startswith(f"{line.split(' ArgumentError')[0]} ArgumentError {name} | "), line
        assert str(value) in line, line
    assert out[7] == "narrow_ints: not launched: scale8 != 0 is false", out
    assert out[8] == "(512, 1, 1)", out


def test_overloaded_kernels_take_the_specs_overload(built: Path) -> None:
    """add_value is overloaded (f32, f64): each spec's launcher names the overload with its
    parameters through kg::pick, in the signature checks, the launch and the occupancy query."""
    src = (built / "generated" / TARGET / "src" / "arrays.cu").read_text()
    assert "constexpr auto kg_kernel_add_value_f64_0 = kg::pick<kg_signature_add_value_f64>(&::add_value, 0);" in src
    assert "kg::same_arity_v<std::remove_const_t<decltype(::kg_kernel_add_value_f64_0)>, " in src
    assert "cudaLaunchKernelEx(&kg_cfg, ::kg_kernel_add_value_f64_0, x, " in src
    assert "reinterpret_cast<const void*>(::kg_kernel_add_value_f64_0)" in src
    out = _run(built, """
print(m.add_value_f32.plan(n=1000)['grid'], m.add_value_f64.plan(n=132 * 8 * 256)['grid'])
print(m.add_value_f64.plan(n=132 * 8 * 256 + 1)['reason'])
""")
    assert out == ["(4, 1, 1) (1056, 1, 1)", "add_value_f64: the cooperative grid has more blocks than can be "
                   "co-resident (device.sm_count * kernel.blocks_per_sm)"], out


def test_a_float_scalar_of_the_element_type(built: Path) -> None:
    """axpy's alpha is '{T}': each instance takes its element type's scalar, the dispatcher a
    Python float (a double in C), refused when it is not a number."""
    out = _run(built, """
print(m.axpy.__doc__.splitlines()[0])
print(m.axpy_f16.__doc__.splitlines()[0])
print(m.axpy.plan(n=1000, T='bf16')['kernel'])
x = A('<f2', (1000,)); y = A('<f2', (1000,), ptr=2 << 20)
check('alpha str', lambda: m.axpy(1000, 'a', x, y))
check('alpha float', lambda: m.axpy(1000, 0.5, x, y))
""")
    assert out == [
        "(n: u32, alpha: f32|f16|bf16|f64, x: const f32|f16|bf16|f64*, y: f32|f16|bf16|f64*, *, stream=None) -> Outcome",
        "(n: u32, alpha: f16, x: const f16*, y: f16*, *, stream=None) -> Outcome",
        "axpy_bf16",
        "alpha str ArgumentError alpha | expected a number, got str",
        "alpha float passed the checks",
    ], out


def test_a_chain_over_float_types_takes_a_double(built: Path) -> None:
    """add_value_any's members take v as f32 and f64: the chain takes a double, narrowed for the f32
    member, and picks the member by x's dtype."""
    src = (built / "generated" / TARGET / "src" / "arrays.cu").read_text()
    assert "add_value_f32(static_cast<float*>(x), n, static_cast<float>(v), stream)" in src
    out = _run(built, """
print(m.add_value_any.__doc__.splitlines()[0])
print(m.add_value_any.plan(n=1000, x='f64')['kernel'], m.add_value_any.plan(n=1000, x='f32')['kernel'])
check('f64 array', lambda: m.add_value_any(A('<f8', (1000,)), 1000, 0.1))
print(m.add_value_any(A('<f2', (1000,)), 1000, 0.1).reason)
""")
    assert out[:3] == [
        "(x: f32|f64*, n: u32, v: f32|f64, *, stream=None) -> Outcome",
        "add_value_f64 add_value_f32",
        "f64 array passed the checks",
    ], out
    assert out[3] == "add_value_any: not launched: no instantiation for this dtype (x)", out


def test_generated_contract_tests_pass(built: Path) -> None:
    contract_tests_pass(built, TARGET, least=10)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_rust_crate_tests_pass(built: Path, tmp_path: Path) -> None:
    """The fixture's Rust crate (bool plans, f16/bf16 bits, f64 scalars, nullable pointers) against
    its built library: plans, not-launched reasons and null-pointer errors, without a GPU."""
    res = cargo_tests_pass(built, TARGET, tmp_path / "t")
    out = res.stdout + res.stderr
    assert "warning" not in res.stderr, out[-3000:]
    assert sum(int(n) for n in re.findall(r"test result: ok\. (\d+) passed", out)) >= 20, out[-2000:]
    assert "test layer_norm_null_pointer ... ok" in out, out[-3000:]  # x (not nullable) refuses null


def test_a_draft_of_the_fixtures_kernels_builds(tmp_path: Path) -> None:
    """`kernelgen draft` of the fixture's source (overloads, an enum, pointer arrays, vector and
    8/16-bit types, long long spellings), plus a kernel without parameters, builds as drafted:
    the build's per-parameter checks agree with every drafted argument, and the drafted
    launchers plan and pass their generated contract tests."""
    root = tmp_path / "drafted"
    (root / "specs").mkdir(parents=True)
    (root / "kernels").mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "arrays" / "specs" / "targets.yaml", root / "specs")
    source = (REPO / "tests" / "fixtures" / "arrays" / "kernels" / "arrays.cu").read_text()
    (root / "kernels" / "arrays.cu").write_text(
        source + "\n__device__ unsigned g_bumps;\n__global__ void bump_kernel() { atomicAdd(&g_bumps, 1u); }\n"
        # CUDA's vector types by value (__half2 declares copy operations), dynamic shared memory,
        # and an explicit instantiation of a template kernel
        "#include <cuda_fp16.h>\n"
        "__global__ void vec_args_kernel(__half2 h, float2 f, float* out, unsigned n) {\n"
        "  extern __shared__ float red[];\n"
        "  red[threadIdx.x] = __low2float(h) * f.x + f.y;\n"
        "  if (threadIdx.x < n) out[threadIdx.x] = red[threadIdx.x];\n}\n"
        "template <int B> __global__ void fill_b_kernel(float* out, unsigned n) {\n"
        "  if (threadIdx.x < n) out[threadIdx.x] = B;\n}\n"
        "template __global__ void fill_b_kernel<8>(float*, unsigned);\n"
        # a template kernel its own host code launches: the geometry and the instances from the launches
        "template <int block_size> __global__ void rows_kernel(const float* x, float* y, int ncols) {\n"
        "  y[blockIdx.x * ncols + threadIdx.x] = x[blockIdx.x * ncols + threadIdx.x] * block_size;\n}\n"
        "void rows_cuda(const float* x, float* y, int ncols, int nrows, cudaStream_t stream) {\n"
        "  if (ncols < 1024) {\n    const dim3 b(32, 1, 1);\n"
        "    rows_kernel<32><<<nrows, b, 0, stream>>>(x, y, ncols);\n"
        "  } else {\n    const dim3 b(1024, 1, 1);\n"
        "    rows_kernel<1024><<<nrows, b, 0, stream>>>(x, y, ncols);\n  }\n}\n")
    res = run_cli("draft", "kernels/arrays.cu", "--write", "--module", "drafted", cwd=root)
    assert res.returncode == 0, res.stderr
    spec = (root / "specs" / "drafted.yaml").read_text()
    assert "  add_value_f32:\n    symbol: add_value\n" in spec and "      act: i32  # enum Act\n" in spec
    assert "  bump:\n    symbol: bump_kernel\n" in spec and "    args: {}\n" in spec
    assert "  half2: {cpp: __half2, fields: {x: f16, y: f16}, align: 4}\n" in spec, spec
    assert "  float2: {cpp: float2, fields: {x: f32, y: f32}, align: 8}\n" in spec, spec
    assert '    shared_mem: "256 * 4"  # check: the bytes of its extern __shared__ float array\n' in spec, spec
    assert spec.count("symbol: \"fill_b_kernel<{B}>\"") == 1 and "fill_b_f32" not in spec, spec
    assert "      B: [8]  # the source's explicit instantiations\n" in spec, spec
    # the if / else between the instances: a kernel each with its applies_if, and a chain of them
    assert "      block_size: [32]  # the source's launches" in spec and "      block_size: [1024]  # the source's " \
        "launches" in spec, spec
    assert '    applies_if: ["ncols < 1024"]  # as the source' in spec and '    applies_if: ["not (ncols < 1024)"]' in spec
    assert spec.endswith("\n  rows: [rows_1, rows_2]\n"), spec
    assert "    host_args:  # the launching function's integers the launch uses\n      nrows: i32\n" in spec, spec
    assert "    grid: [nrows, 1, 1]  # as the source's launch at line" in spec and "    block: [block_size, 1, 1]\n" \
        in spec, spec
    res = run_cli("build", "--target", TARGET, "--no-torch-reader", "--no-link", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    env = dict(os.environ, KERNELGEN_OPS_PATH=str(root / "bindings" / "kernelgen_ops"), KERNELGEN_REQUIRE_BUILT="1",
               CUDA_VISIBLE_DEVICES="")
    res = subprocess.run([sys.executable, "-c",
                          "import kernelgen_ops.hopper.drafted as m\n"
                          "print(m.bump.plan()['launched'], m.spelled_ints.plan(bias=1, n=1000)['grid'])\n"
                          "print(m.bump.__doc__.splitlines()[0])\n"
                          "p = m.rows.plan(ncols=4096, nrows=7)\n"
                          "print(p['kernel'], p['grid'], p['block'], m.rows.plan(ncols=100, nrows=3)['kernel'])\n"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["True (4, 1, 1)", "(*, stream=None) -> Outcome",
                                       "rows_1024 (7, 1, 1) (1024, 1, 1) rows_32"], res.stdout
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"generated/{TARGET}/tests"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert re.search(r"\b\d{2,} passed", res.stdout), res.stdout[-500:]
