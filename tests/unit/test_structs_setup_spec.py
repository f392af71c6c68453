"""Template-id symbols, structs by value, zeroed arrays and __constant__ values in specs: what
the loader accepts (and the model it builds) and what it refuses, with file:line errors; and
what the emitters make of them (C struct, C++ static_asserts and set-up, binding tables, .pyi,
contract tests, Rust)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import symbols
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog

TARGETS = (Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

SPEC = """\
module: demo
summary: A demo module.
sources: [kernels/demo.cu]
structs:
  dims:
    cpp: ns::corr_dims
    fields: {v0: f32, v1: f32}
  params:
    fields:
      n: i32
      offset: i64
      bias: f32[2]
kernels:
  rope:
    symbol: rope_kernel<ns::Op<float>, true, &ns::fn>
    summary: Rotates.
    args:
      x: {type: const f32*, size: n}
      counter: {type: u32*, size: 1, zero: true}
      n: u32
      d: dims
      p: params
    host_args:
      scale: {type: f32, to_symbol: ns::g_scale}
      rows: u32
    grid: [rows, 1, 1]
    block: [64, 1, 1]
    examples:
      - {n: 128, rows: 4}
"""


def project(tmp_path: Path, spec: str = SPEC) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "demo.cu").write_text("// demo\n")
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "demo.yaml").write_text(spec)
    return tmp_path


def test_model(tmp_path: Path) -> None:
    (m,) = load_catalog(project(tmp_path)).modules
    k = m.kernels[0]
    assert k.symbol == "rope_kernel<ns::Op<float>,true,&ns::fn>"
    dims, params = m.structs
    assert (dims.cpp, dims.size, dims.align, [f.offset for f in dims.fields]) == ("ns::corr_dims", 8, 4, [0, 4])
    assert (params.size, params.align, [f.offset for f in params.fields]) == (24, 8, [0, 8, 16])
    assert params.fields[2].count == 2 and params.fields[2].spelling == "f32[2]"
    by = {a.name: a for a in k.all_args}
    assert by["d"].struct is dims and by["p"].spelling == "params"
    assert by["counter"].zero and by["scale"].to_symbol == "ns::g_scale" and by["scale"].host
    assert [a.name for a in k.int_args] == ["n", "rows"]


@pytest.mark.parametrize("text,canonical,base", [
    ("my_kernel", "my_kernel", "my_kernel"),
    ("ns::k<256>", "ns::k<256>", "k"),
    ("adamw_kernel3<__nv_bfloat16, float>", "adamw_kernel3<__nv_bfloat16,float>", "adamw_kernel3"),
    ("act<ns::SiluOp<float>, __nv_bfloat16>", "act<ns::SiluOp<float>,__nv_bfloat16>", "act"),
    ("k<a<b<c>>>", "k<a<b<c> > >", "k"),
    ("k<true, -4, &fn, unsigned int, const float*>", "k<true,-4,&fn,unsigned int,const float*>", "k"),
    ("::k< 1 >", "k<1>", "k"),  # the generated code names it from the global namespace itself
    ("k<0x10, 0b11u, 7UL>", "k<0x10,0b11u,7UL>", "k"),
    ("k<long long, const unsigned char*>", "k<long long,const unsigned char*>", "k"),
])
def test_symbol_tokenizer_accepts_template_ids(text: str, canonical: str, base: str) -> None:
    s = symbols.parse(text)
    assert (s.text, s.base) == (canonical, base)


@pytest.mark.parametrize("text,fragment", [
    ("k<1>;evil()", "';'"),
    ("k<1", "not closed"),
    ("k<1>>", "unexpected '>'"),
    ("k(1)", "unexpected '('"),
    ("k<\"x\">", "'\"'"),
    ("k<1,,2>", "empty template argument"),
    ("k<a-b>", "'-' is allowed only before an integer"),
    ("int", "keyword"),
    ("k<1> extra", "after the template arguments"),
    ("k<{T}>", "'{'"),
    ("k<1 2>", "side by side"),
    ("k<12abc>", "side by side"),
    ("k<T U>", "side by side"),
    ("k<16,>", "empty template argument"),
    ("k<1'000>", "\"'\""),
])
def test_symbol_tokenizer_refuses(text: str, fragment: str) -> None:
    with pytest.raises(symbols.SymbolError, match=None) as err:
        symbols.parse(text)
    assert fragment in str(err.value), str(err.value)


def _error(tmp_path: Path, spec: str) -> SpecError:
    with pytest.raises(SpecError) as err:
        load_catalog(project(tmp_path, spec))
    return err.value


def _line(spec: str, needle: str) -> int:
    return next(i for i, ln in enumerate(spec.splitlines(), 1) if needle in ln)


BAD = [
    ("symbol with a semicolon", "    symbol: rope_kernel<ns::Op<float>, true, &ns::fn>",
     "    symbol: rope_kernel<1>; x", "    symbol:", "is not a C++ function name or template-id"),
    ("field type", "      n: i32\n", "      n: int\n", "      n: int", "'int' is not a field type"),
    ("array length", "      bias: f32[2]", "      bias: f32[0]", "      bias:", "array length 0 is outside"),
    ("struct named like a type", "  dims:\n", "  f32:\n", "  f32:", "has the name of a registry type"),
    ("unknown struct", "      d: dims\n", "      d: dimz\n", "      d: dimz", "unknown scalar type 'dimz'"),
    ("const struct", "      d: dims\n", "      d: const dims\n", "      d: const dims", "'const' applies only to pointers"),
    ("zero on const", "      counter: {type: u32*, size: 1, zero: true}", "      counter: {type: const u32*, size: 1, zero: true}",
     "      counter:", "'zero' applies only to writable pointers"),
    ("zero without size", "      counter: {type: u32*, size: 1, zero: true}", "      counter: {type: u32*, zero: true}",
     "      counter:", "'zero' needs 'size'"),
    ("zero on a strided view", "      counter: {type: u32*, size: 1, zero: true}",
     "      counter: {type: u32*, size: 1, contiguous: false, zero: true}",
     "      counter:", "'zero' applies only to contiguous arrays"),
    ("zero on a strided view, block style", "      counter: {type: u32*, size: 1, zero: true}",
     "      counter:\n        type: u32*\n        zero: true\n        size: n\n        contiguous: false",
     "        zero:", "'zero' applies only to contiguous arrays"),
    ("to_symbol on a kernel argument", "      n: u32\n      d: dims", "      n: {type: u32, to_symbol: g_n}\n      d: dims",
     "      n: {type", "'to_symbol' applies only to host arguments"),
    ("float host argument without to_symbol", "      scale: {type: f32, to_symbol: ns::g_scale}", "      scale: f32",
     "      scale: f32", "host arguments must be integers (or bool), unless copied with 'to_symbol'"),
    ("bad to_symbol", "to_symbol: ns::g_scale", "to_symbol: g-scale", "      scale:", "is not the name of a __constant__"),
    ("template struct without header", "    cpp: ns::corr_dims", "    cpp: ns::corr_dims<float>", "    cpp:",
     "is a template; the C++ API cannot forward-declare it"),
    ("struct in an expression", "    grid: [rows, 1, 1]", "    grid: [d, 1, 1]", "    grid:",
     "'d' is a struct argument; expressions use integer arguments only"),
    ("struct array field in an expression", "    grid: [rows, 1, 1]", "    grid: [\"div_ceil(p.bias, 128)\", 1, 1]",
     "    grid:", "field 'p.bias' is an array (2 elements); expressions read scalar fields"),
    ("missing struct field in a let", "    grid: [rows, 1, 1]", "    let: {tiles: p.offsets}\n    grid: [tiles, 1, 1]",
     "    let:", "'p' (struct 'params') has no field 'offsets' (did you mean 'offset'?)"),
    ("float struct field in a size", "      x: {type: const f32*, size: n}", "      x: {type: const f32*, size: d.v0}",
     "      x: {type", "field 'd.v0' is f32; expressions use integers only"),
    ("struct field not in the example", "    grid: [rows, 1, 1]", "    grid: [\"div_ceil(p.n, 128)\", 1, 1]",
     "      - {n: 128", "the first example must give every integer argument; missing 'p.n'"),
    ("method of a struct argument", "    grid: [rows, 1, 1]", "    grid: [p.size(), 1, 1]", "    grid:",
     "'p.size()' calls a method; expressions read a struct argument's integer fields (p.field)"),
    ("method of an integer argument", "    grid: [rows, 1, 1]", "    grid: [rows.bit_length(), 1, 1]", "    grid:",
     "expressions have no attributes or methods; 'rows.bit_length()' calls a method of 'rows'"),
    ("attribute of a pointer", "    grid: [rows, 1, 1]", "    grid: [x.shape, 1, 1]", "    grid:",
     "expressions have no attributes or methods; 'x.shape' reads an attribute of 'x' ('x' is a pointer"),
    ("pointer in a let", "    grid: [rows, 1, 1]", "    let: {tiles: x}\n    grid: [tiles, 1, 1]", "    let:",
     "'x' is a pointer; expressions use integer arguments only"),
    ("align not a power of two", "    fields: {v0: f32, v1: f32}", "    fields: {v0: f32, v1: f32}\n    align: 12",
     "    align:", "alignment 12 is not a power of two up to 128"),
    ("from a struct that is no argument", "      rows: u32", "      rows: {type: u32, from: q.n}", "      rows:",
     "'q' is not an argument of the kernel ('from' reads a field of a struct argument (d, p))"),
    ("from a scalar argument", "      rows: u32", "      rows: {type: u32, from: n.x}", "      rows:",
     "'n' is not a struct argument"),
    ("from a field the struct lacks", "      rows: u32", "      rows: {type: i32, from: p.m}", "      rows:",
     "'p' (struct 'params') has no field 'm' (expected one of: bias, n, offset)"),
    ("from a float field", "      rows: u32", "      rows: {type: u32, from: d.v0}", "      rows:",
     "field 'd.v0' is f32; 'from' reads an integer field"),
    ("from an array field", "      rows: u32", "      rows: {type: u32, from: p.bias}", "      rows:",
     "field 'p.bias' is an array (2 elements); 'from' reads a scalar field"),
    ("from a field of another type", "      rows: u32", "      rows: {type: u32, from: p.n}", "      rows:",
     "field 'p.n' is i32, but host argument 'rows' is u32 (give 'rows' the field's type: {type: i32, from: p.n})"),
    ("from below a scalar field", "      rows: u32", "      rows: {type: i32, from: p.n.x}", "      rows:",
     "field 'p.n' is a scalar, not a struct: it has no field 'x'"),
    ("from on a kernel argument", "      n: u32\n      d: dims", "      n: {type: u32, from: p.n}\n      d: dims",
     "      n: {type", "'from' applies to integer host arguments (host_args)"),
    ("from without a field", "      rows: u32", "      rows: {type: u32, from: p}", "      rows:",
     "'p' is not a struct argument's field"),
    ("from and to_symbol", "      rows: u32", "      rows: {type: i32, from: p.n, to_symbol: g_rows}", "      rows:",
     "'from' and 'to_symbol' do not go together"),
    ("align above 128", "    fields: {v0: f32, v1: f32}", "    fields: {v0: f32, v1: f32}\n    align: 256",
     "    align:", "alignment 256 is not a power of two up to 128"),
    ("align below the fields'", "      bias: f32[2]\n", "      bias: f32[2]\n    align: 4\n", "    align:",
     "alignment 4 is less than the fields' (8)"),
]


@pytest.mark.parametrize("old,new,where,fragment", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refused_with_file_line(tmp_path: Path, old: str, new: str, where: str, fragment: str) -> None:
    assert old in SPEC, old
    spec = SPEC.replace(old, new, 1)
    err = _error(tmp_path, spec)
    assert err.loc.path == "specs/demo.yaml"
    assert err.loc.line == _line(spec, where), (str(err), _line(spec, where))
    assert fragment in str(err), str(err)


def test_a_host_argument_read_from_a_field(tmp_path: Path) -> None:
    """``from``: the host argument records its struct argument and fields (the offset summed down
    a nested struct); the launchers do not take it, plans do; the field's type is required."""
    spec = SPEC.replace("      rows: u32", "      rows: {type: i64, from: p.offset}")
    (m,) = load_catalog(project(tmp_path, spec)).modules
    (k,) = m.kernels
    rows = next(a for a in k.host_args if a.name == "rows")
    assert (rows.source, rows.source_text, rows.source_offset, rows.derived) == ("p", "p.offset", 8, True)
    from kernelgen.lower import lower_kernel

    lk = lower_kernel(m, k, load_catalog(tmp_path).targets[0])
    assert "rows" not in [a.name for a in lk.args] and [a.name for a in lk.int_args] == ["n", "rows"]
    assert [a.name for a in lk.derived] == ["rows"]


def test_fields_read_in_expressions(tmp_path: Path) -> None:
    """``p.n`` in an expression: a host argument read from the field, named after it (``p_n``),
    added only where an expression reads it; the one declared with ``from`` where there is one;
    examples give it by the field's path; clause texts show the field."""
    for sub in "abc":
        (tmp_path / sub).mkdir()
    spec = SPEC.replace("    grid: [rows, 1, 1]", "    grid: [\"div_ceil(p.n, 128)\", rows, 1]\n"
                        "    requires: [p.offset >= 0]").replace("{n: 128, rows: 4}", "{n: 128, rows: 4, p.n: 256, p.offset: 0}")
    (m,) = load_catalog(project(tmp_path / "a", spec)).modules
    (k,) = m.kernels
    derived = [(a.name, a.source_text, a.scalar.name) for a in k.host_args if a.derived]
    assert derived == [("p_n", "p.n", "i32"), ("p_offset", "p.offset", "i64")], derived
    assert dict(k.examples[0])["p_n"] == 256 and k.requires[0].text == "p.offset >= 0"
    # a host argument declared with from stands for the field
    declared = spec.replace("      rows: u32", "      rows: u32\n      count: {type: i32, from: p.n}")
    (m,) = load_catalog(project(tmp_path / "b", declared.replace("p.n: 256", "count: 256"))).modules
    (k,) = m.kernels
    assert [a.name for a in k.host_args if a.derived] == ["count", "p_offset"]
    # a name the kernel uses already: p_n_field
    taken = spec.replace("      rows: u32", "      rows: u32\n      p_n: u32").replace("rows: 4,", "rows: 4, p_n: 1,")
    (m,) = load_catalog(project(tmp_path / "c", taken)).modules
    assert [a.name for a in m.kernels[0].host_args if a.derived] == ["p_n_field", "p_offset"]


def test_chain_members_read_a_shared_host_argument_alike(tmp_path: Path) -> None:
    """Two members of a chain with a host argument of one name: both read it from the same field,
    or both take it."""
    one = SPEC.replace("      rows: u32", "      rows: {type: i32, from: p.n}")
    two = one[one.index("  rope:\n"):].replace("  rope:\n", "  rope2:\n", 1)
    ok = one + two + "fallbacks:\n  both: [rope, rope2]\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert load_catalog(project(tmp_path / "a", ok)).modules[0].fallbacks[0].name == "both"
    bad = one + two.replace("      rows: {type: i32, from: p.n}", "      rows: i32") + "fallbacks:\n  both: [rope, rope2]\n"
    err = _error(tmp_path / "b", bad)
    assert "host argument 'rows' is taken by the launcher in demo.rope2 but read from p.n in demo.rope" in str(err), \
        str(err)


def test_emitters(tmp_path: Path) -> None:
    files = render_catalog(load_catalog(project(tmp_path)))
    base = "generated/hopper/"
    c_h = files[base + "include/kernelgen/demo_c.h"]
    assert "typedef struct kg_demo__params__t {\n  int32_t n;\n  int64_t offset;\n  float bias[2];\n} kg_demo__params__t;" in c_h
    assert "int32_t kg_demo__rope(const void* x, void* counter, uint32_t n, kg_demo__dims__t d, kg_demo__params__t p, " \
           "float scale, uint32_t rows, void* stream, const kg_kernel_info** kg_ran);" in c_h
    api = files[base + "include/kernelgen/demo.h"]
    assert "namespace ns { struct corr_dims; }" in api and "struct params;" in api
    assert "Outcome rope(const float* x, uint32_t* counter, uint32_t n, ::ns::corr_dims d, ::params p, float scale, " \
           "uint32_t rows, cudaStream_t stream = nullptr);" in api
    cu = files[base + "src/demo.cu"]
    assert "static_assert(kg_layout<8, offsetof(kg_struct_params, offset)>::same, \"kernelgen: specs/demo.yaml:11: " \
           "struct 'params' (C++ params): field 'offset' is not at offset 8" in cu
    assert "static_assert(kg_layout<8, sizeof(kg_struct_dims)>::same," in cu
    assert "static_assert(kg_layout<8, alignof(kg_struct_params)>::same," in cu
    assert "static_assert(sizeof(::ns::g_scale) == 4, \"kernelgen: specs/demo.yaml:24: kernel 'rope': host argument " \
           "'scale'" in cu
    assert "cudaMemsetAsync(counter, 0, static_cast<size_t>(kg_sizes[1]) * 4u, stream)" in cu
    assert "cudaMemcpyToSymbolAsync(::ns::g_scale, &scale, 4, 0, cudaMemcpyHostToDevice, stream)" in cu
    assert "cudaStreamIsCapturing(stream, &kg_capture)" in cu
    assert cu.index("cudaMemsetAsync") < cu.index("cudaMemcpyToSymbolAsync") < cu.index("<<<")
    assert "using kg_signature_rope = void (*)(const float*, uint32_t*, uint32_t, ::ns::corr_dims, ::params);" in cu
    # the kernel is named at global scope, as the spec spells it, before the launchers' namespace opens
    named = "constexpr auto kg_kernel_rope_0 = kg::pick<kg_signature_rope>(&::rope_kernel<ns::Op<float>,true,&ns::fn>, 0);"
    assert named in cu and cu.index(named) < cu.rindex("namespace kernelgen::demo {")
    assert "kg::same_arity_v<std::remove_const_t<decltype(::kg_kernel_rope_0)>, kg_signature_rope>" in cu
    assert "kg::struct_from_c<::ns::corr_dims>(d)" in cu
    binding = files[base + "python/demo.cpp"]
    assert '{"offset", 4, 0, 8, -1},' in binding and '{"bias", 5, 2, 16, -1},' in binding
    assert '{"p", kg::py::kStruct, 1, 0, 0, -1, 0, 0, 0, -1, 0},  // params' in binding
    assert "*static_cast<const kg_demo__params__t*>(v[4].p)" in binding
    pyi = files[base + "python/demo.pyi"]
    assert "class params(_kg_TypedDict):" in pyi and "    bias: _kg_Sequence[_kg_builtins.float]" in pyi
    assert "d: _kg_arg_dims, p: _kg_arg_params, *, scale: _kg_builtins.float, rows: _kg_builtins.int, " in pyi
    tests = files[base + "tests/test_demo_hopper_contract.py"]
    assert "'p': {'n': 0, 'offset': 0, 'bias': [0, 0]}" in tests
    assert "def test_rope_struct_d_fields_are_checked():" in tests
    rust = files[base + "rust/src/demo.rs"]
    assert "#[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq)]\npub struct Params {\n    pub n: i32,\n" \
           "    pub offset: i64,\n    pub bias: [f32; 2],\n}" in rust
    assert "d: super::Dims, p: super::Params, " in rust


def _generated_check(root: Path, name: str, sym: str, kernel: str, where: str, sig: str, tail: str = "") -> Path:
    """A generated launcher file whose line 2 names one kernel's symbol as the emitter writes it
    (CppKernel.kernel_vars), for the build's error mapping; ``tail`` follows."""
    gen = root / "generated" / "hopper" / "src"
    gen.mkdir(parents=True, exist_ok=True)
    cu = gen / f"{name}.cu"
    cu.write_text(
        "// generated\n"
        f"constexpr auto kg_kernel_{kernel}_0 = kg::pick<kg_signature_{kernel}>(&{sym}, 0);  "
        f"// kernelgen: {where}: kernel '{kernel}': parameters ({sig})\n" + tail
    )
    return cu


def test_the_symbol_line_is_the_emitters(tmp_path: Path) -> None:
    """_generated_check writes the line as the emitter does (the build's diagnosis reads it back)."""
    cat = load_catalog(project(tmp_path, SPEC))
    cu = render_catalog(cat)["generated/hopper/src/demo.cu"]
    line = next(ln for ln in cu.splitlines() if ln.startswith("constexpr auto kg_kernel_rope_0 = "))
    assert line.endswith("// kernelgen: specs/demo.yaml:14: kernel 'rope': parameters (const f32* x, u32* counter, "
                         "u32 n, dims d, params p)"), line


def test_build_maps_a_symbol_that_does_not_compile_to_its_spec_line(tmp_path: Path) -> None:
    from kernelgen.build import _explain_failure

    cu = _generated_check(tmp_path, "act", "::act_kernel<ops::GeluOp,__nv_bfloat16>", "gelu", "specs/act.yaml:30",
                          "const bf16* x")
    lines = [f'{cu}(2): error: namespace "ops" has no member "GeluOp"',
             f'{cu}(2): error: no instance of overloaded function "kg::pick" matches the argument list', "2 errors"]
    text = _explain_failure(lines, tmp_path)
    assert text.startswith("kernelgen: specs/act.yaml:30: kernel 'gelu': symbol 'act_kernel<ops::GeluOp,__nv_bfloat16>' "
                           "does not compile: namespace \"ops\" has no member \"GeluOp\""), text
    assert "overloaded" not in text.splitlines()[0], text  # the failed choice among overloads follows from it
    lines = [f'{cu}(2): error: identifier "act_kernel" is undefined']
    assert "symbol 'act_kernel<ops::GeluOp,__nv_bfloat16>' is not declared by the module's sources" in \
        _explain_failure(lines, tmp_path)
    lines = [f'{cu}(7): error: something else entirely']
    assert "kernelgen: specs/act.yaml" not in _explain_failure(lines, tmp_path)


def test_an_overloaded_symbol_without_the_specs_overload_is_named(tmp_path: Path) -> None:
    """Overloaded kernels: kg::pick takes the overload with the spec's exact parameters; when none
    has them, the message says so with the spec's parameters, not as a template problem."""
    from kernelgen.build import _explain_failure

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "ovl.cu").write_text("__global__ void addk(float* x, unsigned long long n, float v) {}\n"
                                                 "__global__ void addk(double* x, long long n, double v);\n"
                                                 "__global__ void addk(double* x, long long n, double v) {}\n")
    cu = _generated_check(tmp_path, "ovl", "::addk", "add_f64", "specs/ovl.yaml:12", "f64* x, u64 n, f64 v",
                          '#include "kernels/ovl.cu"\n')
    pick = [f'{cu}(2): error: no instance of overloaded function "kg::pick" matches the argument list']
    text = _explain_failure(pick, tmp_path)
    assert text.startswith("kernelgen: specs/ovl.yaml:12: kernel 'add_f64': symbol 'addk' names overloaded __global__ "
                           "functions, and none takes exactly the spec's parameters (f64* x, u64 n, f64 v); "), text
    # One function (declared, then defined) is no overload set: a template-id naming no instance of it, say.
    (tmp_path / "kernels" / "ovl.cu").write_text("template <class T> __global__ void addk(T* x, long long n, T v);\n"
                                                 "template <class T> __global__ void addk(T* x, long long n, T v) {}\n")
    text = _explain_failure(pick, tmp_path)
    assert "overloaded" not in text.splitlines()[0] and text.startswith(
        "kernelgen: specs/ovl.yaml:12: kernel 'add_f64': symbol 'addk' names no function that can take the spec's "
        "parameters (f64* x, u64 n, f64 v): for a template, check the symbol's template arguments"), text


@pytest.mark.parametrize("source,hint", [
    ("namespace ops { template <class Op, class T> __global__ void act_kernel(const T* x) {} }",
     "(the sources declare __global__ ops::act_kernel: spell the symbol with its namespace"),
    ("template <class Op, class T> __global__ void __launch_bounds__(256) act_kernl(const T* x) {}",
     "(did you mean 'act_kernl'? it is a __global__ function of the sources)"),
    ("__global__ void fill(float* y) {}\nnamespace n { __global__ void copy(float* y) {} }",
     "(the sources declare __global__ functions fill, n::copy)"),
    ("// no kernels here\n", ""),
])
def test_an_undeclared_symbol_names_the_sources_kernels(tmp_path: Path, source: str, hint: str) -> None:
    """The message for a symbol the sources do not declare names the __global__ functions they
    do declare (with their namespaces): the one spelled the same in a namespace, the closest name,
    or all of them."""
    from kernelgen.build import _explain_failure

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "act.cu").write_text(source)
    cu = _generated_check(tmp_path, "act", "::act_kernel<ops::GeluOp,__nv_bfloat16>", "gelu", "specs/act.yaml:30",
                          "const bf16* x",
                          '#include "kernelgen/runtime.h"\n#include "kernels/act.cu"\n')
    text = _explain_failure([f'{cu}(2): error: identifier "act_kernel" is undefined'], tmp_path)
    first = text.splitlines()[0]
    assert "is not declared by the module's sources" in first, text
    if hint:
        assert hint in first, first
    else:
        assert first.endswith("or list the source that defines it under sources"), first


def test_global_names_reads_namespaces_and_skips_attributes() -> None:
    from kernelgen.kernel_source import global_names

    text = ("namespace a { namespace b::c { struct S { int f() { return 0; } };\n"
            "template <int C> __global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(128, 2) k2(int x) {}\n"
            "} /* __global__ void not_me(); */ __global__ void k1(); }\n"
            "namespace { __global__ void k3(int); }\n__global__ void k4(int); __global__ void k4(int) {}\n")
    assert global_names([("k.cu", text)]) == ["a::b::c::k2", "a::k1", "k3", "k4"]


def test_half_precision_and_bool_fields_have_their_c_and_rust_layouts(tmp_path: Path) -> None:
    """f16/bf16 fields are their 16-bit patterns in the C ABI and Rust (the binding rounds Python
    numbers once to them), bool fields one byte; offsets follow natural alignment."""
    spec = SPEC.replace("      bias: f32[2]", "      bias: f32[2]\n      h: f16\n      b: bf16[3]\n      flag: bool")
    cat = load_catalog(project(tmp_path, spec))
    st = next(s for s in cat.modules[0].structs if s.name == "params")
    assert [(f.name, f.offset) for f in st.fields] == [("n", 0), ("offset", 8), ("bias", 16), ("h", 24), ("b", 26),
                                                       ("flag", 32)]
    assert (st.size, st.align) == (40, 8)
    files = render_catalog(cat)
    c_h = files["generated/hopper/include/kernelgen/demo_c.h"]
    assert "  uint16_t h;\n  uint16_t b[3];\n  bool flag;\n} kg_demo__params__t;" in c_h
    lib = files["generated/hopper/rust/src/demo.rs"]
    assert "pub h: u16," in lib and "pub b: [u16; 3]," in lib and "pub flag: bool," in lib


def test_align_raises_a_structs_alignment_and_its_layouts(tmp_path: Path) -> None:
    """`align` (CUDA's float2: 8; a struct declared __align__(16)): the layout's size rounds up to it,
    the C++ check expects it, the C ABI struct and the Rust struct carry it; without it, nothing
    changes."""
    spec = SPEC.replace("    fields: {v0: f32, v1: f32}", "    fields: {v0: f32, v1: f32, v2: f32}\n    align: 16", 1)
    catalog = load_catalog(project(tmp_path, spec))
    dims, params = catalog.module("demo").structs
    assert (dims.size, dims.align, dims.over_aligned) == (16, 16, 16)
    assert (params.size, params.align, params.over_aligned) == (24, 8, 0)
    files = render_catalog(catalog)
    base = "generated/hopper/"
    c_h = files[base + "include/kernelgen/demo_c.h"]
    assert "typedef struct __attribute__((aligned(16))) kg_demo__dims__t {" in c_h
    assert "typedef struct kg_demo__params__t {" in c_h
    cu = files[base + "src/demo.cu"]
    assert "static_assert(kg_layout<16, sizeof(kg_struct_dims)>::same," in cu and \
        "static_assert(kg_layout<16, alignof(kg_struct_dims)>::same," in cu
    rust = files[base + "rust/src/demo.rs"]
    assert "#[repr(C, align(16))]\n#[derive(Clone, Copy, Debug, Default, PartialEq)]\npub struct Dims {" in rust
    assert "#[repr(C)]\n#[derive(Clone, Copy, Debug, Default, PartialEq)]\npub struct Params {" in rust
    binding = files[base + "python/demo.cpp"]
    assert '"dims", 16, 16, kg_fields_dims' in binding.replace("{ ", "").replace(" }", "")



def test_stateless_functor_is_passed_by_the_launcher(tmp_path: Path) -> None:
    """A struct without fields (`fields: {}` or none) is a stateless functor: one byte, checked
    empty at build time, passed as ``Op{}`` by the C++ launch and absent from every API (C++, C,
    Python, .pyi, Rust, contract tests), chains and dispatchers included."""
    spec = SPEC.replace("structs:\n", "structs:\n  silu: {cpp: ns::SiluOp}\n  gelu: {cpp: ns::Gelu, fields: {}}\n", 1)
    spec = spec.replace("    args:\n      x: {type: const f32*, size: n}\n",
                        "    args:\n      op: silu\n      x: {type: const f32*, size: n}\n", 1)
    spec = spec.replace("      p: params\n", "      p: params\n      g: gelu\n", 1)
    catalog = load_catalog(project(tmp_path, spec))
    silu, gelu = catalog.module("demo").structs[:2]
    assert (silu.stateless, silu.size, silu.align, gelu.stateless) == (True, 1, 1, True)
    k = catalog.module("demo").kernel("rope")
    assert [a.name for a in k.args if a.implicit] == ["op", "g"]
    files = render_catalog(catalog)
    base = "generated/hopper/"
    cu = files[base + "src/demo.cu"]
    assert "using kg_signature_rope = void (*)(::ns::SiluOp, const float*, uint32_t*, uint32_t, ::ns::corr_dims, " \
           "::params, ::ns::Gelu);" in cu
    assert ">>>(::ns::SiluOp{}, x, kg::arg<kg_f, 2>(counter), kg::arg<kg_f, 3>(n), d, p, ::ns::Gelu{});" in cu
    assert "static_assert(std::is_empty_v<kg_struct_silu>, \"kernelgen: specs/demo.yaml:5: struct 'silu' (C++ " \
           "ns::SiluOp): the spec gives no fields" in cu
    assert "kg_struct_silu) ==" not in cu  # no size check against a C struct: there is none
    api = files[base + "include/kernelgen/demo.h"]
    assert "Outcome rope(const float* x, uint32_t* counter, uint32_t n, ::ns::corr_dims d, ::params p, float scale, " \
           "uint32_t rows, cudaStream_t stream = nullptr);" in api
    assert "SiluOp" not in api and "Gelu" not in api
    c_h = files[base + "include/kernelgen/demo_c.h"]
    assert "silu" not in c_h and "gelu" not in c_h
    binding = files[base + "python/demo.cpp"]
    assert '"op"' not in binding and '"g"' not in binding and '"silu"' not in binding
    pyi = files[base + "python/demo.pyi"]
    assert "class silu" not in pyi and "op:" not in pyi
    assert "silu" not in files[base + "tests/test_demo_hopper_contract.py"]
    rust = files[base + "rust/src/demo.rs"]
    assert "Silu" not in rust and "Gelu" not in rust


@pytest.mark.parametrize("old,new,fragment", [
    ("  dims:\n    cpp: ns::corr_dims\n    fields: {v0: f32, v1: f32}\n",
     "  dims:\n    cpp: ns::corr_dims\n    fields: {}\n    align: 8\n", "a struct without fields (a stateless functor) "
     "takes no align"),
    ("    fields: {v0: f32, v1: f32}\n", "    fields: [v0]\n", "or {} for a stateless functor"),
])
def test_stateless_functor_refusals(tmp_path: Path, old: str, new: str, fragment: str) -> None:
    assert old in SPEC
    err = _error(tmp_path, SPEC.replace(old, new, 1))
    assert fragment in str(err), str(err)


def test_a_to_symbol_the_sources_lack_is_named_with_the_closest_variable(tmp_path: Path) -> None:
    """A host argument's to_symbol that names no variable: nvcc reports the name undeclared on the
    generated size check; the message names the spec line and the closest __constant__ variable."""
    from kernelgen.build import _explain_failure

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "rope.cu").write_text(
        "namespace ns {\n__constant__ float g_rope_scale;\n__device__ __align__(16) int g_table[4] = {0};\n}\n")
    gen = tmp_path / "generated" / "hopper" / "src"
    gen.mkdir(parents=True)
    cu = gen / "rope.cu"
    cu.write_text('#include "kernels/rope.cu"\n'
                  "static_assert(sizeof(::ns::g_rope_scal) == 4, \"kernelgen: specs/rope.yaml:21: kernel 'rope': "
                  "host argument 'scale': to_symbol 'ns::g_rope_scal' must name a __constant__ variable\");\n")
    text = _explain_failure([f'{cu}(2): error: namespace "ns" has no member "g_rope_scal"'], tmp_path)
    assert text.startswith("kernelgen: specs/rope.yaml:21: kernel 'rope': host argument 'scale': to_symbol "
                           "'ns::g_rope_scal' is not declared by the module's sources; name the __constant__ "
                           "variable the kernel reads, with its namespace (did you mean 'ns::g_rope_scale'?)"), text


def test_a_failed_layout_check_says_the_cpp_types_number() -> None:
    """nvcc's note on the kg_layout instantiation at the failed check's line gives the C++ type's
    number; the build's message adds it (and not a note of another line's check)."""
    from kernelgen.build import _explain_failure

    lines = [
        'gen/x.cu(3): error: static assertion failed with "the spec\'s layout (kg_spec) differs from the C++ type\'s"',
        '          detected during instantiation of class "kg_layout<kg_spec, kg_cpp> [with kg_spec=8UL, '
        'kg_cpp=16UL]" at line 40',
        '          detected during instantiation of class "kg_layout<kg_spec, kg_cpp> [with kg_spec=4UL, '
        'kg_cpp=8UL]" at line 7',
        'gen/x.cu(7): error: static assertion failed with "kernelgen: specs/x.yaml:3: struct \'p\' (C++ P): '
        'field \'b\' is not at offset 4, as the spec lays it out"',
    ]
    assert _explain_failure(lines) == ("kernelgen: specs/x.yaml:3: struct 'p' (C++ P): field 'b' is not at offset 4, "
                                       "as the spec lays it out (the C++ type's: 8)")
    assert _explain_failure(lines[3:]).endswith("as the spec lays it out")


def test_overloads_are_those_of_the_symbols_namespace(tmp_path: Path) -> None:
    """Functions of one last name in two namespaces are no overload set of ``vb::addk``."""
    from kernelgen.build import _explain_failure

    (tmp_path / "kernels").mkdir()
    src = tmp_path / "kernels" / "ns.cu"
    src.write_text("namespace va { __global__ void addk(double* x, long long n) {} }\n"
                   "namespace vb { __global__ void addk(float* x, unsigned long long n) {} }\n")
    cu = _generated_check(tmp_path, "ns", "::vb::addk", "add", "specs/ns.yaml:12", "f64* x, u64 n",
                          '#include "kernels/ns.cu"\n')
    pick = [f'{cu}(2): error: no instance of overloaded function "kg::pick" matches the argument list']
    text = _explain_failure(pick, tmp_path)
    assert "overloaded" not in text.splitlines()[0] and "names no function that can take" in text, text
    src.write_text(src.read_text() + "namespace vb { __global__ void addk(double* x, long long n) {} }\n")
    assert "names overloaded __global__ functions" in _explain_failure(pick, tmp_path)
