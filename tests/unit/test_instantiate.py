"""Spec reuse: ``instantiate:`` matrices and their dispatching launchers, chains whose
members differ in pointer element types, and kernel ``extends:``. Loader syntax and errors
(file:line), and what lowering makes of them (instance names, dispatch tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import expr
from kernelgen.emit import render_catalog
from kernelgen.emit.c import c_type
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from kernelgen.lower import lower_module
from kernelgen.plan import NL_NO_INSTANCE
from tests.unit.test_loader import write_project

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
constants: {THREADS: 256}
kernels:
  scale:
    summary: Scales.
    symbol: scale_kernel<{T}, {VEC}>
    instantiate:
      T: [f32, bf16]
      VEC: [4, 1]
    args:
      x: {type: "const {T}*", size: n}
      out:
        type: "{T}*"
        size: n
      n: u32
      alpha: f32
    grid: [div_ceil(n, THREADS * VEC), 1, 1]
    block: [THREADS, 1, 1]
    skip_if: [n == 0]
    applies_if: [n % VEC == 0]
    examples:
      - {n: 1024}
  plain:
    summary: Plain f32.
    args:
      x: const f32*
      out: f32*
      n: u32
      alpha: f32
    grid: [n, 1, 1]
    block: [THREADS, 1, 1]
    examples:
      - {n: 1}
"""


def load(tmp_path: Path, spec: str = SPEC):
    return load_catalog(write_project(tmp_path, spec))


def sub(old: str, new: str, spec: str = SPEC) -> str:
    assert old in spec, old
    return spec.replace(old, new, 1)


def test_instances_are_named_in_matrix_order_with_cpp_spellings(tmp_path: Path) -> None:
    (m,) = load(tmp_path).modules
    ks = {k.name: k for k in m.kernels}
    assert list(ks) == ["scale_f32_4", "scale_f32_1", "scale_bf16_4", "scale_bf16_1", "plain"]
    k = ks["scale_bf16_4"]
    assert k.symbol == "scale_kernel<__nv_bfloat16,4>"
    assert [a.spelling for a in k.args] == ["const bf16*", "bf16*", "u32", "f32"]
    assert (k.instance_of, k.axis_values) == ("scale", (("T", "bf16"), ("VEC", 4)))
    assert [c.text for c in k.applies_if] == ["(n % 4) == 0"]  # integer axes are constants of the instance
    (d,) = m.dispatches
    assert d.name == "scale" and d.dispatch
    assert [r.kernel for r in d.members] == list(ks)[:4]
    assert d.type_axes == (("T", ("x", "out")),)


def test_instance_name_pattern(tmp_path: Path) -> None:
    spec = sub("    args:\n      x: {", "    instance_name: scale_{T}_v{VEC}\n    args:\n      x: {")
    (m,) = load(tmp_path, spec).modules
    assert [k.name for k in m.kernels][:2] == ["scale_f32_v4", "scale_f32_v1"]


LISTED = "    instantiate:\n      - {T: bf16, VEC: 4}\n      - {VEC: 1, T: f32}\n"


def test_a_list_of_combinations_makes_those_instances_only(tmp_path: Path) -> None:
    """instantiate as a list: the combinations given, in that order (the axes' values in
    first-seen order), and one dispatcher over them."""
    (m,) = load(tmp_path, sub("    instantiate:\n      T: [f32, bf16]\n      VEC: [4, 1]\n", LISTED)).modules
    ks = {k.name: k for k in m.kernels}
    assert list(ks) == ["scale_bf16_4", "scale_f32_1", "plain"]
    assert ks["scale_f32_1"].symbol == "scale_kernel<float,1>"
    assert ks["scale_f32_1"].axis_values == (("T", "f32"), ("VEC", 1))
    (d,) = m.dispatches
    assert [r.kernel for r in d.members] == ["scale_bf16_4", "scale_f32_1"]
    assert [(a.name, a.values) for a in d.axes] == [("T", ("bf16", "f32")), ("VEC", (4, 1))]
    assert d.type_axes == (("T", ("x", "out")),)


def test_kernelgen_list_shows_listed_combinations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kernelgen.cli import main

    root = write_project(tmp_path, sub("    instantiate:\n      T: [f32, bf16]\n      VEC: [4, 1]\n", LISTED))
    assert main(["--root", str(root), "list"]) == 0
    assert "  scale  dispatches (T: bf16, VEC: 4; T: f32, VEC: 1): scale_bf16_4 -> scale_f32_1" in \
        capsys.readouterr().out


_LIST = "    instantiate:\n      T: [f32, bf16]\n      VEC: [4, 1]\n"
BAD = [
    ("combination listed twice", sub(_LIST, LISTED + "      - {T: bf16, VEC: 4}\n"), 12,
     "kernels.scale.instantiate[2]: this combination is combination 0 again"),
    ("combination without an axis", sub(_LIST, LISTED + "      - {T: bf16}\n"), 12,
     "the combination gives no value to axis 'VEC'"),
    ("combination with another axis", sub(_LIST, LISTED + "      - {T: bf16, VEC: 2, W: 3}\n"), 12,
     "axis 'W' is not in the first combination (T, VEC)"),
    ("combination giving a list", sub(_LIST, "    instantiate:\n      - {T: [f32, bf16], VEC: 4}\n"), 10,
     "a combination gives each axis one value, not a list"),
    ("combination mixing kinds", sub(_LIST, LISTED + "      - {T: bf16, VEC: f32}\n"), 12,
     "an axis holds one kind of value: this one holds integers, not f32"),
    ("empty list of combinations", sub(_LIST, "    instantiate: []\n"), 9, "expected at least one combination"),
    ("unknown element type", sub("T: [f32, bf16]", "T: [f32, bfloat16]"), 10, "unknown element type 'bfloat16'"),
    ("mixed axis", sub("VEC: [4, 1]", "VEC: [4, f32]"), 11, "an axis holds one kind of value: this one holds "
     "integers, not f32"),
    ("repeated value", sub("VEC: [4, 1]", "VEC: [4, 4]"), 11, "listed twice"),
    ("unknown placeholder", sub("<{T}, {VEC}>", "<{T}, {V}>"), 8, "unknown placeholder {V}"),
    ("placeholder without axis", sub("      x: const f32*", "      x: const {T}*"), 28,
     "placeholder {T} outside an instantiated kernel"),
    ("integer axis in a type", sub('"const {T}*"', '"const {VEC}*"'), 13, "{VEC} is an axis of integers; types "
     "take element-type axes"),
    ("type axis as an integer scalar", sub("      n: u32\n      alpha", "      n: \"{T}\"\n      alpha"), 13,
     "'n' is a float; expressions use integer arguments only"),
    ("axis named like an argument", sub("      n: u32\n      alpha", "      VEC: u32\n      n: u32\n      alpha"),
     17, "has the name of an 'instantiate' axis"),
    ("axis named like a constant", sub("VEC: [4, 1]", "THREADS: [4, 1]"), 11, "name of a constant"),
    ("collision with a kernel", sub("  plain:", "  scale_bf16_1:"), 25,
     "also the name of instantiation 'scale_bf16_1' of 'scale' (line 6)"),
    ("pattern without every axis", sub("    args:\n      x: {", "    instance_name: scale_{T}\n    args:\n      x: {"),
     12, "both named 'scale_f32'"),
    ("no symbol", sub("    symbol: scale_kernel<{T}, {VEC}>\n", ""), 9, "needs 'symbol'"),
    ("unused type axis", sub("      VEC: [4, 1]", "      VEC: [4, 1]\n      U: [f16]"), 12, "used by no pointer argument"),
    ("sizeof of an unknown name", sub("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
     "    shared_mem: THREADS * sizeof(U)\n    skip_if"), 21, "sizeof(U): 'U' is not an element type or an "
     "element-type axis (the kernel's element-type axes: T)"),
    ("sizeof of an integer axis", sub("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
     "    shared_mem: sizeof(VEC)\n    skip_if"), 21, "sizeof(VEC): 'VEC' is not an element type"),
    ("sizeof of a sub-byte type", sub("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
     "    shared_mem: sizeof(fp4_e2m1)\n    skip_if"), 21, "fp4_e2m1 is 4 bits, not a whole number of bytes"),
    ("sizeof of void", sub("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
     "    shared_mem: sizeof(void)\n    skip_if"), 21, "sizeof(void): 'void' is not an element type"),
    ("sizeof of a C++ type", sub("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
     "    shared_mem: sizeof(float)\n    skip_if"), 21, "(did you mean sizeof(f32)? (kernelgen's name for C++ float))"),
    ("instance_name without instantiate", sub("      x: const f32*", "      x: const f32*", sub(
        "    summary: Plain f32.\n", "    summary: Plain f32.\n    instance_name: p_{T}\n")), 27,
     "names the instances of 'instantiate'"),
]


def test_sizeof_gives_each_instance_its_element_bytes(tmp_path: Path) -> None:
    """sizeof(T) of an element-type axis is the instance's element size in every expression (a
    literal, as integer axes are); sizeof of a registry type works anywhere, vector types included."""
    spec = SPEC.replace("    block: [THREADS, 1, 1]\n    skip_if", "    block: [THREADS, 1, 1]\n"
                        "    shared_mem: THREADS * VEC * sizeof(T) + sizeof( f32x4 )\n    skip_if", 1)
    spec = spec.replace("    applies_if: [n % VEC == 0]", "    applies_if: [n % VEC == 0, n * sizeof(T) <= 1048576]", 1)
    spec = spec.replace("    grid: [n, 1, 1]", "    grid: [div_ceil(n * sizeof(bf16), 128), 1, 1]", 1)
    m = load(tmp_path, spec).modules[0]
    smem = {k.name: expr.evaluate(k.shared_mem, {"THREADS": 256}) for k in m.kernels if k.instance_of == "scale"}
    assert smem == {"scale_f32_4": 256 * 4 * 4 + 16, "scale_f32_1": 256 * 4 + 16, "scale_bf16_4": 256 * 4 * 2 + 16,
                    "scale_bf16_1": 256 * 2 + 16}
    bf16 = m.kernel("scale_bf16_1")
    assert [c.text for c in bf16.applies_if] == ["(n % 1) == 0", "(n * 2) <= 1048576"]
    assert expr.to_text(m.kernel("plain").grid[0]) == "div_ceil(n * 2, 128)"


def refused_at(tmp_path: Path, spec: str, line: int, fragment: str) -> None:
    """Loading `spec` fails with one error containing `fragment` at specs/demo.yaml:`line`."""
    with pytest.raises(SpecError) as err:
        load(tmp_path, spec)
    assert fragment in str(err.value)
    assert (err.value.loc.path, err.value.loc.line) == ("specs/demo.yaml", line), str(err.value)


@pytest.mark.parametrize("case,spec,line,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_instantiate_gives_file_and_line(tmp_path: Path, case: str, spec: str, line: int, fragment: str) -> None:
    refused_at(tmp_path, spec, line, fragment)


def test_dispatch_table_and_generated_launchers(tmp_path: Path) -> None:
    cat = load(tmp_path)
    (m,) = cat.modules
    hopper = cat.target("hopper")
    assert hopper is not None
    lm = lower_module(cat, m, hopper)
    (c,) = [c for c in lm.chains if c.dispatch]
    assert c.name == "scale"
    assert [k for _, k in c.members] == ["scale_f32_4", "scale_f32_1", "scale_bf16_4", "scale_bf16_1"]
    (key,) = c.keys
    assert (key.name, key.param, key.member_elems) == ("T", "kg_dtypes_T", (3, 3, 1, 1))
    assert [c.args[i].name for i in key.args] == ["x", "out"]
    files = render_catalog(cat, [hopper])
    h = files["generated/hopper/include/kernelgen/demo.h"]
    assert "Outcome scale(const float* x, float* out, uint32_t n, float alpha, cudaStream_t stream = nullptr);" in h
    assert "Outcome scale(const __nv_bfloat16* x, __nv_bfloat16* out, uint32_t n, float alpha" in h
    assert "kg_plan plan_scale(uint32_t n, uint32_t kg_dtypes_T, int32_t* kg_kernel = nullptr);" in h
    ch = files["generated/hopper/include/kernelgen/demo_c.h"]
    assert "int32_t kg_demo__scale(const void* x, void* out, uint32_t n, float alpha, uint32_t kg_dtypes_T," in ch
    assert "#define KG_ELEM_BF16 1" in ch
    assert "int32_t kg_demo__scale_bf16_4(const void* x, void* out, uint32_t n, float alpha, void* stream," in ch
    cu = files["generated/hopper/src/demo.cu"]
    assert "kernelgen::Outcome kg_o = {KG_CODE(KG_NL_NO_INSTANCE, 0), &kg_info_scale};" in cu
    assert "(&::scale_kernel<__nv_bfloat16,1>, 0);" in cu and "::kg_kernel_scale_bf16_1_0<<<" in cu
    assert NL_NO_INSTANCE == 7
    pyi = files["generated/hopper/python/demo.pyi"]
    assert ("def plan_scale(*, n: _kg_builtins.int, alpha: _kg_builtins.float | None = None, T: _kg_builtins.str | "
            "None = None) -> _kg_Plan: ...") in pyi


def test_c_code_of_no_instance_comes_from_the_plan_semantics() -> None:
    codes = (Path(__file__).resolve().parents[2] / "generated/hopper/include/kernelgen/plan_codes.h").read_text()
    assert f"#define KG_NL_NO_INSTANCE {NL_NO_INSTANCE} " in codes


# ------------------------------------------------------------------ boolean and enumerator axes

FLAGS = sub("    symbol: scale_kernel<{T}, {VEC}>\n    instantiate:\n      T: [f32, bf16]\n      VEC: [4, 1]\n",
            "    symbol: scale_kernel<{T}, {HAS_BIAS}, {ACT}>\n    instantiate:\n      T: [f32]\n"
            "      HAS_BIAS: [true, false]\n      ACT: [Act::Relu, ns::Act::Gelu]\n").replace(
    "[div_ceil(n, THREADS * VEC), 1, 1]", "[div_ceil(n, THREADS) + HAS_BIAS, 1, 1]").replace(
    "[n % VEC == 0]", "[n % 4 == 0]")


def test_boolean_and_enumerator_axes(tmp_path: Path) -> None:
    """true/false and enumerators' qualified names are axis values of non-type template parameters:
    the symbol spells them as C++ does, instance names use true/false and the enumerator's own
    name, and a boolean axis is 1 or 0 in expressions (as bool arguments are)."""
    (m,) = load(tmp_path, FLAGS).modules
    ks = {k.name: k for k in m.kernels if k.instance_of == "scale"}
    assert list(ks) == ["scale_f32_true_Relu", "scale_f32_true_Gelu", "scale_f32_false_Relu", "scale_f32_false_Gelu"]
    k = ks["scale_f32_true_Gelu"]
    assert k.symbol == "scale_kernel<float,true,ns::Act::Gelu>"
    assert k.axis_values == (("T", "f32"), ("HAS_BIAS", True), ("ACT", "ns::Act::Gelu"))
    assert expr.to_text(k.grid[0]) == "div_ceil(n, THREADS) + 1"
    assert expr.to_text(ks["scale_f32_false_Relu"].grid[0]) == "div_ceil(n, THREADS) + 0"
    (d,) = m.dispatches
    assert [(a.name, a.is_type) for a in d.axes] == [("T", True), ("HAS_BIAS", False), ("ACT", False)]
    named = sub("    args:\n      x: {", "    instance_name: s_{HAS_BIAS}_{ACT}\n    args:\n      x: {", FLAGS)
    (tmp_path / "n").mkdir()
    assert [k.name for k in load(tmp_path / "n", named).modules[0].kernels][:2] == ["s_true_Relu", "s_true_Gelu"]
    (tmp_path / "r").mkdir()
    cu = render_catalog(load(tmp_path / "r", FLAGS))["generated/hopper/src/demo.cu"]
    assert "(&::scale_kernel<float,true,ns::Act::Gelu>, 0);" in cu


AXIS_BAD = [
    ("boolean beside integers", ("HAS_BIAS: [true, false]", "HAS_BIAS: [true, 1]"), 11,
     "an axis holds one kind of value: this one holds booleans, not 1"),
    ("unqualified enumerator", ("[Act::Relu, ns::Act::Gelu]", "[Relu, Gelu]"), 12,
     "unknown element type 'Relu' (an enumerator is written with its enum's name (Act::Relu for enum class Act)"),
    ("keyword in an enumerator", ("[Act::Relu, ns::Act::Gelu]", "[Act::Relu, static_cast::Gelu]"), 12,
     "'static_cast::Gelu' is not an enumerator's qualified name ('static_cast' is a C++ keyword)"),
    ("not a name", ("[Act::Relu, ns::Act::Gelu]", "[Act::Relu, 'Act::Gelu()']"), 12,
     "'Act::Gelu()' is not an enumerator's qualified name"),
    ("float value", ("[true, false]", "[true, 1.5]"), 11,
     "expected an element type, an integer, true/false or an enumerator, got number 1.5"),
    ("listed twice", ("[Act::Relu, ns::Act::Gelu]", "[Act::Relu, Act::Relu]"), 12, "Act::Relu is listed twice"),
    ("enumerator in an expression", ("[n % 4 == 0]", "[n % 4 == 0, ACT == 1]"), 23,
     "'ACT' is an axis of enumerators; expressions use integer and boolean axes only"),
    ("enumerator in a type", ('"const {T}*"', '"const {ACT}*"'), 14,
     "{ACT} is an axis of enumerators; types take element-type axes"),
    ("same instance names", ("ns::Act::Gelu]", "ns::Act::Relu]"), 10,
     "instantiations (f32, true, Act::Relu) and (f32, true, ns::Act::Relu) are both named 'scale_f32_true_Relu'"),
]


@pytest.mark.parametrize("change,line,fragment", [b[1:] for b in AXIS_BAD], ids=[b[0] for b in AXIS_BAD])
def test_bad_axis_values_give_file_and_line(tmp_path: Path, change, line: int, fragment: str) -> None:
    assert change[0] in FLAGS, change[0]
    refused_at(tmp_path, FLAGS.replace(*change, 1), line, fragment)


def test_a_keyword_in_a_symbol_points_to_enumerators(tmp_path: Path) -> None:
    spec = sub("    symbol: scale_kernel<{T}, {VEC}>", "    symbol: scale_kernel<{T}, static_cast<Act>({VEC})>")
    refused_at(tmp_path, spec, 8, "an enum value is written by its qualified name (k<Act::Relu>), or by an "
               "instantiate axis of enumerators (ACT: [Act::Relu, Act::Gelu] with k<{ACT}>)")


# ------------------------------------------------------------------ variants covering their argument's type

VARIANTS = sub("    summary: Plain f32.\n", "    summary: Plain f32.\n    variants: {arg: has_bias, symbols: "
               "{0: plain_kernel, 1: plain_bias_kernel}}\n").replace(
    "      - {n: 1}\n", "      - {n: 1, has_bias: 1}\n").replace(
    "      alpha: f32\n    grid: [n, 1, 1]", "      alpha: f32\n    host_args: {has_bias: bool}\n    grid: [n, 1, 1]")


def test_variants_covering_a_bool_need_no_case_without_a_variant(tmp_path: Path) -> None:
    """symbols {0: ..., 1: ...} on a bool argument cover every value: "no variant" cannot happen,
    so the test-case search does not look for it (as for any integer type whose range is covered)."""
    from kernelgen.cases import search_cases, variants_cover

    cat = load(tmp_path, VARIANTS)
    (m,) = cat.modules
    k = m.kernel("plain")
    assert k is not None and variants_cover(k)
    flips, _ = search_cases(m, k, cat.targets[0])
    assert all(kind != "variant" for kind, _, _ in flips)
    cu = render_catalog(cat)["generated/hopper/src/demo.cu"]
    assert "case 0: kg_p.variant = 0; break;" in cu and "case 1: kg_p.variant = 1; break;" in cu


def test_variants_covering_part_of_a_type_still_test_no_variant(tmp_path: Path) -> None:
    from kernelgen.cases import search_cases, variants_cover

    spec = VARIANTS.replace("{0: plain_kernel, 1: plain_bias_kernel}", "{0: plain_kernel, 1: plain_bias_kernel, "
                            "2: plain_two_kernel}").replace("{has_bias: bool}", "{has_bias: u8}")
    cat = load(tmp_path, spec)
    (m,) = cat.modules
    k = m.kernel("plain")
    assert k is not None and not variants_cover(k)
    flips, _ = search_cases(m, k, cat.targets[0])
    (env,) = [dict(env) for kind, _, env in flips if kind == "variant"]
    assert env["has_bias"] not in (0, 1, 2)


# ------------------------------------------------------------------ chains across element types

CHAIN = SPEC + """\
  plain_bf16:
    summary: Plain bf16, reading x only.
    args:
      x: const bf16*
      out: const bf16*
      n: u32
      alpha: f32
    grid: [n, 1, 1]
    block: [THREADS, 1, 1]
    examples:
      - {n: 1}
fallbacks:
  any: [plain_bf16, scale, plain]
"""


def test_chain_members_may_differ_in_element_type_and_constness(tmp_path: Path) -> None:
    cat = load(tmp_path, CHAIN)
    (m,) = cat.modules
    (fb,) = m.fallbacks
    # an instantiated kernel in a chain stands for its instances, in order
    assert [r.kernel for r in fb.members] == [
        "plain_bf16", "scale_f32_4", "scale_f32_1", "scale_bf16_4", "scale_bf16_1", "plain"]
    hopper = cat.target("hopper")
    assert hopper is not None
    (c,) = [c for c in lower_module(cat, m, hopper).chains if not c.dispatch]
    assert [k.name for k in c.keys] == ["x", "out"]
    assert c.keys[0].member_elems == (1, 3, 3, 1, 1, 3)
    out = next(a for a in c.args if a.name == "out")
    assert out.writable and c_type(out) == "void*"  # written by some member


CHAIN_BAD = [
    ("scalar types differ", CHAIN.replace("      n: u32\n      alpha: f32\n    grid: [n, 1, 1]\n    block: [THREADS, 1, 1]\n"
                                          "    examples:\n      - {n: 1}\nfallbacks",
                                          "      n: u64\n      alpha: f32\n    grid: [n, 1, 1]\n    block: [THREADS, 1, 1]\n"
                                          "    examples:\n      - {n: 1}\nfallbacks"), 48, "'n' is u32 in demo.scale_f32_4 but u64 in demo.plain_bf16"),
    ("pointer and scalar", CHAIN.replace("      out: const bf16*\n", "      out: f32\n"), 48,
     "'out' is f32* in demo.scale_f32_4 but f32 in demo.plain_bf16"),
]


@pytest.mark.parametrize("case,spec,line,fragment", CHAIN_BAD, ids=[b[0] for b in CHAIN_BAD])
def test_chain_disagreement_gives_file_and_line(tmp_path: Path, case: str, spec: str, line: int, fragment: str) -> None:
    assert spec != CHAIN
    with pytest.raises(SpecError) as err:
        load(tmp_path, spec)
    assert fragment in str(err.value)
    assert (err.value.loc.path, err.value.loc.line) == ("specs/demo.yaml", line), str(err.value)


# ------------------------------------------------------------------ extends

EXT = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  base:
    summary: Base.
    variants:
      arg: d
      symbols: {64: base_kernel<64>}
    args:
      x: const f32*
      n: u32
      d: u32
    grid: [n, 1, 1]
    block: [128, 1, 1]
    applies_if: [n % 4 == 0, d > 0]
    examples:
      - {n: 8, d: 64}
  derived:
    extends: base
    summary: Derived.
    variants: null
    symbol: derived_kernel
    grid: [n, 2, 1]
"""


def test_extends_inherits_each_key_it_does_not_give(tmp_path: Path) -> None:
    (m,) = load(tmp_path, EXT).modules
    base, derived = m.kernels
    assert derived.symbol == "derived_kernel" and derived.variants is None
    assert derived.summary == "Derived."
    assert [c.text for c in derived.applies_if] == [c.text for c in base.applies_if]
    assert derived.args == base.args and derived.block == base.block and derived.grid != base.grid


EXT_BAD = [
    ("unknown base", EXT.replace("extends: base", "extends: bsae"), 20, "did you mean 'base'"),
    ("itself as base", EXT.replace("extends: base", "extends: derived"), 20, "kernel 'derived' extends itself"),
    ("required removed", EXT.replace("    grid: [n, 2, 1]\n", "    grid: null\n"), 24, "'grid' is required"),
    ("null without extends", EXT.replace("    summary: Base.\n", "    summary: Base.\n    symbol: null\n"), 7,
     "this kernel has no 'extends'"),
    ("symbol and variants", EXT.replace("    variants: null\n", ""), 22, "either 'symbol' or 'variants'"),
]


@pytest.mark.parametrize("case,spec,line,fragment", EXT_BAD, ids=[b[0] for b in EXT_BAD])
def test_bad_extends_gives_file_and_line(tmp_path: Path, case: str, spec: str, line: int, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        load(tmp_path, spec)
    assert fragment in str(err.value)
    assert (err.value.loc.path, err.value.loc.line) == ("specs/demo.yaml", line), str(err.value)


def test_attention_twins_share_their_clause_lists() -> None:
    root = Path(__file__).resolve().parents[2]
    cat = load_catalog(root)
    fa = cat.module("attn_prefill_fa128")
    assert fa is not None
    paged, contiguous = fa.kernels
    assert [c.text for c in paged.applies_if] == [c.text for c in contiguous.applies_if]
    assert (root / "specs/attn_prefill_fa128.yaml").read_text().count("applies_if:") == 1


# ------------------------------------------------------------------ let

LET = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
constants: {TILE: 128, MAX_Z: 4}
kernels:
  tiled:
    summary: Tiled.
    symbol: tiled_kernel
    args:
      x: {type: const f32*, size: rows * k}
      rows: u32
      k: u32
    let:
      tiles: div_ceil(rows, TILE)
      split: max(1, min(MAX_Z, device.sm_count // tiles, k // 1024))
      waves: div_ceil(tiles * split, device.sm_count)
    grid: [tiles, 1, split]
    block: [TILE, 1, 1]
    applies_if: [waves <= 2]
    examples:
      - {rows: 4096, k: 4096}
"""


def test_let_names_are_written_out_where_they_are_used(tmp_path: Path) -> None:
    (m,) = load(tmp_path, LET).modules
    (k,) = m.kernels
    from kernelgen import expr

    written = LET.replace("[tiles, 1, split]", "[div_ceil(rows, TILE), 1, "
                          "max(1, min(MAX_Z, device.sm_count // div_ceil(rows, TILE), k // 1024))]")
    written = written.replace("[waves <= 2]", "[div_ceil(div_ceil(rows, TILE) * max(1, min(MAX_Z, device.sm_count "
                              "// div_ceil(rows, TILE), k // 1024)), device.sm_count) <= 2]")
    written = written.replace("    let:\n", "").replace("      tiles: div_ceil(rows, TILE)\n", "")
    written = "".join(line + "\n" for line in written.splitlines() if not line.startswith(("      split:", "      waves:")))
    (tmp_path / "written").mkdir()
    (m2,) = load(tmp_path / "written", written).modules
    (k2,) = m2.kernels
    assert k.grid == k2.grid and [c.expr for c in k.applies_if] == [c.expr for c in k2.applies_if]
    env = {"TILE": 128, "MAX_Z": 4, "device.sm_count": 132}
    got = [expr.evaluate(k.grid[2], {**env, "rows": r, "k": 8192}) for r in (128, 4096, 65536)]
    assert got == [4, 4, 1]
    assert k.applies_if[0].text == "waves <= 2"  # a reason names the let, as the spec does
    assert k2.applies_if[0].text.startswith("div_ceil(div_ceil(rows, TILE)")


def test_launch_cluster_docs_keep_let_names_then_define_them(tmp_path: Path) -> None:
    """The launchers' documentation shows a launch-time cluster as written, then each let name it
    reads (directly or through another name) with its expression; a conditional picks a width."""
    spec = LET.replace("      split: max(1, min(MAX_Z, device.sm_count // tiles, k // 1024))\n",
                       "      wide: 256 if rows >= 4096 else 128\n"
                       "      split: max(1, min(MAX_Z, 132 // div_ceil(rows, wide), k // 1024))\n")
    spec = spec.replace("    grid: [tiles, 1, split]\n", "    grid: [tiles, 1, split]\n    launch:\n      cluster: [1, 1, split]\n")
    spec = spec.replace("device.sm_count)", "132)")
    (m,) = load(tmp_path, spec).modules
    (k,) = m.kernels
    assert k.launch is not None and k.launch.cluster_text == (
        "[1, 1, split] with wide = 256 if (rows >= 4096) else 128, "
        "split = max(1, min(MAX_Z, 132 // div_ceil(rows, wide), k // 1024))")
    from kernelgen import expr

    env = {"TILE": 128, "MAX_Z": 4, "k": 8192}
    assert [expr.evaluate(k.launch.cluster[2], {**env, "rows": r}) for r in (4096, 8192, 65536)] == [4, 4, 1]


LET_BAD = [
    ("shadows an argument", LET.replace("      tiles: div_ceil", "      rows: 1\n      tiles: div_ceil"), 14,
     "'rows' is already an argument's name"),
    ("shadows a constant", LET.replace("      tiles: div_ceil", "      TILE: 1\n      tiles: div_ceil"), 14,
     "'TILE' is already a constant's name"),
    ("a later name", LET.replace("div_ceil(rows, TILE)\n", "div_ceil(rows, TILE) + split\n"), 14,
     "undefined name 'split'"),
    ("device name in block", LET.replace("block: [TILE, 1, 1]", "block: [split, 1, 1]"), 18,
     "'split' uses 'device.sm_count', which is not available here"),
    ("device name in a size", LET.replace("size: rows * k}", "size: rows * k * waves}"), 10,
     "'waves' uses 'device.sm_count', which is not available here"),
    ("not a mapping", LET[:LET.index("    let:")] + "    let: 3\n" + LET[LET.index("    grid:"):], 13,
     "expected a mapping"),
]


@pytest.mark.parametrize("case,spec,line,fragment", LET_BAD, ids=[b[0] for b in LET_BAD])
def test_bad_let_gives_file_and_line(tmp_path: Path, case: str, spec: str, line: int, fragment: str) -> None:
    refused_at(tmp_path, spec, line, fragment)


def test_let_with_instantiate_and_extends(tmp_path: Path) -> None:
    """A let may use an integer instantiation axis (each instance gets its value), and a kernel
    that extends another inherits its let, or replaces it whole."""
    spec = SPEC.replace("    grid: [div_ceil(n, THREADS * VEC), 1, 1]\n",
                        "    let:\n      per_cta: THREADS * VEC\n    grid: [div_ceil(n, per_cta), 1, 1]\n")
    spec += """  derived:
    extends: scale
    summary: Derived.
  other:
    extends: scale
    summary: Other.
    let:
      per_cta: 64
"""
    (m,) = load(tmp_path, spec).modules
    from kernelgen import expr

    by_name = {k.name: k for k in m.kernels}
    for name, k in by_name.items():
        if k.instance_of is None:
            continue
        vec = dict(k.axis_values)["VEC"]
        per = 64 if k.instance_of == "other" else 256 * vec
        assert expr.evaluate(k.grid[0], {"THREADS": 256, "n": 4096}) == 4096 // per, name
        assert [(n, expr.evaluate(t, {"THREADS": 256})) for n, t in k.lets] == [("per_cta", per)], name
    assert {k.instance_of for k in m.kernels if k.instance_of} == {"scale", "derived", "other"}


# ------------------------------------------------------------------ float scalars of a type axis

AXPY = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
kernels:
  axpy:
    summary: y += alpha x.
    symbol: axpy_kernel<{T}>
    instantiate:
      T: [f32, f16, bf16, f64]
    args:
      n: u32
      alpha: "{T}"
      x: {type: "const {T}*", size: n}
      y: {type: "{T}*", size: n}
    grid: [div_ceil(n, 256), 1, 1]
    block: [256, 1, 1]
    examples:
      - {n: 1000}
  norm_f16:
    summary: A half-precision member with an f16 eps.
    args: {x: "f16*", n: u32, eps: f16}
    grid: [n, 1, 1]
    block: [32, 1, 1]
    examples: [{n: 1}]
  norm_f32:
    extends: norm_f16
    summary: A single-precision member with an f32 eps.
    args: {x: "f32*", n: u32, eps: f32}
fallbacks:
  norm: [norm_f16, norm_f32]
"""


def test_a_float_scalar_may_follow_a_type_axis(tmp_path: Path) -> None:
    """'{T}' as a scalar's type: each instance takes T's scalar (float, __half, ...); the dispatcher
    and chains whose members take different float types take a double, narrowed for each member
    (rounded once); the dispatcher's C++ overloads take each type's own scalar."""
    cat = load(tmp_path, AXPY)
    m = cat.modules[0]
    assert [a.scalar.name for k in m.kernels if k.instance_of == "axpy" for a in k.args if a.name == "alpha"] == [
        "f32", "f16", "bf16", "f64"]
    hopper = cat.target("hopper")
    chains = {c.name: c for c in lower_module(cat, m, hopper).chains}
    assert next(a for a in chains["axpy"].args if a.name == "alpha").scalar.name == "f64"
    assert next(a for a in chains["norm"].args if a.name == "eps").scalar.name == "f64"
    files = render_catalog(cat)
    api = files["generated/hopper/include/kernelgen/demo.h"]
    assert "Outcome axpy(uint32_t n, __half alpha, const __half* x, __half* y, cudaStream_t stream = nullptr);" in api
    assert "Outcome axpy(uint32_t n, double alpha, const double* x, double* y, cudaStream_t stream = nullptr);" in api
    assert "Outcome norm(__half* x, uint32_t n, __half eps, cudaStream_t stream = nullptr);" in api
    assert "Outcome norm(float* x, uint32_t n, float eps, cudaStream_t stream = nullptr);" in api
    assert "int32_t kg_demo__norm(void* x, uint32_t n, double eps, uint32_t kg_dtypes_x, " in \
        files["generated/hopper/include/kernelgen/demo_c.h"]
    c_h = files["generated/hopper/include/kernelgen/demo_c.h"]
    assert "int32_t kg_demo__axpy(uint32_t n, double alpha, const void* x, void* y, uint32_t kg_dtypes_T, " in c_h
    cu = files["generated/hopper/src/demo.cu"]
    assert "kernelgen::demo::axpy_f16(n, __double2half(alpha), static_cast<const __half*>(x)," in cu
    assert "kernelgen::demo::axpy_bf16(n, __double2bfloat16(alpha), " in cu
    assert "kernelgen::demo::axpy_f64(n, alpha, static_cast<const double*>(x)," in cu
    assert "kernelgen::demo::norm_f16(static_cast<__half*>(x), n, __double2half(eps), stream)" in cu
    assert "kernelgen::demo::norm_f32(static_cast<float*>(x), n, static_cast<float>(eps), stream)" in cu
    assert "Outcome axpy(uint32_t n, __half alpha, const __half* x, __half* y, cudaStream_t stream) {\n" \
           "  kernelgen::Outcome kg_o, kg_r;  // kg_r: the last outcome of a kernel present on this target\n" \
           "  bool kg_present = false;\n  kg_o = kernelgen::demo::axpy_f16(n, alpha, x, y, stream);" in cu
    pyi = files["generated/hopper/python/demo.pyi"]
    assert "alpha: _kg_builtins.float" in pyi
    # the docs spell what the members type differently: by the axis, or by the members' types
    assert '"""(n: u32, alpha: f32|f16|bf16|f64, x: const f32|f16|bf16|f64*, y: f32|f16|bf16|f64*, *, stream=None) ' \
        '-> Outcome' in pyi
    assert '"""(x: f16|f32*, n: u32, eps: f16|f32, *, stream=None) -> Outcome' in pyi


@pytest.mark.parametrize("old,new,fragment", [
    ("      T: [f32, f16, bf16, f64]", "      T: [f32, i32]",
     "a scalar of an element-type axis must be a float type (f16, bf16, f32, f64); this instance's T is i32"),
    ('      alpha: "{T}"', '      alpha: "const {T}"', "a scalar of an element-type axis must be a float type"),
    ('      x: {type: "const {T}*", size: n}\n      y: {type: "{T}*", size: n}\n',
     '      x: {type: "const f32*", size: n}\n      y: {type: "f32*", size: n}\n',
     "type axis 'T' is used by no pointer argument type"),
    ("    args: {x: \"f16*\", n: u32, eps: f16}\n    grid: [n, 1, 1]\n    block: [32, 1, 1]\n    examples: [{n: 1}]",
     "    args: {x: \"f16*\", n: u32, eps: u32}\n    grid: [n, 1, 1]\n    block: [32, 1, 1]\n"
     "    examples: [{n: 1, eps: 1}]", "'eps' is f32 in demo.norm_f32 but u32 in demo.norm_f16"),
])
def test_float_scalar_axis_refusals(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    assert old in AXPY
    with pytest.raises(SpecError) as err:
        load(tmp_path, AXPY.replace(old, new, 1))
    assert fragment in str(err.value), str(err.value)
