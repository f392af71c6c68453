"""Build test of the launchers as Python objects, on a small project written here: a kernel's
launcher and a dispatcher copy and deepcopy to themselves and pickle by reference (unpickled in
another process, they are that process's launchers), and ``import kernelgen_ops.<module>`` gives
the chosen target's module. No GPU is needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ops_env, ops_python, small_project

pytestmark = pytest.mark.build

TARGETS = """hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
"""

SPEC = """module: objs
summary: A kernel and a dispatcher, for the launchers' object protocols.
sources: [kernels/objs.cu]
kernels:
  scale_f32:
    symbol: scale_kernel
    summary: Scales an array.
    args:
      x: {type: f32*, size: n}
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 64}
  widen:
    symbol: widen_kernel<{T}>
    summary: Widens values to float.
    instantiate:
      T: [f16, bf16]
    args:
      x: {type: "const {T}*", size: n}
      y: {type: f32*, size: n}
      n: u32
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 64}
"""

KERNELS = """#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__global__ void scale_kernel(float* x, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.f;
}

template <typename T>
__global__ void widen_kernel(const T* x, float* y, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(x[i]);
}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import run_cli

    root = small_project(tmp_path_factory.mktemp("objs") / "project",
                         {"specs/targets.yaml": TARGETS, "specs/objs.yaml": SPEC, "kernels/objs.cu": KERNELS})
    res = run_cli("build", "--target", "hopper", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root


def test_launchers_copy_to_themselves_and_pickle_by_reference(built: Path) -> None:
    out = ops_python(built, """
import copy, pickle, sys
import kernelgen_ops.hopper.objs as m
for name in ('scale_f32', 'widen', 'widen_f16', 'plan_widen'):
    f = getattr(m, name)
    back = [pickle.loads(pickle.dumps(f, protocol=p)) for p in range(pickle.HIGHEST_PROTOCOL + 1)]
    print(name, copy.copy(f) is f, copy.deepcopy(f) is f, copy.deepcopy([f])[0] is f, all(b is f for b in back))
sys.stdout.buffer.write(pickle.dumps([m.scale_f32, m.widen, m.plan_widen]).hex().encode() + b'\\n')
""")
    assert out[:4] == [f"{n} True True True True" for n in ("scale_f32", "widen", "widen_f16", "plan_widen")]
    # another process (which has not imported the module) unpickles them as its own launchers
    code = ("import pickle, sys\nfs = pickle.loads(bytes.fromhex(sys.argv[1]))\nimport kernelgen_ops.hopper.objs as m\n"
            "print([f is g for f, g in zip(fs, (m.scale_f32, m.widen, m.plan_widen))], fs[0].plan(n=64)['grid'])\n")
    res = subprocess.run([sys.executable, "-c", code, out[4]], env=dict(ops_env(built), CUDA_VISIBLE_DEVICES=""),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["[True, True, True] (1, 1, 1)"]


def test_the_chosen_targets_module_imports_by_the_package_name(built: Path) -> None:
    code = """
import kernelgen_ops.objs
from kernelgen_ops.objs import scale_f32
import kernelgen_ops.hopper.objs as real
print(kernelgen_ops.objs is real, scale_f32 is real.scale_f32, real.__spec__.name, real.__name__)
"""
    res = subprocess.run([sys.executable, "-c", code], env=dict(ops_env(built), CUDA_VISIBLE_DEVICES="",
                                                                 KERNELGEN_TARGET="hopper"),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["True True kernelgen_ops.hopper.objs kernelgen_ops.hopper.objs"]
    # without a GPU and no target named, the import says why no target can be chosen
    no_target = ops_python(built, "import kernelgen_ops\ntry:\n    import kernelgen_ops.objs\nexcept "
                                  "kernelgen_ops.TargetError as e:\n    print(str(e).split(',')[0])\n")
    assert no_target == ["kernelgen_ops: no CUDA GPU is visible (no GPU"]
