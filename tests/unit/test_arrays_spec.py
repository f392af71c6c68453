"""Nullable, strided, read-only, vector, void and pointer-array arguments, and bool/f16/bf16/f64
scalars: what the loader accepts and refuses (file:line errors), and how every emitter spells
them, on the fixture project tests/fixtures/arrays and on small specs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen import types
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.conftest import REPO
from tests.unit.test_loader import GOOD, write_project

FIXTURE = REPO / "tests" / "fixtures" / "arrays"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(FIXTURE)


@pytest.fixture(scope="module")
def files(catalog):
    return render_catalog(catalog, [catalog.target("hopper")])


def _kernel(catalog, name):
    return catalog.module("arrays").kernel(name)


# ---- the model


def test_fixture_arguments_in_the_model(catalog) -> None:
    ln = _kernel(catalog, "layer_norm")
    assert [(a.name, a.nullable) for a in ln.args if a.is_pointer] == [
        ("x", False), ("weight", True), ("y", False), ("mean", True), ("rstd", True)]
    rs = _kernel(catalog, "row_sum").args[0]
    assert (rs.contiguous, rs.spelling) == (False, "const f32*")
    table = _kernel(catalog, "gather").args[0]
    assert (table.const, table.read_only, table.reads_only, table.spelling, table.cpp_pointer) == (
        False, True, True, "f32*", "float*")
    sc = _kernel(catalog, "scalars")
    assert [a.spelling for a in sc.args] == ["f32*", "f64*", "bool", "f16", "bf16", "f64", "f32", "u32"]
    assert [a.name for a in sc.int_args] == ["flag", "reps"]  # bool is a name in expressions
    assert sc.examples == ((("flag", 1), ("reps", 1)), (("flag", 0), ("reps", 0)))
    x4 = _kernel(catalog, "scale4").args[0]
    assert (x4.elem.name, x4.elem.cpp, x4.elem.lanes, x4.elem.align, x4.array_elem.name) == (
        "f32x4", "float4", 4, 16, "f32x4")
    src = _kernel(catalog, "byte_copy").args[0]
    assert (src.elem.any_dtype, src.cpp_pointer) == (True, "const void*")
    rows = _kernel(catalog, "sum_rows").args[0]
    assert (rows.indirect, rows.inner_const, rows.const, rows.spelling, rows.cpp_pointer, rows.array_elem.name) == (
        True, True, True, "const f32* const*", "const float* const*", "ptr")


@pytest.mark.parametrize("text, spelling, cpp, inner, outer", [
    ("f32**", "f32**", "float**", False, False),
    ("f32* const*", "f32* const*", "float* const*", False, True),
    ("const bf16**", "const bf16**", "const __nv_bfloat16**", True, False),
    ("const  i32 *  const *", "const i32* const*", "const int32_t* const*", True, True),
])
def test_pointer_array_spellings(tmp_path: Path, text, spelling, cpp, inner, outer) -> None:
    spec = GOOD.replace("      out: f32*\n", f"      out: {{type: '{text}', size: n}}\n")
    k = load_catalog(write_project(tmp_path, spec)).modules[0].kernels[0]
    a = k.args[1]
    assert (a.spelling, a.cpp_pointer, a.inner_const, a.const, a.reads_only) == (spelling, cpp, inner, outer, outer)


def test_registry_vectors_void_and_pointer_element() -> None:
    for name, lane, lanes, cpp in [("f32x2", "f32", 2, "float2"), ("f32x4", "f32", 4, "float4"),
                                   ("f16x2", "f16", 2, "__half2"), ("bf16x2", "bf16", 2, "__nv_bfloat162"),
                                   ("i32x4", "i32", 4, "int4")]:
        e, lt = types.ELEMS[name], types.ELEMS[lane]
        assert (e.cpp, e.lanes, e.bits, e.align) == (cpp, lanes, lt.bits * lanes, lt.bits * lanes // 8)
        assert (e.torch, e.dlpack, e.typestr) == (lt.torch, lt.dlpack, lt.typestr)  # arrays of the lane type
    assert "ptr" not in types.SPEC_ELEMS and types.ELEMS["ptr"].internal
    assert [t.dtype for t in types.ELEMS["ptr"].torch] == ["int64", "uint64"]
    assert types.ELEMS["void"].any_dtype and not types.ELEMS["void"].torch
    assert types.headers({"__half", "__nv_bfloat162", "float4"}) == ["cuda_bf16.h", "cuda_fp16.h"]
    s = types.SCALARS
    assert (s["bool"].lo, s["bool"].hi, s["bool"].is_integer, s["bool"].py) == (0, 1, True, "bool")
    assert [(s[n].cpp, s[n].c_type, s[n].as_bits, s[n].mant) for n in ("f16", "bf16", "f64")] == [
        ("__half", "uint16_t", True, 10), ("__nv_bfloat16", "uint16_t", True, 7), ("double", "double", False, 52)]


# ---- file:line errors


def _sub(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


BAD = [
    ("read_only on const", _sub("{type: const f32*, size: n}", "{type: const f32*, size: n, read_only: true}"),
     10, "'read_only' is for non-const pointers"),
    ("nullable on scalar", _sub("      n: u32", "      n: {type: u32, nullable: true}"), 12,
     "apply only to pointers ('nullable' is given for a scalar)"),
    ("nullable not bool", _sub("{type: const f32*, size: n}", "{type: const f32*, nullable: 1}"), 10,
     "expected true or false"),
    ("strided vector", _sub("{type: const f32*, size: n}", "{type: const f32x4*, size: n, contiguous: false}"), 10,
     "a f32x4 argument must be contiguous"),
    ("three stars", _sub("      out: f32*", "      out: f32***"), 11, "is not a type"),
    ("const without star", _sub("      out: f32*", "      out: 'f32 const*'"), 11, "is not a type"),
    ("internal element", _sub("      out: f32*", "      out: ptr*"), 11, "unknown element type 'ptr'"),
    ("void pointer array", _sub("      out: f32*", "      out: void**"), 11, "pointer arrays of void*"),
    ("const void scalar", _sub("      alpha: f32", "      alpha: void"), 13, "unknown scalar type 'void'"),
    ("f16 host arg", _sub("    grid:", "    host_args: {h: f16}\n    grid:"), 14, "host arguments must be integers"),
    ("f64 in an expression", _sub("      alpha: f32", "      alpha: f64").replace("[n % 4 == 0]", "[alpha > 0]"),
     17, "'alpha' is a float; expressions use integer arguments only"),
    ("device on a pointer", _sub("      out: f32*", "      out: {type: f32*, device: true}"), 11,
     "'device' applies to a scalar type of a kernel argument"),
    ("device on a host argument", _sub("    grid:", "    host_args: {h: {type: i32, device: true}}\n    grid:"), 14,
     "'device' applies to a scalar type of a kernel argument"),
    ("device with a size", _sub("      alpha: f32", "      alpha: {type: i32, device: true, size: 2}"), 13,
     "a device scalar is one element"),
    ("bound without device", _sub("      alpha: f32", "      alpha: {type: f32, bound: n}"), 13,
     "'bound' applies only to device scalars"),
    ("bound not an integer argument", _sub("      alpha: f32", "      alpha: {type: i32, device: true, bound: m}"),
     13, "the bound of device scalar 'alpha' must be an integer argument"),
    ("bound a struct field", _sub("      alpha: f32", "      alpha: {type: i32, device: true, bound: p.n}"),
     13, "the bound 'p.n' is a struct field; a bound names an integer argument or host argument (read the field "
     "into a host argument and name it: host_args: {n: {type: u32, from: p.n}}, bound: n)"),
    ("device scalar in an expression", _sub("      alpha: f32", "      alpha: {type: i32, device: true}").replace(
        "[n % 4 == 0]", "[alpha > 0]"), 17, "'alpha' is read on the device; a plan cannot know its value"),
    ("bool example out of range", _sub("      alpha: f32", "      alpha: f32\n      flag: bool").replace(
        "{n: 1024}", "{n: 1024, flag: 2}"), 20, "flag=2 does not fit bool"),
]


@pytest.mark.parametrize("case, spec, line, fragment", BAD, ids=[c[0] for c in BAD])
def test_bad_argument_specs_are_located_errors(tmp_path: Path, case, spec, line, fragment) -> None:
    with pytest.raises(SpecError) as info:
        load_catalog(write_project(tmp_path, spec))
    msg = str(info.value)
    assert fragment in msg, msg
    assert msg.startswith("specs/demo.yaml"), msg
    assert info.value.loc.line == line, msg


def test_type_axes_refuse_pointer_arrays_and_void(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    spec = _sub("    summary: Scales.", "    summary: Scales.\n    symbol: 'scale<{T}>'\n    instantiate: {T: [f32]}")
    spec = spec.replace("      out: f32*", "      out: '{T}**'")
    with pytest.raises(SpecError, match="cannot type a pointer array"):
        load_catalog(write_project(tmp_path / "a", spec))
    spec = _sub("    summary: Scales.", "    summary: Scales.\n    symbol: 'scale<{T}>'\n    instantiate: {T: [void]}")
    spec = spec.replace("      out: f32*", "      out: '{T}*'")
    with pytest.raises(SpecError, match="'void' cannot be a type axis value"):
        load_catalog(write_project(tmp_path / "b", spec))


def test_chain_members_must_agree_on_pointer_arrays(tmp_path: Path) -> None:
    spec = GOOD + """\
  scale2:
    extends: scale
    args:
      x: {type: 'const f32* const*', size: n}
      out: f32*
      n: u32
      alpha: f32
fallbacks:
  both: [scale, scale2]
"""
    with pytest.raises(SpecError, match="void\\* and pointer arrays must be the same in every member"):
        load_catalog(write_project(tmp_path, spec))


# ---- every emitter


def test_cpp_launchers_and_api(files) -> None:
    cu = files["generated/hopper/src/arrays.cu"]
    h = files["generated/hopper/include/kernelgen/arrays.h"]
    # the kernels' own parameter types in the signature check
    assert "void (*)(float*, const int32_t*, float*, uint32_t, uint32_t)" in cu  # gather: float* table
    assert "void (*)(float*, double*, bool, __half, __nv_bfloat16, double, float, uint32_t)" in cu
    assert "void (*)(const float4*, float4*, float, uint32_t)" in cu
    assert "void (*)(const void*, void*, uint64_t)" in cu
    assert "void (*)(const float* const*, float*, uint32_t, uint32_t)" in cu
    assert "void (*)(const __nv_bfloat162*, const __nv_bfloat162*, __nv_bfloat162*, uint32_t)" in cu
    # read_only: the API takes const, the launch casts it back
    assert "Outcome gather(const float* table, const int32_t* idx, float* out," in h
    assert "(const_cast<float*>(table), kg::arg<kg_f, 1>(idx), out, kg::arg<kg_f, 3>(n), kg::arg<kg_f, 4>(dim))" in cu
    # f16/bf16: the C ABI's bits become the kernel's types
    assert "kg::from_bits<__half>(h), kg::from_bits<__nv_bfloat16>(b)" in cu
    assert "Outcome scalars(float* out, double* out64, bool flag, __half h, __nv_bfloat16 b, double d, float f," in h
    assert "kg_plan plan_scalars(bool flag, uint32_t reps);" in h
    assert "#include <cuda_bf16.h>" in h and "#include <cuda_fp16.h>" in h


def test_c_abi(files) -> None:
    hc = files["generated/hopper/include/kernelgen/arrays_c.h"]
    assert "int32_t kg_arrays__gather(const void* table, const void* idx, void* out," in hc
    assert "int32_t kg_arrays__scalars(void* out, void* out64, bool flag, uint16_t h, uint16_t b, double d, float f," in hc
    assert "int32_t kg_arrays__sum_rows(const void* rows, void* out," in hc
    assert "int32_t kg_arrays__byte_copy(const void* src, void* dst, uint64_t nbytes," in hc


def test_python_binding_tables_and_stub(files) -> None:
    cpp = files["generated/hopper/python/arrays.cpp"]
    code = {e.name: e.code for e in types.ELEM_TYPES}
    # name, kind, type, writable, contiguous, size slot, keyword-only, nullable, device scalar
    assert f'{{"weight", kg::py::kPointer, {code["f32"]}, 0, 1, 1, 0, 1, 0, -1, 0}},  // const f32*' in cpp
    assert f'{{"mean", kg::py::kPointer, {code["f32"]}, 1, 1, 3, 0, 1, 0, -1, 0}},  // f32*' in cpp
    assert f'{{"x", kg::py::kPointer, {code["f32"]}, 0, 0, 0, 0, 0, 0, -1, 0}},  // const f32*' in cpp  # row_sum: strided
    assert f'{{"table", kg::py::kPointer, {code["f32"]}, 0, 1, -1, 0, 0, 0, -1, 0}},  // f32*' in cpp  # read_only
    assert f'{{"rows", kg::py::kPointer, {code["ptr"]}, 0, 1, 0, 0, 0, 0, -1, 0}},  // const f32* const*' in cpp
    assert f'{{"x", kg::py::kPointer, {code["f32x4"]}, 0, 1, 0, 0, 0, 0, -1, 0}},  // const f32x4*' in cpp
    assert f'{{"src", kg::py::kPointer, {code["void"]}, 0, 1, 0, 0, 0, 0, -1, 0}},  // const void*' in cpp
    assert "static_cast<uint16_t>(v[3].u), static_cast<uint16_t>(v[4].u), static_cast<double>(v[5].f)" in cpp
    assert "static_cast<bool>(v[2].u)" in cpp
    pyi = files["generated/hopper/python/arrays.pyi"]
    assert ("def __call__(self, x: _kg_Array, weight: _kg_Array | None, y: _kg_Array, mean: _kg_Array | None, "
            "rstd: _kg_Array | None, rows: _kg_builtins.int, cols: _kg_builtins.int, eps: _kg_builtins.float, *, stream: _kg_Stream = None) -> _kg_Outcome: "
            "...") in pyi
    assert ("def plan(self, *, flag: _kg_builtins.bool, h: _kg_builtins.float | None = None, b: _kg_builtins.float | "
            "None = None, d: _kg_builtins.float | None = None, f: _kg_builtins.float | None = None, reps: "
            "_kg_builtins.int) -> _kg_Plan: ...") in pyi


def test_type_tables_carry_lanes_alignment_and_void() -> None:
    from kernelgen.emit.base import ENV
    from kernelgen.emit.python import type_tables

    text = ENV.get_template("types.h.j2").render(type_tables())
    assert re.search(r'\{"f32x4", 128, 1, 1, 1, \{[^}]*\}\}, \{[^}]*\}\}, \{[^}]*\}\}, 4, 16, 0\}', text), text
    assert re.search(r'\{"void", 8, 0, 0, 0, \{\}, \{\}, \{\}, 1, 0, 1\}', text)
    assert '{"f16", kFloat, 16, "", 10}' in text and '{"bool", kBool, 8, "[0, 1]", 0}' in text
    assert "kTorchBits[kTorchCount]" in text


def test_rust_crate(files) -> None:
    rs = files["generated/hopper/rust/src/arrays.rs"]
    assert ("pub unsafe fn launch(out: impl Into<crate::DevicePtrMut>, out64: impl Into<crate::DevicePtrMut>, "
            "flag: bool, h: u16, b: u16, d: f64, f: f32, reps: u32,") in rs
    assert "pub fn plan(flag: bool, reps: u32) -> crate::Plan" in rs
    assert "pub unsafe fn launch(table: impl Into<crate::DevicePtr>," in rs  # read_only: a const pointer
    # nullable pointers are not refused when null; the others are
    ln = rs[rs.index("pub mod layer_norm"):rs.index("pub mod row_sum")]
    assert "check_null(\"layer_norm\", \"x\"" in ln and "check_null(\"layer_norm\", \"y\"" in ln
    assert "check_null(\"layer_norm\", \"weight\"" not in ln and "check_null(\"layer_norm\", \"mean\"" not in ln
    tests = files["generated/hopper/rust/tests/arrays.rs"]
    assert "kg::arrays::scalars::plan(true, 1)" in tests
    assert "0x3c00, 0x3f80" in tests  # f16/bf16 arguments as bits


def test_contract_tests_pass_floats_and_bools(files) -> None:
    t = files["generated/hopper/tests/test_arrays_hopper_contract.py"]
    assert "'flag': 1" in t or "'flag': 0" in t


def test_device_scalar_in_the_model_and_every_emitter(catalog, files) -> None:
    k = _kernel(catalog, "fill_prefix")
    count = k.args[1]
    assert (count.device, count.bound, count.const, count.spelling, count.cpp_pointer) == (
        True, "cap", True, "device i32", "const int32_t*")
    assert [a.name for a in k.int_args] == ["cap"]  # not a value a plan can read
    cu = files["generated/hopper/src/arrays.cu"]
    assert "const int32_t kg_rc = kg::check_device_scalar(count, 1);" in cu
    assert "kernelgen::Outcome fill_prefix(float* out, const int32_t* count, float value, uint32_t cap, " in cu
    cpp = files["generated/hopper/python/arrays.cpp"]
    code = {e.name: e.code for e in types.ELEM_TYPES}
    # name, kind, type, writable, contiguous, size slot, keyword-only, nullable, device scalar
    assert f'{{"count", kg::py::kPointer, {code["i32"]}, 0, 1, 1, 0, 0, 1, -1, 0}},  // device i32' in cpp
    pyi = files["generated/hopper/python/arrays.pyi"]
    assert "(out: f32*, count: device i32, value: f32, cap: u32, *, stream=None) -> Outcome" in pyi
    assert "Read on the device when the kernel runs" in pyi and "count (i32, at most cap)" in pyi
    contract = files["generated/hopper/tests/test_arrays_hopper_contract.py"]
    assert "def test_fill_prefix_device_scalar_count_is_one_element_of_its_type():" in contract
    assert 'FakeCudaArray("<i4", (n,))' in contract and 'FakeCudaArray("<f4", (1,))' in contract
    lib = files["generated/hopper/rust/src/lib.rs"]
    assert "pub const E_DEVICE_SCALAR: i32 = 11;" in lib


def test_set_up_before_the_launch_skips_a_nullable_array_passed_as_null(files) -> None:
    """layer_norm's mean is nullable and zeroed: the launcher zeroes it where it is given and does
    nothing with a null one (cudaMemsetAsync refuses a null pointer); a pointer that is not
    nullable keeps the plain check (a null one is the caller's error, reported by CUDA)."""
    cu = files["generated/hopper/src/arrays.cu"]
    ln = cu.split("kernelgen::Outcome layer_norm(")[1].split("\n}\n")[0]
    assert "if (mean != nullptr && kg_sizes[3] > 0) {  // nullable: a null array is not zeroed" in ln
    assert ln.index("if (mean != nullptr") < ln.index("cudaMemsetAsync(mean, 0,") < ln.index("<<<")
    assert "rstd" not in ln.split("<<<")[0].split("kg_sizes_layer_norm(")[1]  # rstd is not zeroed


def test_errors_about_an_argument_can_name_it(files) -> None:
    """Each kernel's description carries its argument names, so a device scalar's DEVICE_SCALAR
    error (detail: its position) names it in every language (kg_rt_describe)."""
    cu = files["generated/hopper/src/arrays.cu"]
    assert 'const char* const kArgs_fill_prefix[] = { "out", "count", "value", "cap" };' in cu
    info = cu.split("const kg_kernel_info kg_info_fill_prefix = {")[1].split("};")[0]
    assert info.rstrip().endswith("kArgs_fill_prefix, 4"), info
    runtime = (REPO / "src/kernelgen/runtime/src/runtime.cpp").read_text()
    assert '"%s: argument \'%s\': a device scalar must point to one element in device memory (null, "' in runtime
    binding = (REPO / "src/kernelgen/runtime/src/py_launcher.cpp").read_text()
    assert "} else if (cat == KG_E_DEVICE_SCALAR) {\n    type = g.argument_error;" in binding
