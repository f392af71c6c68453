"""Build test of the Python launchers' float scalar arguments (f32, f16, bf16, f64, and a struct's
f32 field): a finite value the type cannot hold (one that would round to infinity) is an
ArgumentError naming the type's largest finite value, whatever its Python type (float, int,
numpy.float64); infinity and NaN passed as such are taken. No GPU is needed: the checks run before
the launch, and arguments that pass them reach it and fail for want of a GPU (LaunchError)."""

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

SPEC = """module: floats
summary: A float scalar argument of each float type, and a struct with a float field.
sources: [kernels/floats.cu]
structs:
  Params:
    cpp: Params
    header: kernels/params.h
    fields:
      scale: f32
      n: u32
kernels:
  axpy:
    symbol: axpy_kernel
    summary: Reads one float scalar of each type.
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
"""

KERNELS = """#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include "params.h"

__global__ void axpy_kernel(float* y, float a32, __half a16, __nv_bfloat16 ab16, double a64, Params p, uint32_t n) {}
"""

PARAMS = """#ifndef FLOATS_PARAMS_H
#define FLOATS_PARAMS_H
#include <stdint.h>
struct Params {
  float scale;
  uint32_t n;
};
#endif
"""

PRELUDE = """
import numpy as np
import kernelgen_ops
import kernelgen_ops.hopper.floats as m

class A:
    __cuda_array_interface__ = {'data': (1 << 20, False), 'typestr': '<f4', 'shape': (64,), 'strides': None,
                                'version': 3}

def check(label, **over):
    args = dict(y=A(), a32=1.0, a16=1.0, ab16=1.0, a64=1.0, p={'scale': 1.0, 'n': 1}, n=64)
    args.update(over)
    try:
        m.axpy(**args)
        print(label, 'returned')
    except kernelgen_ops.ArgumentError as e:
        print(label, 'ArgumentError', e.argument, '|', str(e).split(': ', 2)[-1])
    except kernelgen_ops.LaunchError:
        print(label, 'passed the checks')
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = small_project(tmp_path_factory.mktemp("pyfloats") / "project",
                         {"specs/targets.yaml": TARGETS, "specs/floats.yaml": SPEC, "kernels/floats.cu": KERNELS,
                          "kernels/params.h": PARAMS})
    res = run_cli("build", "--target", "hopper", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def _run(built: Path, code: str) -> list[str]:
    return ops_python(built, PRELUDE + code)


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
        check(f'{name}={value!r}', **{name: value})
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
    """Values that are no Python float (ints, numpy scalars) and struct fields."""
    out = _run(built, """
for value in (2**200, -2**200, 10**400, np.float64(1e39), np.float64(3.4028235e38), np.float32('inf')):
    check(f'a32={value!r}', a32=value)
check('a64=10**400', a64=10**400)
check('a64=2**200', a64=2**200)
for value in (1e39, float('inf'), float('nan'), 3.4028235e38):
    check(f'p.scale={value!r}', p={'scale': value, 'n': 1})
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
    check(f'a32={value!r}', a32=value)
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
