"""The type registry: every scalar and element type a spec can name, and how each language
and each array producer spells it.

This is the only list of types. The loader reads spellings from it, the emitters take C++,
C, Python and Rust spellings from it, and the binding support's C++ tables (codes, DLPack
codes, torch dtypes, ``__cuda_array_interface__`` typestrs, element sizes) are generated
from it into ``generated/<target>/include/kernelgen/types.h``. Adding a type means adding
one entry here (and a line in docs/spec-format.md).

Sizes are in bits, so packed types are described exactly: ``fp4_e2m1`` is 4 bits, two values
to a byte. A spec's ``size:`` counts elements of the declared type; an array producer may
hold several elements in one of its items (a torch ``uint8`` tensor holds two ``fp4_e2m1``
values per item), which each accepted encoding states with ``per_item``.

Vector types (``f32x4`` = ``float4``) have ``lanes`` > 1: producers pass arrays of the lane
type, ``per_item`` counts lanes in one item, and an element is ``lanes`` of them; the array's
lane count must be a multiple of ``lanes`` and its data pointer aligned to ``align`` bytes.
``void`` takes arrays of any dtype, counted in bytes (``any_dtype``). ``ptr`` is the element of
pointer arrays (``f32**``): 8-byte device addresses, held in int64/uint64 arrays; it is not a
name specs use (``internal``).
"""

from __future__ import annotations

from dataclasses import dataclass

# DLPack's type codes (DLDataTypeCode in dlpack.h).
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6
DL_F8_E4M3FN, DL_F8_E5M2, DL_F8_E8M0FNU, DL_F4_E2M1FN = 10, 12, 14, 17


@dataclass(frozen=True)
class TorchDtype:
    """A torch dtype: its attribute on the ``torch`` module and its ``c10::ScalarType`` name."""

    attr: str
    c10: str
    bits: int  # of one item
    since: tuple[int, int] = (2, 0)  # the torch release that introduced it


@dataclass(frozen=True)
class Encoding:
    """One way an array producer may describe an array of the element type."""

    per_item: int = 1  # elements of the declared type in one item of the producer


@dataclass(frozen=True)
class Torch(Encoding):
    dtype: str = ""  # TorchDtype.attr


@dataclass(frozen=True)
class DLPack(Encoding):
    code: int = 0
    bits: int = 0  # of one lane
    lanes: int = 1


@dataclass(frozen=True)
class Typestr(Encoding):
    typestr: str = ""  # __cuda_array_interface__ typestr


@dataclass(frozen=True)
class ElemType:
    """An element type of pointer arguments."""

    name: str  # spec spelling
    bits: int  # storage bits of one element
    cpp: str  # the C++ type a kernel's pointer parameter points to
    header: str | None  # the CUDA header declaring ``cpp``
    rust: str  # Rust type of one storage unit (a byte for packed and 8-bit float types)
    torch: tuple[Torch, ...]
    dlpack: tuple[DLPack, ...]
    typestr: tuple[Typestr, ...]
    doc: str
    lanes: int = 1  # items of the lane type in one element (vector types)
    align: int = 0  # bytes the data pointer must be aligned to (0: no check)
    any_dtype: bool = False  # void: arrays of any dtype, counted in bytes
    internal: bool = False  # not a spec spelling (the element of pointer arrays)

    @property
    def code(self) -> int:
        """The element's code in the generated C++ tables (0 is "no type")."""
        return ELEM_TYPES.index(self) + 1

    @property
    def lane_bits(self) -> int:
        return self.bits // self.lanes

    @property
    def storage_bits(self) -> int:
        """Bits of the C++ type ``cpp`` (a packed pair for 4-bit types)."""
        return max(self.bits, 8)

    @property
    def per_storage(self) -> int:
        """Elements held in one object of the C++ type."""
        return self.storage_bits // self.bits

    def bytes_for(self, elements: int) -> int:
        """Bytes that hold ``elements`` elements (rounded up to whole storage units)."""
        per = self.per_storage
        return (elements + per - 1) // per * (self.storage_bits // 8)


class ScalarKind:
    UNSIGNED = "unsigned"
    SIGNED = "signed"
    FLOAT = "float"
    BOOL = "bool"  # an integer 0/1 in expressions and plans


@dataclass(frozen=True)
class ScalarType:
    """A scalar (by value) argument type."""

    name: str
    kind: str  # ScalarKind
    bits: int
    cpp: str
    rust: str
    doc: str
    c: str = ""  # the C ABI's type, when it differs from ``cpp`` (f16/bf16: their bits as uint16_t)
    header: str | None = None  # the CUDA header declaring ``cpp``
    mant: int = 0  # fraction bits of a float type (10 for f16, 7 for bf16)

    @property
    def code(self) -> int:
        return SCALAR_TYPES.index(self) + 1

    @property
    def c_type(self) -> str:
        return self.c or self.cpp

    @property
    def as_bits(self) -> bool:
        """Passed through the C ABI and the Rust crate as its IEEE bit pattern (f16, bf16)."""
        return bool(self.c) and self.c != self.cpp

    @property
    def is_integer(self) -> bool:
        return self.kind != ScalarKind.FLOAT

    @property
    def _top(self) -> float:
        """2 to the largest exponent of a float type (its exponent bias: f16 2**15)."""
        return 2.0 ** ((1 << (self.bits - 2 - self.mant)) - 1)

    @property
    def largest(self) -> float:
        """A float type's largest finite value (f16 65504), from its bits and fraction bits."""
        return (2 - 2.0 ** -self.mant) * self._top

    def rounds_to_inf(self, value: float) -> bool:
        """Whether the finite ``value`` rounds to infinity in this float type (half a unit in the
        last place beyond :attr:`largest`, or more), as the launchers refuse it (py_scalars.cpp)."""
        return self.bits < 64 and abs(value) >= (2 - 2.0 ** -(self.mant + 1)) * self._top

    @property
    def lo(self) -> int | None:
        if self.kind == ScalarKind.BOOL:
            return 0
        if self.kind == ScalarKind.UNSIGNED:
            return 0
        if self.kind == ScalarKind.SIGNED:
            return -(1 << (self.bits - 1))
        return None

    @property
    def hi(self) -> int | None:
        if self.kind == ScalarKind.BOOL:
            return 1
        if self.kind == ScalarKind.UNSIGNED:
            return (1 << self.bits) - 1
        if self.kind == ScalarKind.SIGNED:
            return (1 << (self.bits - 1)) - 1
        return None

    @property
    def py(self) -> str:
        if self.kind == ScalarKind.BOOL:
            return "bool"
        return "int" if self.is_integer else "float"

    @property
    def range_text(self) -> str:
        if self.kind == ScalarKind.BOOL:
            return "[0, 1]"
        if not self.is_integer:
            return ""
        if self.kind == ScalarKind.UNSIGNED:
            return f"[0, 2**{self.bits}-1]"
        return f"[-2**{self.bits - 1}, 2**{self.bits - 1}-1]"


TORCH_DTYPES: tuple[TorchDtype, ...] = (
    TorchDtype("bfloat16", "BFloat16", 16),
    TorchDtype("float16", "Half", 16),
    TorchDtype("float32", "Float", 32),
    TorchDtype("float64", "Double", 64),
    TorchDtype("int8", "Char", 8),
    TorchDtype("int16", "Short", 16),
    TorchDtype("int32", "Int", 32),
    TorchDtype("int64", "Long", 64),
    TorchDtype("uint8", "Byte", 8),
    TorchDtype("uint16", "UInt16", 16, (2, 3)),
    TorchDtype("uint32", "UInt32", 32, (2, 3)),
    TorchDtype("uint64", "UInt64", 64, (2, 3)),
    TorchDtype("float8_e4m3fn", "Float8_e4m3fn", 8, (2, 1)),
    TorchDtype("float8_e5m2", "Float8_e5m2", 8, (2, 1)),
    TorchDtype("float8_e8m0fnu", "Float8_e8m0fnu", 8, (2, 7)),
    TorchDtype("float4_e2m1fn_x2", "Float4_e2m1fn_x2", 8, (2, 8)),
    TorchDtype("bool", "Bool", 8),
)


def _plain(name: str, bits: int, cpp: str, header: str | None, rust: str, torch: str, dl: int,
           typestrs: tuple[str, ...], doc: str) -> ElemType:
    """A type whose producers hold one element per item."""
    return ElemType(name, bits, cpp, header, rust, (Torch(dtype=torch),), (DLPack(code=dl, bits=bits),),
                    tuple(Typestr(typestr=t) for t in typestrs), doc)


ELEM_TYPES: tuple[ElemType, ...] = (
    _plain("bf16", 16, "__nv_bfloat16", "cuda_bf16.h", "u16", "bfloat16", DL_BFLOAT, ("<V2", "|V2"),
           "bfloat16"),
    _plain("f16", 16, "__half", "cuda_fp16.h", "u16", "float16", DL_FLOAT, ("<f2",), "IEEE half"),
    _plain("f32", 32, "float", None, "f32", "float32", DL_FLOAT, ("<f4",), "IEEE single"),
    _plain("f64", 64, "double", None, "f64", "float64", DL_FLOAT, ("<f8",), "IEEE double"),
    _plain("i8", 8, "int8_t", None, "i8", "int8", DL_INT, ("|i1", "<i1"), "signed 8-bit integer"),
    _plain("i16", 16, "int16_t", None, "i16", "int16", DL_INT, ("<i2",), "signed 16-bit integer"),
    _plain("i32", 32, "int32_t", None, "i32", "int32", DL_INT, ("<i4",), "signed 32-bit integer"),
    _plain("i64", 64, "int64_t", None, "i64", "int64", DL_INT, ("<i8",), "signed 64-bit integer"),
    _plain("u8", 8, "uint8_t", None, "u8", "uint8", DL_UINT, ("|u1", "<u1"), "unsigned 8-bit integer"),
    _plain("u16", 16, "uint16_t", None, "u16", "uint16", DL_UINT, ("<u2",), "unsigned 16-bit integer"),
    _plain("u32", 32, "uint32_t", None, "u32", "uint32", DL_UINT, ("<u4",), "unsigned 32-bit integer"),
    _plain("u64", 64, "uint64_t", None, "u64", "uint64", DL_UINT, ("<u8",), "unsigned 64-bit integer"),
    _plain("fp8_e4m3", 8, "__nv_fp8_e4m3", "cuda_fp8.h", "u8", "float8_e4m3fn", DL_F8_E4M3FN, ("|V1", "<V1"),
           "FP8 E4M3 (finite, NaN only; torch float8_e4m3fn)"),
    _plain("fp8_e5m2", 8, "__nv_fp8_e5m2", "cuda_fp8.h", "u8", "float8_e5m2", DL_F8_E5M2, ("|V1", "<V1"),
           "FP8 E5M2"),
    ElemType(
        "fp8_e8m0", 8, "__nv_fp8_e8m0", "cuda_fp8.h", "u8",
        (Torch(dtype="float8_e8m0fnu"), Torch(dtype="uint8")),
        (DLPack(code=DL_F8_E8M0FNU, bits=8), DLPack(code=DL_UINT, bits=8)),
        (Typestr(typestr="|V1"), Typestr(typestr="<V1"), Typestr(typestr="|u1")),
        "power-of-two scale bytes (E8M0, unsigned, bias 127; torch float8_e8m0fnu or uint8 storage)",
    ),
    ElemType(
        "fp4_e2m1", 4, "__nv_fp4x2_e2m1", "cuda_fp4.h", "u8",
        (Torch(dtype="float4_e2m1fn_x2", per_item=2), Torch(dtype="uint8", per_item=2)),
        (DLPack(code=DL_F4_E2M1FN, bits=4), DLPack(code=DL_F4_E2M1FN, bits=4, lanes=2, per_item=2),
         DLPack(code=DL_UINT, bits=8, per_item=2)),
        (Typestr(typestr="|V1", per_item=2), Typestr(typestr="|u1", per_item=2)),
        "FP4 E2M1 packed two to a byte, the even element in the low nibble (torch float4_e2m1fn_x2 or "
        "uint8 storage); the kernel's pointer is to __nv_fp4x2_e2m1 pairs",
    ),
)


def _vector(name: str, lane: ElemType, lanes: int, cpp: str, header: str | None, rust: str, doc: str) -> ElemType:
    """A CUDA vector type, passed as an array of its lane type (``size`` counts vectors)."""
    bits = lane.bits * lanes
    return ElemType(name, bits, cpp, header, rust, lane.torch, lane.dlpack, lane.typestr, doc,
                    lanes=lanes, align=bits // 8)


_LANES = {e.name: e for e in ELEM_TYPES}
ELEM_TYPES += (
    _vector("f32x2", _LANES["f32"], 2, "float2", None, "[f32; 2]", "two floats (float2), 8-byte aligned"),
    _vector("f32x4", _LANES["f32"], 4, "float4", None, "[f32; 4]", "four floats (float4), 16-byte aligned"),
    _vector("f16x2", _LANES["f16"], 2, "__half2", "cuda_fp16.h", "[u16; 2]", "two halves (__half2), 4-byte aligned"),
    _vector("bf16x2", _LANES["bf16"], 2, "__nv_bfloat162", "cuda_bf16.h", "[u16; 2]",
            "two bfloat16 (__nv_bfloat162), 4-byte aligned"),
    _vector("i32x4", _LANES["i32"], 4, "int4", None, "[i32; 4]", "four 32-bit integers (int4), 16-byte aligned"),
    ElemType("void", 8, "void", None, "u8", (), (), (),
             "untyped memory (void*): any array, its size counted in bytes", any_dtype=True),
    ElemType("ptr", 64, "void*", None, "u64",
             (Torch(dtype="int64"), Torch(dtype="uint64")),
             (DLPack(code=DL_INT, bits=64), DLPack(code=DL_UINT, bits=64)),
             (Typestr(typestr="<i8"), Typestr(typestr="<u8")),
             "a device address: the element of pointer arrays (f32**), held in int64/uint64 arrays",
             internal=True),
    # More CUDA vector types (after the others: element codes stay as they were).
    _vector("f64x2", _LANES["f64"], 2, "double2", None, "[f64; 2]", "two doubles (double2), 16-byte aligned"),
    _vector("i32x2", _LANES["i32"], 2, "int2", None, "[i32; 2]", "two 32-bit integers (int2), 8-byte aligned"),
    _vector("u32x2", _LANES["u32"], 2, "uint2", None, "[u32; 2]",
            "two unsigned 32-bit integers (uint2), 8-byte aligned"),
    _vector("u32x4", _LANES["u32"], 4, "uint4", None, "[u32; 4]",
            "four unsigned 32-bit integers (uint4), 16-byte aligned"),
    _vector("u8x4", _LANES["u8"], 4, "uchar4", None, "[u8; 4]", "four bytes (uchar4), 4-byte aligned"),
    _vector("i8x4", _LANES["i8"], 4, "char4", None, "[i8; 4]", "four signed bytes (char4), 4-byte aligned"),
    _plain("bool", 8, "bool", None, "bool", "bool", DL_BOOL, ("|b1",), "booleans, a byte each (0 or 1; torch bool)"),
    ElemType("f32x3", 96, "float3", None, "[f32; 3]", _LANES["f32"].torch, _LANES["f32"].dlpack,
             _LANES["f32"].typestr, "three floats (float3), 4-byte aligned", lanes=3, align=4),
)

SCALAR_TYPES: tuple[ScalarType, ...] = (
    ScalarType("u32", ScalarKind.UNSIGNED, 32, "uint32_t", "u32", "unsigned 32-bit integer"),
    ScalarType("i32", ScalarKind.SIGNED, 32, "int32_t", "i32", "signed 32-bit integer"),
    ScalarType("u64", ScalarKind.UNSIGNED, 64, "uint64_t", "u64", "unsigned 64-bit integer"),
    ScalarType("i64", ScalarKind.SIGNED, 64, "int64_t", "i64", "signed 64-bit integer"),
    ScalarType("f32", ScalarKind.FLOAT, 32, "float", "f32", "IEEE single", mant=23),
    ScalarType("bool", ScalarKind.BOOL, 8, "bool", "bool", "boolean (0 or 1 in expressions)"),
    ScalarType("f16", ScalarKind.FLOAT, 16, "__half", "u16", "IEEE half, rounded to nearest even from the caller's "
               "double (C ABI and Rust: its bits as uint16_t)", c="uint16_t", header="cuda_fp16.h", mant=10),
    ScalarType("bf16", ScalarKind.FLOAT, 16, "__nv_bfloat16", "u16", "bfloat16, rounded to nearest even from the "
               "caller's double (C ABI and Rust: its bits as uint16_t)", c="uint16_t", header="cuda_bf16.h", mant=7),
    ScalarType("f64", ScalarKind.FLOAT, 64, "double", "f64", "IEEE double", mant=52),
    ScalarType("u8", ScalarKind.UNSIGNED, 8, "uint8_t", "u8", "unsigned 8-bit integer"),
    ScalarType("i8", ScalarKind.SIGNED, 8, "int8_t", "i8", "signed 8-bit integer"),
    ScalarType("u16", ScalarKind.UNSIGNED, 16, "uint16_t", "u16", "unsigned 16-bit integer"),
    ScalarType("i16", ScalarKind.SIGNED, 16, "int16_t", "i16", "signed 16-bit integer"),
)

ELEMS: dict[str, ElemType] = {e.name: e for e in ELEM_TYPES}
SPEC_ELEMS: dict[str, ElemType] = {e.name: e for e in ELEM_TYPES if not e.internal}  # what specs may name
SCALARS: dict[str, ScalarType] = {s.name: s for s in SCALAR_TYPES}
TORCH: dict[str, TorchDtype] = {t.attr: t for t in TORCH_DTYPES}


# C++ spellings of the registry's types (after qualifiers are removed and spaces normalised).
CPP_TYPES = {
    "float": "f32", "double": "f64", "__half": "f16", "half": "f16", "__nv_half": "f16", "nv_half": "f16",
    "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16", "bool": "bool",
    "int8_t": "i8", "signed char": "i8", "uint8_t": "u8", "unsigned char": "u8",
    "int16_t": "i16", "short": "i16", "short int": "i16", "signed short": "i16",
    "uint16_t": "u16", "unsigned short": "u16", "unsigned short int": "u16",
    "int32_t": "i32", "int": "i32", "signed": "i32", "signed int": "i32",
    "uint32_t": "u32", "unsigned": "u32", "unsigned int": "u32",
    "int64_t": "i64", "long long": "i64", "long long int": "i64", "long": "i64", "long int": "i64",
    "ptrdiff_t": "i64", "std::ptrdiff_t": "i64", "signed long long": "i64",
    "uint64_t": "u64", "unsigned long long": "u64", "unsigned long long int": "u64", "unsigned long": "u64",
    "size_t": "u64", "std::size_t": "u64",
    "float2": "f32x2", "float4": "f32x4", "__half2": "f16x2", "half2": "f16x2", "__nv_half2": "f16x2",
    "nv_half2": "f16x2", "__nv_bfloat162": "bf16x2",
    "nv_bfloat162": "bf16x2", "int4": "i32x4", "double2": "f64x2", "int2": "i32x2", "uint2": "u32x2",
    "uint4": "u32x4", "uchar4": "u8x4", "char4": "i8x4", "float3": "f32x3",
    "__nv_fp8_e4m3": "fp8_e4m3", "__nv_fp8_e5m2": "fp8_e5m2", "__nv_fp8_e8m0": "fp8_e8m0",
    "__nv_fp4x2_e2m1": "fp4_e2m1", "void": "void",
    "char": "i8",  # x86-64's char is signed; aarch64's is not (the build checks either way)
}
for _k, _v in list(CPP_TYPES.items()):
    if _k.endswith("_t") and not _k.startswith("std::"):
        CPP_TYPES["std::" + _k] = _v


def name_hint(word: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """A hint for a type name a spec gives that is not one of ``choices``: kernelgen's name for a
    C or CUDA spelling (``float`` -> ``f32``), else the closest choice (errors.did_you_mean)."""
    from kernelgen.errors import did_you_mean

    ours = CPP_TYPES.get(" ".join(word.split()))
    if ours is not None and ours in choices:
        return f"did you mean '{ours}'? (kernelgen's name for C++ {word})"
    return did_you_mean(word, choices)


@dataclass(frozen=True)
class ToolkitStruct:
    """A struct type the CUDA toolkit declares, which kernels take by value (``float2 offset``,
    ``__half2 scale``, ``const __grid_constant__ CUtensorMap tmap``)."""

    header: str  # the toolkit header that declares it
    fields: tuple[tuple[str, str], ...] | None  # the spec's fields (None: deprecated, left to the user)
    align: int  # its alignment in bytes


def _toolkit_structs() -> dict[str, ToolkitStruct]:
    lanes = {"char": "i8", "uchar": "u8", "short": "i16", "ushort": "u16", "int": "i32", "uint": "u32",
             "long": "i64", "ulong": "u64", "longlong": "i64", "ulonglong": "u64", "float": "f32", "double": "f64"}
    out = {}
    for base, lane in lanes.items():
        size = SCALARS[lane].bits // 8
        for n in (1, 2, 3, 4):
            # CUDA 13 deprecates the 4-lane 64-bit types (double4 -> double4_16a or double4_32a)
            fields = None if (size, n) == (8, 4) else tuple((c, lane) for c in "xyzw"[:n])
            out[f"{base}{n}"] = ToolkitStruct("vector_types.h", fields, min(size * n, 16) if n in (2, 4) else size)
        if size == 8:  # their replacements, aligned to 16 or 32 bytes
            for a in (16, 32):
                out[f"{base}4_{a}a"] = ToolkitStruct("vector_types.h", tuple((c, lane) for c in "xyzw"), a)
    out["dim3"] = ToolkitStruct("vector_types.h", (("x", "u32"), ("y", "u32"), ("z", "u32")), 4)
    # The 16-bit float pairs and the raw bits of 16-bit floats, under every name the toolkit's
    # headers give them: most are typedefs (``typedef __half2 half2;``, ``typedef struct {...}
    # __half2_raw;``), which a C++ header can only name through the header that declares them.
    half2 = ToolkitStruct("cuda_fp16.h", (("x", "f16"), ("y", "f16")), 4)
    bf162 = ToolkitStruct("cuda_bf16.h", (("x", "bf16"), ("y", "bf16")), 4)
    for name in ("__half2", "half2", "__nv_half2", "nv_half2"):
        out[name] = half2
    for name in ("__nv_bfloat162", "nv_bfloat162"):
        out[name] = bf162
    for name in ("__half_raw", "__nv_half_raw"):
        out[name] = ToolkitStruct("cuda_fp16.h", (("x", "u16"),), 2)
    for name in ("__half2_raw", "__nv_half2_raw"):
        out[name] = ToolkitStruct("cuda_fp16.h", (("x", "u16"), ("y", "u16")), 4)
    out["__nv_bfloat16_raw"] = ToolkitStruct("cuda_bf16.h", (("x", "u16"),), 2)
    out["__nv_bfloat162_raw"] = ToolkitStruct("cuda_bf16.h", (("x", "u16"), ("y", "u16")), 4)
    # A TMA descriptor: 128 opaque bytes, aligned as CUDA 13's cuda.h declares it (the build checks
    # the alignment against the cuda.h in use); CUtensorMap is a typedef of struct CUtensorMap_st.
    for name in ("CUtensorMap", "CUtensorMap_st"):
        out[name] = ToolkitStruct("cuda.h", (("opaque", "u64[16]"),), 128)
    return out

TOOLKIT_STRUCTS: dict[str, ToolkitStruct] = _toolkit_structs()

# Encodings per element, at most this many of each kind (the C++ tables are fixed-size).
MAX_ENCODINGS = 4


def headers(cpp_types: set[str]) -> list[str]:
    """The CUDA headers that declare the given C++ element types, sorted."""
    found = {e.header for e in ELEM_TYPES if e.cpp in cpp_types and e.header}
    found |= {s.header for s in SCALAR_TYPES if s.cpp in cpp_types and s.header}
    return sorted(found)


def _check() -> None:
    """The registry's own consistency: what the generated tables and the producers rely on."""
    for e in ELEM_TYPES:
        assert 8 % e.bits == 0 or e.bits % 8 == 0, e
        for enc in (*e.torch, *e.dlpack, *e.typestr):
            assert enc.per_item >= 1, e
        assert all(t.dtype in TORCH for t in e.torch), e
        for t in e.torch:
            assert TORCH[t.dtype].bits == e.lane_bits * t.per_item, (e, t)
        for d in e.dlpack:
            assert d.bits * d.lanes == e.lane_bits * d.per_item, (e, d)
        # a vector is aligned to its size, but float3's 12 bytes are aligned to its lane's 4
        assert e.bits % e.lanes == 0 and (e.lanes == 1 or e.align == e.bits // 8 or e.align == e.lane_bits // 8), e
        assert not e.any_dtype or not (e.torch or e.dlpack or e.typestr), e
        assert max(len(e.torch), len(e.dlpack), len(e.typestr)) <= MAX_ENCODINGS, e
    assert len({e.name for e in ELEM_TYPES}) == len(ELEM_TYPES)
    assert len({s.name for s in SCALAR_TYPES}) == len(SCALAR_TYPES)
    assert len(ELEM_TYPES) < 32  # dtype masks are 32-bit, a bit per code


_check()
