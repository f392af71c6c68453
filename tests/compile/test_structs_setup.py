"""Build test of the structs_setup fixture project (tests/fixtures/structs_setup) for one target:
it builds (template-id symbols, structs by value, a zeroed counter, a __constant__ value, two
modules including one header that defines a host function and a kernel), its generated contract
tests pass without a GPU, the modules' own symbols stay local to them, and a struct whose spec
disagrees with the C++ type fails the (incremental) rebuild naming the spec's file:line. (How a
symbol that does not compile is named by its spec's line is unit-tested on nvcc's message
format, tests/unit/test_structs_setup_spec.py, to keep this to one build.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, contract_tests_pass, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"
FIXTURE = REPO / "tests" / "fixtures" / "structs_setup"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("structs_setup") / "project"
    shutil.copytree(FIXTURE, root)
    res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
    return root


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if needle in ln)


def test_contract_tests_pass_without_gpu(built: Path) -> None:
    contract_tests_pass(built, TARGET, least=10)
    assert "struct_corr_fields_are_checked" in (built / "generated" / TARGET / "tests" /
                                                 f"test_rope_yarn_{TARGET}_contract.py").read_text()


def test_shared_header_symbols_are_local_to_each_module(built: Path) -> None:
    lib = next((built / "bindings" / "kernelgen_ops" / TARGET).glob(f"libkernelgen_{TARGET}_*.so"))
    dynamic = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    assert "kg_hdr_a__ramp_a" in dynamic and "kg_hdr_b__fill_b" in dynamic
    assert "_ZN9kernelgen9rope_yarn9rope_yarnE" in dynamic  # the C++ API is exported too
    assert "sizeof_dtype" not in dynamic and "fill_value_kernel" not in dynamic
    local = subprocess.run(["nm", str(lib)], capture_output=True, text=True).stdout
    copies = [ln for ln in local.splitlines() if ln.endswith(" _Z12sizeof_dtype5DType")]
    assert len(copies) == 2 and all(" t " in ln for ln in copies), copies  # one local copy per module


def test_stateless_functors_are_passed_by_the_launchers(built: Path) -> None:
    """A functor taken by value and declared without fields is no argument of any launcher: the
    C++ launch passes ``Op{}`` in its place, and Python, C and the plans never see it."""
    src = (built / "generated" / TARGET / "src" / "act.cu").read_text()
    assert "(::ops::SiluOp{}, x, out, kg::arg<kg_f, 3>(n))" in src
    assert "(x, out, kg::arg<kg_f, 2>(n), s, ::ops::GeluTanhOp{})" in src
    assert "static_assert(std::is_empty_v<kg_struct_silu_op>" in src
    header = (built / "generated" / TARGET / "include" / "kernelgen" / "act.h").read_text()
    assert "Outcome scaled_gelu(const float* x, float* out, uint32_t n, float s, cudaStream_t stream" in header
    assert "SiluOp" not in header and "GeluTanhOp" not in header
    c_header = (built / "generated" / TARGET / "include" / "kernelgen" / "act_c.h").read_text()
    assert "silu_op" not in c_header and "gelu_op" not in c_header
    res = subprocess.run(
        [sys.executable, "-c",
         "import kernelgen_ops.hopper.act as m\n"
         "print(m.apply_silu.__doc__.splitlines()[0])\n"
         "print(m.scaled_gelu.__doc__.splitlines()[0])\n"
         "print(m.apply_silu.plan(n=1000, T='f32')['kernel'])\n"
         "import kernelgen_ops\n"
         "try:\n"
         "    m.scaled_gelu(0x10000, 0x20000, 16, 1.0, {})\n"
         "except TypeError as e:\n"
         "    print('TypeError', e)\n"],
        cwd=built, env=dict(os.environ, KERNELGEN_OPS_PATH=str(built / "bindings" / "kernelgen_ops")),
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[:3] == [
        "(x: const bf16|f32*, out: bf16|f32*, n: u32, *, stream=None) -> Outcome",
        "(x: const f32*, out: f32*, n: u32, s: f32, *, stream=None) -> Outcome",
        "apply_silu_f32",
    ], res.stdout
    assert res.stdout.splitlines()[3].startswith("TypeError"), res.stdout


@pytest.mark.parametrize(("old", "new", "needle", "message"), [
    # bias before pos_offset: same size and alignment as the C++ struct, other offsets
    ("      pos_offset: i64\n      bias: f32[2]\n", "      bias: f32[2]\n      pos_offset: i64\n", "bias: f32[2]",
     "field 'bias' is not at offset 20"),
    # bias declared i32[2]: the same offsets and sizes, another kind of value
    ("      bias: f32[2]\n", "      bias: i32[2]\n", "bias: i32[2]",
     "field 'bias' is declared i32[2] (int32_t in C++), but the C++ member is of another type"),
], ids=["offsets", "type"])
def test_a_struct_that_is_not_its_cpp_type_fails_naming_the_spec_line(built: Path, old: str, new: str, needle: str,
                                                                      message: str) -> None:
    spec = built / "specs" / "rope_yarn.yaml"
    original = spec.read_text()
    assert old in original
    spec.write_text(original.replace(old, new))
    try:
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 2, res.stdout + res.stderr
        assert (f"kernelgen: specs/rope_yarn.yaml:{_line_of(spec, needle)}: struct 'rope_params' (C++ rope_params): "
                + message) in res.stderr, res.stderr
    finally:
        spec.write_text(original)


def test_a_struct_whose_bytes_are_not_its_value_is_refused(built: Path) -> None:
    """A struct passed by value must be its bytes (standard-layout, trivially destructible): one
    with a destructor is refused naming its spec line. CUDA's __half2 (copy operations of its
    own, so not trivially copyable) and CUtensorMap (a typedef, 128-byte aligned, which the C++
    API header takes from cuda.h instead of forward-declaring it) build."""
    source = built / "kernels" / "owned.cu"
    spec = built / "specs" / "owned.yaml"
    toolkit_kernels = (
        "__global__ void take_half2(__half2 h, float* out) { out[0] = __low2float(h); }\n"
        "__global__ void take_tmap(const __grid_constant__ CUtensorMap tmap, float* out) {\n"
        "  out[0] = static_cast<float>(tmap.opaque[0]);\n}\n")
    toolkit_specs = (
        "  take_half2:\n    summary: Reads the pair.\n    args: {h: half2, out: {type: f32*, size: 1}}\n"
        "    grid: [1, 1, 1]\n    block: [1, 1, 1]\n    examples: [{}]\n"
        "  take_tmap:\n    summary: Reads the descriptor.\n    args: {tmap: tensor_map, out: {type: f32*, size: 1}}\n"
        "    grid: [1, 1, 1]\n    block: [1, 1, 1]\n    examples: [{}]\n")
    head = ("module: owned\nsummary: By-value structs.\nsources: [kernels/owned.cu]\n"
            "structs:\n"
            "  owned: {fields: {v: f32}}\n"
            "  half2: {cpp: __half2, fields: {x: f16, y: f16}, align: 4}\n"
            "  tensor_map: {cpp: CUtensorMap, fields: {opaque: \"u64[16]\"}, align: 128}\n"
            "kernels:\n")
    source.write_text(
        "#include <cuda.h>\n#include <cuda_fp16.h>\n"
        "struct owned { float v; __host__ __device__ ~owned() {} };\n"
        "__global__ void take_owned(owned o, float* out) { out[0] = o.v; }\n" + toolkit_kernels)
    spec.write_text(
        head + "  take_owned:\n    summary: Reads the struct.\n    args: {o: owned, out: {type: f32*, size: 1}}\n"
        "    grid: [1, 1, 1]\n    block: [1, 1, 1]\n    examples: [{}]\n" + toolkit_specs)
    try:
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 2, res.stdout + res.stderr
        assert ("kernelgen: specs/owned.yaml:5: struct 'owned' (C++ owned): a struct passed by value must be "
                "standard-layout, trivially destructible and default-constructible (its bytes are its value)"
                ) in res.stderr, res.stderr
        source.write_text("#include <cuda.h>\n#include <cuda_fp16.h>\n" + toolkit_kernels)
        spec.write_text(head.replace("  owned: {fields: {v: f32}}\n", "") + toolkit_specs)
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        text = (built / "generated" / TARGET / "include" / "kernelgen" / "owned.h").read_text()
        assert "#include <cuda.h>" in text and "struct CUtensorMap;" not in text, text
    finally:
        source.unlink()
        spec.unlink()
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 0, res.stdout + res.stderr


def test_symbols_are_looked_up_from_the_global_namespace(built: Path) -> None:
    """A spec's symbol is spelled as from the global namespace, and the launchers' namespace
    (<package>::<module>) does not change what it names: a module named like the sources'
    namespace (act::Relu in a template argument, where <package>::act would be found first), a
    template argument naming a device function beside a launcher of the same name (&twice), and a
    template argument that is a macro (BLOCK) all build; so does a struct whose member `in` is a field
    of another name (`{type: u64, cpp: in}`)."""
    source = built / "kernels" / "act.cu"
    spec = built / "specs" / "act.yaml"
    source.write_text(
        "#include <cstdint>\n#define BLOCK 64\n"
        "__device__ float twice(float v) { return 2.f * v; }\n"
        "namespace act {\nstruct Relu { __device__ float operator()(float v) const { return v > 0.f ? v : 0.f; } };\n"
        "template <class Op> __global__ void apply_kernel(Op op, float* x, uint32_t n) {\n"
        "  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = op(x[i]);\n}\n}\n"
        "template <float (*F)(float)> __global__ void map_kernel(float* x) { x[threadIdx.x] = F(x[threadIdx.x]); }\n"
        "template <int B> __global__ void block_kernel(float* x) { x[threadIdx.x % B] = 0.f; }\n"
        "struct io { const float* in; float* out; int n; };\n"
        "__global__ void copy_kernel(io p) { if (threadIdx.x < p.n) p.out[threadIdx.x] = p.in[threadIdx.x]; }\n")
    spec.write_text(
        "module: act\nsummary: Symbols spelled from the global namespace.\nsources: [kernels/act.cu]\n"
        "structs:\n  relu_op: {cpp: act::Relu}\n"
        "  io: {fields: {in_ptr: {type: u64, cpp: in}, out: u64, n: i32}}\n"
        "kernels:\n"
        "  relu:\n    summary: x = max(x, 0).\n    symbol: act::apply_kernel<act::Relu>\n"
        "    args: {op: relu_op, x: {type: f32*, size: n}, n: u32}\n"
        "    grid: [div_ceil(n, 128), 1, 1]\n    block: [128, 1, 1]\n    examples: [{n: 300}]\n"
        "  twice:\n    summary: x = 2 x.\n    symbol: map_kernel<&twice>\n"
        "    args: {x: {type: f32*, size: 32}}\n    grid: [1, 1, 1]\n    block: [32, 1, 1]\n    examples: [{}]\n"
        "  zero:\n    summary: Zeroes x[0 .. 64).\n    symbol: block_kernel<BLOCK>\n"
        "    args: {x: {type: f32*, size: 64}}\n    grid: [1, 1, 1]\n    block: [64, 1, 1]\n    examples: [{}]\n"
        "  copy:\n    summary: Copies p.n values.\n    symbol: copy_kernel\n    args: {p: io}\n"
        "    grid: [1, 1, 1]\n    block: [64, 1, 1]\n    examples: [{}]\n")
    try:
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        cu = (built / "generated" / TARGET / "src" / "act.cu").read_text()
        assert "constexpr auto kg_kernel_relu_0 = kg::pick<kg_signature_relu>(&::act::apply_kernel<act::Relu>, 0);" in cu
        # a field whose C++ member is named like a word the spec reserves: checked under the member's name
        assert "kg_layout<0, offsetof(kg_struct_io, in)>::same" in cu
    finally:
        source.unlink()
        spec.unlink()
        res = run_cli("build", "--target", TARGET, "--no-torch-reader", cwd=built)
        assert res.returncode == 0, res.stdout + res.stderr
