"""What the loader reads from a kernel's declaration in the sources, looked up by the symbol's
qualified name (kernel_source): launch bounds, __cluster_dims__ and the parameter list; a lookup
the text cannot decide says so; names an expression uses that only the sources define."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.errors import SpecError
from kernelgen.kernel_source import (
    LookupUndecided,
    global_declarations,
    global_names,
    namespaces_at,
    params_of,
    same_name_declarations,
)
from kernelgen.loader import load_catalog
from tests.unit.test_loader import sub, write_project

TWO_NAMESPACES = """\
namespace va { __global__ void __launch_bounds__(128) same_kernel(const float*, float*, uint32_t, float); }
namespace vb { __global__ void __launch_bounds__(256) same_kernel(const float* x, float* out, uint32_t n, float a); }
"""

SYMBOL = sub("    summary: Scales.\n", "    summary: Scales.\n    symbol: vb::same_kernel\n")


def project(tmp_path: Path, spec: str, kernel: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    root = write_project(tmp_path, spec)
    (root / "kernels" / "demo.cu").write_text(kernel)
    return root


def kernel(tmp_path: Path, spec: str, source: str):
    return load_catalog(project(tmp_path, spec, source)).modules[0].kernels[0]


def refused(tmp_path: Path, spec: str, source: str) -> str:
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, spec, source))
    return str(info.value)


# ------------------------------------------------------------------ lookup by the qualified name


def test_launch_bounds_are_those_of_the_namespace_the_symbol_names(tmp_path: Path) -> None:
    """The user trial: va:: and vb:: declare same_kernel with bounds 128 and 256; vb::same_kernel
    with a block of 256 loads with vb's bound, and va::same_kernel is refused naming va's line."""
    assert kernel(tmp_path / "b", SYMBOL, TWO_NAMESPACES).launch_bounds == (256, 0)
    err = refused(tmp_path / "a", SYMBOL.replace("vb::", "va::"), TWO_NAMESPACES)
    assert "example 0 launches a block of 256 threads, but 'va::same_kernel' at kernels/demo.cu:1 is declared " \
           "with __launch_bounds__(128)" in err, err


@pytest.mark.parametrize("source,symbol,lines", [
    ("namespace a { namespace b { __global__ void k(int); } }", "a::b::k", [1]),
    ("namespace a::b { __global__ void k(int); }", "::a::b::k", [1]),
    ("namespace a { inline namespace v1 { __global__ void k(int); } }", "a::k", [1]),
    ("namespace a { inline namespace v1 { __global__ void k(int); } }", "a::v1::k", [1]),
    ("namespace a { namespace { __global__ void k(int); } }", "a::k", [1]),
    ("namespace a { __global__ void k(int); }\n__global__ void a::k(int x) {}", "a::k", [1, 2]),
    ("namespace a { __global__ void k(int); }\n__global__ void k(int) {}", "k", [2]),
    ("namespace a { __global__ void k(int); }\n__global__ void k(int) {}", "b::k", []),
    ("template <int D> __global__ void k(int);\ntemplate __global__ void k<64>(int);", "k<64>", [1, 2]),
])
def test_declarations_are_found_by_their_namespaces(source: str, symbol: str, lines: list[int]) -> None:
    assert [d.line for d in global_declarations([("a.cu", source)], symbol)] == lines


def test_attributes_of_other_namespaces_are_not_read() -> None:
    """An unreadable __cluster_dims__ of a declaration the symbol does not name is no error."""
    text = "namespace a { __global__ void __cluster_dims__(N * 2) k(int); }\n" \
           "namespace b { __global__ void __cluster_dims__(2) k(int); }\n"
    (d,) = global_declarations([("a.cu", text)], "b::k")
    assert (d.qualified, d.cluster) == ("b::k", (2, 1, 1))
    assert [o.qualified for o in same_name_declarations([("a.cu", text)], "k")] == ["a::k", "b::k"]


@pytest.mark.parametrize("construct", [
    "using namespace va;", "using va::same_kernel;", "namespace vv = va;", "#define OPEN namespace vv {",
])
def test_a_lookup_the_text_cannot_decide_says_so(construct: str) -> None:
    text = construct + "\n" + TWO_NAMESPACES
    with pytest.raises(LookupUndecided, match=r"no __global__ function spelled 'vc::same_kernel' but "
                       r"va::same_kernel \(a.cu:2\), vb::same_kernel \(a.cu:3\)"):
        global_declarations([("a.cu", text)], "vc::same_kernel")
    assert [d.qualified for d in global_declarations([("a.cu", text)], "vb::same_kernel")] == ["vb::same_kernel"]


def test_an_undecided_lookup_states_no_launch_bounds_and_refuses_a_cluster_check(tmp_path: Path) -> None:
    source = "using namespace va;\n" + TWO_NAMESPACES.replace("namespace vb", "namespace vc")
    assert kernel(tmp_path / "a", SYMBOL, source).launch_bounds is None  # not va's 128
    spec = SYMBOL.replace("    block: [THREADS, 1, 1]\n", "    block: [THREADS, 1, 1]\n    cluster: [1, 1, 1]\n")
    err = refused(tmp_path / "b", spec, source)
    assert "kernels.scale.cluster: cannot tell which declaration's __cluster_dims__ 'vb::same_kernel' has" in err
    assert "a using-directive in them may make the symbol name it" in err, err


def test_a_cluster_kernel_missing_from_its_namespace_names_the_others(tmp_path: Path) -> None:
    spec = SYMBOL.replace("    block: [THREADS, 1, 1]\n", "    block: [THREADS, 1, 1]\n    cluster: [1, 1, 1]\n")
    err = refused(tmp_path, spec.replace("vb::", "vc::"), TWO_NAMESPACES)
    assert "cannot find the __global__ definition of 'vc::same_kernel' in the sources (kernels/demo.cu) to check " \
           "its __cluster_dims__; they declare __global__ va::same_kernel (kernels/demo.cu:1), vb::same_kernel " \
           "(kernels/demo.cu:2) (spell the symbol with the namespaces its declaration is written in)" in err, err


def test_namespaces_of_declarators_and_inline_namespaces() -> None:
    text = "inline namespace v1 { namespace a::inline b { __global__ void k(int); } }\n__global__ void c::d::k(int) {}"
    assert global_names([("a.cu", text)]) == ["v1::a::b::k", "c::d::k"]
    assert namespaces_at(text)[2][1] == "v1::a::b"


# ------------------------------------------------------------------ the parameter list


@pytest.mark.parametrize("text,types", [
    ("const float* __restrict__ x, unsigned n", [("float", True, (False,)), ("unsigned", False, ())]),
    ("float x[], const int* const* rows, uint64_t", [("float", False, (False,)), ("int", True, (True, False)),
                                                      ("uint64_t", False, ())]),
    ("const __grid_constant__ CUtensorMap m, unsigned long long n = 4", [("CUtensorMap", True, ()),
                                                                        ("unsigned long long", False, ())]),
    ("void", []),
    ("", []),
])
def test_parameter_lists_are_read(text: str, types: list) -> None:
    params = params_of(text)
    assert params is not None and [(p.base, p.const, p.pointers) for p in params] == types


@pytest.mark.parametrize("text", ["KERNEL_ARGS", "float* x, KERNEL_ARGS", "float* x, ...",
                                  "float* x,\n#if X\n int n\n#endif\n"])
def test_parameter_lists_that_may_hide_parameters_are_not_counted(text: str) -> None:
    assert params_of(text) is None


@pytest.mark.parametrize("text,spec_type", [
    ("const T* x", None), ("Vec<float> v", None), ("float RESTRICT* x", None), ("volatile int* f", None),
    ("char c", None), ("long long n", "i64"), ("const __half* h", "const f16*"), ("float* const* p", "f32* const*"),
    ("float4 v", None), ("const float4* v", "const f32x4*"),
])
def test_parameter_types_in_the_specs_terms(text: str, spec_type: str | None) -> None:
    (p,) = params_of(text) or ()
    assert p.spec_type == spec_type


def test_a_kernel_taking_another_number_of_parameters_is_refused_at_load(tmp_path: Path) -> None:
    """Counted from the declaration's text: the message says what the kernel takes, and a
    CUtensorMap parameter the spec lacks points to tensor_maps."""
    source = TWO_NAMESPACES.replace("float a)", "float a, const __grid_constant__ CUtensorMap x_map)")
    err = refused(tmp_path, SYMBOL, source)
    assert err.startswith("specs/demo.yaml:7: kernels.scale.args: the __global__ declaration of 'vb::same_kernel' "
                          "at kernels/demo.cu:2 takes 5 parameters (const float* x, float* out, uint32_t n, float a, "
                          "const __grid_constant__ CUtensorMap x_map), but the spec gives 4 (const f32* x, f32* out, "
                          "u32 n, f32 alpha)"), err
    assert "the kernel's parameter 5 ('const __grid_constant__ CUtensorMap x_map') is a TMA descriptor: describe " \
           "it under tensor_maps (x_map: {array: <pointer argument>, dims: [...], box: [...]})" in err, err


def test_a_parameter_of_another_type_names_both_types(tmp_path: Path) -> None:
    err = refused(tmp_path, SYMBOL, TWO_NAMESPACES.replace("uint32_t n", "uint64_t n"))
    assert err.startswith("specs/demo.yaml:13: kernels.scale.args.n: argument 'n' (parameter 3: u32, uint32_t in "
                          "C++) is not the type of parameter 3 of 'vb::same_kernel' at kernels/demo.cu:2, "
                          "'uint64_t n' (u64 in the spec's terms) (give the argument the kernel's type, u64;"), err


@pytest.mark.parametrize("source", [
    TWO_NAMESPACES.replace("uint32_t n", "unsigned int n"),  # another spelling of u32
    TWO_NAMESPACES.replace("uint32_t n", "Count n"),  # an enum or typedef: the build checks it
    TWO_NAMESPACES.replace("float* out, uint32_t n, float a)", "KG_ARGS)"),  # a macro: not counted
    TWO_NAMESPACES + "namespace vb { __global__ void same_kernel(const double*, double*, uint32_t, float); }",
])
def test_what_the_text_cannot_decide_is_left_to_the_build(tmp_path: Path, source: str) -> None:
    assert kernel(tmp_path, SYMBOL, source).symbol == "vb::same_kernel"


def test_void_pointers_take_any_pointer_with_their_const(tmp_path: Path) -> None:
    spec = SYMBOL.replace("x: {type: const f32*, size: n}", "x: {type: const void*, size: n}")
    assert kernel(tmp_path / "a", spec, TWO_NAMESPACES).args[0].spelling == "const void*"
    err = refused(tmp_path / "b", spec.replace("const void*", "void*"), TWO_NAMESPACES)
    assert "argument 'x' (parameter 1: void*, void* in C++) is not the type of parameter 1" in err, err


def test_a_tensor_map_position_holding_an_array_is_refused(tmp_path: Path) -> None:
    spec = SYMBOL.replace("      alpha: f32\n", "").replace(
        "    grid:", "    tensor_maps:\n      x_map: {array: x, dims: [n], box: [64]}\n    grid:")
    err = refused(tmp_path, spec, TWO_NAMESPACES)
    assert "kernels.scale.tensor_maps.x_map: tensor map 'x_map' (parameter 4) is not a CUtensorMap parameter of " \
           "'vb::same_kernel' at kernels/demo.cu:2: the kernel's is 'float a' (f32 in the spec's terms)" in err, err


# ------------------------------------------------------------------ names the sources define


@pytest.mark.parametrize("define", ["#define CLUSTER_X 2", "constexpr int CLUSTER_X = 2;"])
def test_a_cluster_naming_a_source_macro_says_to_declare_a_constant(tmp_path: Path, define: str) -> None:
    """The spec's expressions see the spec's names only; __cluster_dims__(CLUSTER_X, 1, 1) in the
    source is read from it. The message says so and which constants entry declares it."""
    source = define + "\n__global__ void __cluster_dims__(CLUSTER_X, 1, 1) scale(const float* x, float* out, " \
                      "unsigned n, float a) {}\n"
    spec = sub("    block: [THREADS, 1, 1]\n", "    block: [THREADS, 1, 1]\n    cluster: [CLUSTER_X, 1, 1]\n").replace(
        "[div_ceil(n, THREADS), 1, 1]", "[div_ceil(n, THREADS * 2) * 2, 1, 1]")
    err = refused(tmp_path / "a", spec, source)
    assert err.startswith("specs/demo.yaml:16: kernels.scale.cluster[0]: 'CLUSTER_X' is not a constant (the sources "
                          f"define CLUSTER_X (kernels/demo.cu:1: {define.rstrip(';')}), but spec expressions see only "
                          "the spec's names"), err
    assert "declare it under 'constants' (CLUSTER_X: 2)" in err, err
    declared = spec.replace("{THREADS: 256}", "{THREADS: 256, CLUSTER_X: 2}")
    assert kernel(tmp_path / "b", declared, source).cluster == (2, 1, 1)


def test_any_expression_naming_a_source_macro_says_so(tmp_path: Path) -> None:
    source = "#define BLOCK (128)\n__global__ void scale(const float* x, float* out, unsigned n, float a) {}\n"
    err = refused(tmp_path, sub("[THREADS, 1, 1]", "[BLOCK, 1, 1]"), source)
    assert "kernels.scale.block[0]: undefined name 'BLOCK' (the sources define BLOCK (kernels/demo.cu:1: " \
           "#define BLOCK (128))" in err and "(BLOCK: 128)" in err, err
