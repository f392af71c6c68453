"""`kernelgen draft` on by-value structs whose members are not plain scalars: an enum member drafts
as its underlying type, a member of a class type (the sources' or a CUDA type the draft knows) as
a nested struct with an entry of its own, a declared alignment as `align`; a member the draft
cannot lay out leaves the struct without fields, marked `check` with the member and the reason.
Each draft is loaded and rendered, and the nested layout is the C++ one."""

from __future__ import annotations

from pathlib import Path

from kernelgen.loader import load_catalog
from tests.unit.test_draft_classes import project, write_and_load

SOURCE = """\
#include <cstdint>
#include <cuda.h>
namespace fa {
enum class Layout : uint8_t { kRowMajor, kColMajor };
enum Plain { kA, kB };
struct Params2 { int64_t stride; float alpha; Layout layout; int32_t n; };
struct Window { int32_t left, right; };
struct TmaParams { int32_t m, k; CUtensorMap map_q; float scale; };
struct Params { const float* q; int64_t stride; Window window; float alpha; Window extra[2]; Plain mode;
                void (*hook)(int); __device__ float twice() const { return 2.f * alpha; } };
struct alignas(16) Span { float lo, hi; uint32_t n; };
struct Holder { Span s; float2 xy; };
struct Bits { int a : 3; int b : 5; };
struct Aligned { float x; alignas(16) float v[4]; };
struct Foreign { int n; std::array<float, 4> v; };
struct Tag {};
struct HoldsBits { float x; Bits b; Tag t; };
struct HoldsTag { int n; Tag t; };
__global__ void p2_kernel(Params2 p, float* out) {}
__global__ void fa_kernel(Params p, float* out) {}
__global__ void tma_kernel(const __grid_constant__ TmaParams t, float* out) {}
__global__ void holder_kernel(Holder h, float* out) {}
__global__ void bits_kernel(Bits b, float* out) {}
__global__ void aligned_kernel(Aligned a, float* out) {}
__global__ void foreign_kernel(Foreign f, float* out) {}
__global__ void nested_kernel(HoldsBits hb, HoldsTag ht, float* out) {}
}
"""


def _structs(text: str) -> list[str]:
    return text[text.index("structs:"):text.index("kernels:")].splitlines()


def test_enum_and_nested_members_are_drafted(tmp_path: Path) -> None:
    root = project(tmp_path, {"csrc/fa.cu": SOURCE})
    text = write_and_load(root, ["csrc/fa.cu"])["fa"]
    # a kernel whose only count is a struct's field: a host argument read from it drives the grid
    p2 = text[text.index("  p2:\n"):]
    assert '    host_args:  # check: read from the struct\'s fields; the grid and sizes use them\n' \
        '      "n": {type: i32, from: p.n}\n    grid: ["div_ceil(n, 256)", 1, 1]  # check\n' in p2, p2
    # none from a struct whose fields are not drafted (HoldsTag holds an empty type)
    nested = text[text.index("  nested:\n"):]
    assert nested[:nested.index("    examples:")].count("host_args") == 0, nested
    lines = _structs(text)
    # an enum class member is its underlying type; a plain enum's is marked check (what GCC and nvcc choose)
    assert '  params2: {cpp: "fa::Params2", fields: {stride: i64, alpha: f32, layout: u8, n: i32}}' in lines, lines
    params = next(ln for ln in lines if ln.startswith("  params: "))
    assert params.startswith('  params: {cpp: "fa::Params", fields: {q: u64, stride: i64, window: window, alpha: f32, '
                             'extra: "window[2]", mode: u32, hook: u64}}  # check: plain enum Plain has no negative '
                             "enumerator"), params
    assert "check: pointer members as u64: pass the device addresses" in params
    # nested class types get entries of their own: the sources' and CUDA's (CUtensorMap, float2)
    assert '  window: {cpp: "fa::Window", fields: {left: i32, right: i32}}' in lines, lines
    assert '  tmaparams: {cpp: "fa::TmaParams", fields: {m: i32, k: i32, map_q: cutensormap, scale: f32}}' in lines
    assert '  cutensormap: {cpp: CUtensorMap, fields: {opaque: "u64[16]"}, align: 128}' in lines, lines
    assert '  span: {cpp: "fa::Span", fields: {lo: f32, hi: f32, n: u32}, align: 16}' in lines, lines
    assert '  holder_type: {cpp: "fa::Holder", fields: {s: span, xy: float2}}  # not \'holder\': kernel holder\'s ' \
           "name" in lines, lines
    assert "  float2: {cpp: float2, fields: {x: f32, y: f32}, align: 8}" in lines, lines
    # what the draft cannot lay out: no fields, and the member and the reason, marked check
    reasons = {ln.split(":")[0].strip(): ln.split("check: fields not drafted: ")[-1] for ln in lines
               if "fields: {}" in ln}
    assert reasons == {
        "bits_type": "member 'int a : 3' is a bit-field",
        "aligned_type": "member 'alignas(16) float v[4]' has an alignment of its own: give it as a field whose type "
                        "is a struct with that align",
        "foreign_type": "member 'std::array<float, 4> v' is of a template type",
        # a member whose type has no drafted fields leaves its struct without them too
        "holdsbits": "member 'b': its type fa::Bits has no drafted fields (member 'int a : 3' is a bit-field)",
        "holdstag": "member 't': its type fa::Tag has no drafted fields",
    }, reasons
    assert not any(ln.startswith("  tag:") for ln in lines), lines  # no entry for a type no field holds

    # the draft loads as written, with the nested layout C++ gives
    structs = {st.name: st for st in load_catalog(root).modules[0].structs}
    tma = structs["tmaparams"]
    assert (tma.size, tma.align) == (384, 128)
    assert [(f.name, f.offset) for f in tma.fields] == [("m", 0), ("k", 4), ("map_q", 128), ("scale", 256)]
    p = structs["params"]
    assert [(f.name, f.offset, f.size) for f in p.fields] == [
        ("q", 0, 8), ("stride", 8, 8), ("window", 16, 8), ("alpha", 24, 4), ("extra", 28, 16), ("mode", 44, 4),
        ("hook", 48, 8)]
    assert (p.size, p.align) == (56, 8)
    assert structs["holder_type"].fields[1].offset == 16 and structs["holder_type"].size == 32
