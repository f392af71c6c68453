"""`kernelgen draft` on the classes of sources a user trial found drafting specs that do not load
or are wrong: every drafted name passes the loader (reserved axis names, a struct named like a
kernel, module names the generator refuses), struct types qualified as the global scope spells
them, enums from local headers, sources of one file name, non-cartesian explicit
instantiations, macros, literals and the parameters the reader missed. Each draft is loaded
with the real loader and rendered, as `kernelgen list` / `generate` would."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelgen.draft import draft_files, module_problem
from kernelgen.emit import render_catalog
from kernelgen.errors import KernelgenError
from kernelgen.loader import load_catalog
from kernelgen.names import Naming

TARGETS = Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml"

HEADER = """\
#pragma once
#include <cstdint>
namespace rd_src {
enum class Activation : uint8_t { kIdentity, kRelu };
struct NormParams { int rows; int cols; float eps; };
namespace ops { struct EpilogueParams { float alpha; }; }
}
#define ENGINE_KERNEL __global__
"""

OPS = """\
#include "modes.cuh"
namespace rd_src {
template <typename scalar_t>
__global__ void scale_kernel(scalar_t* out, const scalar_t* in, int n) {}
__global__ void activation_kernel(float* out, int n, Activation activation) {}
__global__ void norm_kernel(float* out, NormParams p) {}
namespace inner { __global__ void epi_kernel(float* out, const ops::EpilogueParams params) {} }
struct Stage { int s; };
__global__ void stage(float* out, Stage st, dim3 shape) {}
__global__ void dim3_kernel(float* out, dim3 d) {}
static __global__ void static_kernel(float* out, int n) {}
ENGINE_KERNEL void engine_kernel(float* out, int n) {}
}
enum Plain { P0, P1 };
enum Signed { S0 = -1, S1 };
__global__ void enums_kernel(Plain p, Signed s, float* out) {}
"""

EDGE = """\
#include <cooperative_groups.h>
// __global__ void fake_comment(int x)
const char* doc = "__global__ void string_kernel(int)";
#define MAKE_FILL(T, NAME) __global__ void fill_##NAME(T* p, T v, int n) { if (threadIdx.x < n) p[0] = v; }
MAKE_FILL(float, f32)
MAKE_FILL(int, i32)
#define UNUSED_MAKER(NAME) __global__ void NAME(float* p)
__global__ void array_kernel(float out[], const int idx[4], unsigned int n) {}
template <typename T, typename IndexT>
__global__ void gather_kernel(T* out, const T* in, const IndexT* idx, IndexT n) {}
__global__ void grid_kernel(float* x, int n) { cooperative_groups::this_grid().sync(); }
__global__ void pdl_kernel(float* x, int n) { cudaGridDependencySynchronize(); x[0] = n; }
__global__ void ptx_pdl_kernel(float* x, int n) { asm volatile("griddepcontrol.launch_dependents;"); }
__global__ void coop_pdl_kernel(float* x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  cooperative_groups::this_grid().sync();
}
template <typename T, int BLOCK_SIZE>
__global__ void axpy_kernel(T* y, const T* x, int n) {}
template __global__ void axpy_kernel<float, 256>(float*, const float*, int);
template __global__ void axpy_kernel<__half, 128>(__half*, const __half*, int);
template __global__ void axpy_kernel<__nv_bfloat16, 256>(__nv_bfloat16*, const __nv_bfloat16*, int);
template <typename T, int kVec, bool kAligned = true>
__global__ void vec_copy_kernel(T* out, const T* in, long n) {}
template __global__ void vec_copy_kernel<float, 4, true>(float*, const float*, long);
template __global__ void vec_copy_kernel<float, 1, false>(float*, const float*, long);
"""


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "specs").mkdir()
    shutil.copy(TARGETS, tmp_path / "specs" / "targets.yaml")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def write_and_load(root: Path, sources: list[str]) -> dict[str, str]:
    """Drafts ``sources`` as `kernelgen draft --write` does, then loads and renders the specs."""
    out = draft_files(root, [root / s for s in sources], write=True)
    for path, text in out:
        path.write_text(text)
    render_catalog(load_catalog(root))
    return {path.stem: text for path, text in out}


def test_drafted_names_load(tmp_path: Path) -> None:
    """Axis scalar_t, struct and kernel of one name (activation, dim3), module names that collide
    with generated files: renamed, said so, and loaded."""
    root = project(tmp_path, {"csrc/modes.cuh": HEADER, "csrc/ops.cu": OPS, "csrc/types.cu": OPS.replace(
        '#include "modes.cuh"', '#include "modes.cuh"\n'), "csrc/runtime.cu": "__global__ void k(float* x) {}\n",
        "csrc/lib.cu": "__global__ void k(float* x) {}\n"})
    texts = write_and_load(root, ["csrc/ops.cu", "csrc/types.cu", "csrc/runtime.cu", "csrc/lib.cu"])
    assert set(texts) == {"ops", "types_ops", "runtime_ops", "lib_ops"}
    assert "module: types_ops  # not 'types': module 'types' would generate include/kernelgen/types.h" \
        in texts["types_ops"]
    ops = texts["ops"]
    assert 'symbol: "rd_src::scale_kernel<{scalar}>"' in ops and '      out: "{scalar}*"\n' in ops
    assert "      scalar: [f32]  # check: the element types to build it for; template parameter scalar_t, renamed" in ops
    # the enum of the header is its underlying type, no struct: one name left for the kernel
    assert "      activation: u8  # enum Activation\n" in ops and "  activation:\n" in ops
    assert "  dim3_kernel:\n" in ops and "  static_kernel:\n" in ops and "static_arg" not in ops
    assert "  dim3_type: {cpp: dim3, fields: {x: u32, y: u32, z: u32}}  # not 'dim3'" in ops
    assert "  engine:\n" in ops  # __global__ spelled through a macro of the header
    # unique across kinds: a struct named like a kernel
    assert "  stage_type: {cpp: \"rd_src::Stage\", fields: {s: i32}}  # not 'stage': kernel stage's name" in ops
    names = re.findall(r"^  (\w+):", ops, re.M)
    assert len(names) == len(set(names)), names


def test_module_names_reserved_in_kernelgen_own_namespace_only(tmp_path: Path) -> None:
    """A project with a package of its own puts the modules' headers in include/<namespace>/:
    `types` and `runtime` are free there (and loaded), `lib` (the Rust crate's lib.rs) is not,
    and a namespace of `kernelgen` shares the runtime's folder again."""
    root = project(tmp_path, {"csrc/types.cu": "__global__ void k(float* x) {}\n",
                              "csrc/runtime.cu": "__global__ void k(float* x) {}\n",
                              "csrc/lib.cu": "__global__ void k(float* x) {}\n"})
    (root / "specs" / "project.yaml").write_text("package: myops\n")
    texts = write_and_load(root, ["csrc/types.cu", "csrc/runtime.cu", "csrc/lib.cu"])
    assert set(texts) == {"types", "runtime", "lib_ops"}
    assert "module: types\n" in texts["types"] and "not 'types'" not in texts["types"]
    assert draft_files(root, [root / "csrc/types.cu"], module="types")[0][0].name == "types.yaml"
    for name in ("types", "runtime"):
        (root / "specs" / f"{name}.yaml").unlink()
    (root / "specs" / "project.yaml").write_text("package: myops\nnamespace: kernelgen\n")
    with pytest.raises(KernelgenError, match=r"module 'types' would generate include/kernelgen/types\.h"):
        draft_files(root, [root / "csrc/types.cu"], module="types")
    assert module_problem("types", naming=Naming.for_package("myops")) is None
    assert "include/kernelgen/types.h" in (module_problem("types") or "")


def test_narrow_integers_keep_the_examples_in_range(tmp_path: Path) -> None:
    """The grid follows an integer of 16 bits or more where there is one (before an 8-bit one named
    like a count); an 8-bit driver's example is its largest value; every example fits its type."""
    src = ("#include <cstdint>\n"
           "__global__ void flag_only(unsigned char flag, float* x) {}\n"
           "__global__ void chars(char c, int8_t d, bool b, short width, float* x) {}\n"
           "__global__ void counted(signed char n, unsigned short m, float* x) {}\n"
           "__global__ void small(int8_t n, uint8_t k, float* x) {}\n")
    root = project(tmp_path, {"csrc/narrow.cu": src})
    text = write_and_load(root, ["csrc/narrow.cu"])["narrow"]
    assert 'grid: ["div_ceil(flag, 256)", 1, 1]' in text and "examples: [{flag: 255}]" in text
    assert 'grid: ["div_ceil(width, 256)", 1, 1]' in text and "examples: [{c: 1, d: 1, width: 1024, b: true}]" in text
    assert 'grid: ["div_ceil(m, 256)", 1, 1]' in text and 'examples: [{"n": 1, m: 1024}]' in text
    assert 'grid: ["div_ceil(n, 256)", 1, 1]' in text and 'examples: [{"n": 127, k: 1}]' in text


def test_struct_types_are_qualified_from_the_global_scope(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/modes.cuh": HEADER, "csrc/ops.cu": OPS})
    ops = write_and_load(root, ["csrc/ops.cu"])["ops"]
    assert '  normparams: {cpp: "rd_src::NormParams", fields: {rows: i32, cols: i32, eps: f32}}' in ops
    assert '  epilogueparams: {cpp: "rd_src::ops::EpilogueParams", fields: {alpha: f32}}' in ops  # not ops::EpilogueParams


def test_enums_of_headers_and_plain_enums(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/modes.cuh": HEADER, "csrc/ops.cu": OPS})
    ops = write_and_load(root, ["csrc/ops.cu"])["ops"]
    assert "      p: u32  # check: plain enum Plain has no negative enumerator, so GCC and nvcc give it the " \
           "underlying type unsigned int" in ops
    assert "      s: i32  # check: plain enum Signed has a negative enumerator" in ops
    assert "activation_type" not in ops and "{cpp: Activation" not in ops


def test_sources_of_one_file_name(tmp_path: Path) -> None:
    decl = "#pragma once\ntemplate <typename T> __global__ void norm_kernel(T* y, const T* x, int n);\n"
    defn = '#include "norm.cuh"\ntemplate <typename T> __global__ void norm_kernel(T* y, const T* x, int n) {}\n' \
           "template __global__ void norm_kernel<float>(float*, const float*, int);\n"
    root = project(tmp_path, {"csrc/norm.cuh": decl, "csrc/norm.cu": defn,
                              "csrc/a/scale.cu": "__global__ void s(float* x, int n) {}\n",
                              "csrc/b/scale.cu": "__global__ void s(double* x, int n) {}\n"})
    texts = write_and_load(root, ["csrc/norm.cuh", "csrc/norm.cu", "csrc/a/scale.cu", "csrc/b/scale.cu"])
    assert set(texts) == {"norm", "scale", "b_scale"}
    assert "sources: [csrc/norm.cu]" in texts["norm"] and texts["norm"].count("symbol:") == 1
    assert "x: f64*" in texts["b_scale"] and "x: f32*" in texts["scale"]


def test_explicit_instantiations_that_are_no_product(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/edge.cu": EDGE})
    edge = write_and_load(root, ["csrc/edge.cu"])["edge"]
    catalog = load_catalog(root)
    kernels = {k.name for k in catalog.modules[0].kernels}
    assert {"axpy_f32_256", "axpy_bf16_256", "axpy_f16_128"} <= kernels
    assert not {"axpy_f16_256", "axpy_f32_128", "axpy_bf16_128"} & kernels
    # one kernel listing the combinations, under one dispatcher
    assert "    instantiate:  # the source's explicit instantiations: these combinations only\n" \
        "      - {T: f32, BLOCK_SIZE: 256}\n      - {T: f16, BLOCK_SIZE: 128}\n      - {T: bf16, BLOCK_SIZE: 256}\n" \
        in edge, edge
    axpy = next(d for d in catalog.modules[0].dispatches if d.name == "axpy")
    assert [r.kernel for r in axpy.members] == ["axpy_f32_256", "axpy_f16_128", "axpy_bf16_256"]
    assert {"vec_copy_true_f32_4", "vec_copy_false_f32_1"} <= kernels
    # each kernel named by the boolean it fixes (its one instance adds the axes' values)
    assert "  vec_copy_true:\n" in edge and "  vec_copy_false:\n    extends: vec_copy_true" in edge, edge
    assert 'instance_name: "vec_copy_false_{T}_{kVec}"' in edge
    assert 'symbol: "vec_copy_kernel<{T}, {kVec}, false>"' in edge


def test_parsing_gaps(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/edge.cu": EDGE})
    edge = write_and_load(root, ["csrc/edge.cu"])["edge"]
    assert "fake_comment" not in edge and "string_kernel" not in edge and "  NAME:" not in edge
    assert "  fill_f32:  # declared by the macro invocation MAKE_FILL(float, f32)\n" in edge
    assert "      p: i32*\n      v: i32\n" in edge
    assert "# check: macro UNUSED_MAKER declares __global__ functions and is not invoked here" in edge
    assert "      out: f32*\n      idx: const i32*\n" in edge
    assert 'symbol: "gather_kernel<{T}, int64_t>"' in edge and "      idx: const i64*\n      \"n\": i64\n" in edge
    assert "  grid:\n" in edge and "    launch: {cooperative: true}  # it syncs" in edge
    # programmatic dependent launch, from the runtime's calls or the PTX, with a cooperative launch too
    for name in ("pdl", "ptx_pdl"):
        assert re.search(rf"\n  {name}:\n(?:    .*\n)*?    launch: {{programmatic_dependent: true}}  # it waits", edge), edge
    assert "    launch: {cooperative: true, programmatic_dependent: true}  # it syncs the whole grid" in edge


def test_refusals_and_wording(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/a.cu": "__global__ void a(float* x) {}\n",
                              "csrc/b.cu": "__global__ void b(float* x) {}\n"})
    with pytest.raises(KernelgenError, match="several sources need --write: each writes its own spec file"):
        draft_files(root, [root / "csrc/a.cu", root / "csrc/b.cu"])
    with pytest.raises(KernelgenError, match="module name 'types' cannot be used"):
        draft_files(root, [root / "csrc/a.cu"], module="types")
    assert module_problem("plan_codes") and module_problem("hopper", ("hopper",)) and module_problem("refresh")
    assert module_problem("x_c", others=("x",)) and module_problem("ops") is None
    # module a on target b_c and module a_b on target c: one contract test file, as the loader refuses
    assert "the contract test file of module 'a_b' on target c" in (module_problem("a", ("b_c", "c"), ("a_b",)) or "")


def test_struct_fields_are_read_from_the_declarations(tmp_path: Path) -> None:
    """A struct passed by value gets the fields of its declaration (in the source or a local header,
    scalars and fixed arrays of them, several declarators a line, initialisers, member functions
    and static members skipped; pointer members as u64, said so); a union, a struct with a base
    class keeps `fields: {}` and the check with the reason; a class-type member is a nested struct;
    a member named like a word the spec reserves (`in`) is a field of another name with
    its `cpp` member. The drafted module loads and renders."""
    src = (
        '#include "modes.cuh"\n#include <cstdint>\nnamespace a {\n'
        "struct P { int rows, cols; float eps = 1e-5f; uint8_t tag[4]; static int count;\n"
        "  __device__ float f() const { return eps; } };\n"
        "struct Ptrs { const float* x; float *y, *z; int64_t n; };\n"
        "union U { int i; float f; };\nstruct Q : P { int more; };\nstruct C { P inner; };\n"
        "struct R { int in; };\n"
        "__global__ void kp(P p, float* out) {}\n__global__ void kptr(Ptrs s, float* out) {}\n"
        "__global__ void ku(U u, float* out) {}\n__global__ void kq(Q q, float* out) {}\n"
        "__global__ void kc(C c, float* out) {}\n__global__ void kr(R r, float* out) {}\n"
        "__global__ void kn(rd_src::NormParams np, float* out) {}\n}\n")
    root = project(tmp_path, {"csrc/modes.cuh": HEADER, "csrc/st.cu": src})
    st = write_and_load(root, ["csrc/st.cu"])["st"]
    assert '{cpp: "a::P", fields: {rows: i32, cols: i32, eps: f32, tag: "u8[4]"}}' in st, st
    assert '{cpp: "a::Ptrs", fields: {x: u64, y: u64, z: u64, n: i64}}  # ' in st and \
        "check: pointer members as u64: pass the device addresses" in st, st
    assert '{cpp: "rd_src::NormParams", fields: {rows: i32, cols: i32, eps: f32}}' in st, st
    assert '{cpp: "a::R", fields: {in_field: {type: i32, cpp: in}}}' in st, st  # `in`: reserved in the spec
    assert '{cpp: "a::C", fields: {inner: p_type}}' in st, st  # a class-type member: a nested struct
    assert '{cpp: "a::U", fields: {}}  # not \'u\': an argument of ku; check: fields not drafted: a union' in st, st
    assert '{cpp: "a::Q", fields: {}}  # not \'q\': an argument of kq; check: fields not drafted: it has a base ' \
        'class' in st, st
    assert "structs:  # check: give each its fields" in st
