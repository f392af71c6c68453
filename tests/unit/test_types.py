"""The type registry (kernelgen.types) is the one list of types: every other language's tables
are generated from it, and the array producers' own names for each type agree with it.

The C++ tables are compared entry by entry with the registry in tests/compile (as compiled
into a built library); here: the generated header, the model, and torch / numpy / DLPack."""

from __future__ import annotations

import ctypes
import re

import pytest

from kernelgen import types
from kernelgen.emit.base import ENV as _ENV
from kernelgen.emit.python import type_tables
from tests.conftest import REPO


def _header() -> str:
    return _ENV.get_template("types.h.j2").render(type_tables())


def _registry_rows() -> tuple[list[tuple], list[tuple]]:
    """The registry in the shape kernelgen_ops' ``_runtime.type_tables()`` returns it."""
    kinds = {types.ScalarKind.UNSIGNED: 1, types.ScalarKind.SIGNED: 2, types.ScalarKind.FLOAT: 3,
             types.ScalarKind.BOOL: 4}
    scalars = [(s.name, kinds[s.kind], s.bits) for s in types.SCALAR_TYPES]
    elems = [
        (e.name, e.bits, [(t.dtype, t.per_item) for t in e.torch], [(d.code, d.bits, d.lanes, d.per_item) for d in e.dlpack],
         [(t.typestr, t.per_item) for t in e.typestr])
        for e in types.ELEM_TYPES
    ]
    return scalars, elems


def registry_matches(compiled: tuple[list, list]) -> None:
    """Asserts that compiled tables equal the registry, entry by entry (used by tests/compile)."""
    scalars, elems = _registry_rows()
    got_scalars, got_elems = compiled
    assert len(got_scalars) == len(scalars) and len(got_elems) == len(elems)
    for want, got in zip(scalars, got_scalars):
        assert tuple(got) == want
    for want, got in zip(elems, got_elems):
        assert (got[0], got[1], list(got[2]), list(got[3]), list(got[4])) == want


def test_committed_headers_are_the_registry() -> None:
    text = _header()
    for target in ("gb10", "hopper"):
        assert (REPO / "generated" / target / "include" / "kernelgen" / "types.h").read_text() == text


def test_header_codes_follow_the_registry_entry_by_entry() -> None:
    text = _header()
    for e in types.ELEM_TYPES:
        assert re.search(rf"\bkElem_{e.name} = {e.code},", text), e.name
    rows = re.findall(r'^\s*\{"([a-z0-9_?]+)", (\d+), ', text[text.index("kElems[kElemCount]"):], re.M)
    assert [(n, int(b)) for n, b in rows[1:]] == [(e.name, e.bits) for e in types.ELEM_TYPES]
    for s in types.SCALAR_TYPES:
        assert re.search(rf"\bkScalar_{s.name} = {s.code},", text), s.name
    for i, t in enumerate(types.TORCH_DTYPES, 1):
        assert f"kTorch_{t.attr} = {i}," in text
        assert f"case c10::ScalarType::{t.c10}: return kTorch_{t.attr};" in text


def test_swapped_registry_entries_change_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables follow the registry's order, so a reordered registry gives other codes."""
    before = _header()
    swapped = list(types.ELEM_TYPES)
    swapped[5], swapped[6] = swapped[6], swapped[5]
    monkeypatch.setattr(types, "ELEM_TYPES", tuple(swapped))
    assert _header() != before
    with pytest.raises(AssertionError):
        test_committed_headers_are_the_registry()


def test_element_sizes_in_bits() -> None:
    fp4 = types.ELEMS["fp4_e2m1"]
    assert (fp4.bits, fp4.per_storage, fp4.bytes_for(7), fp4.bytes_for(8)) == (4, 2, 4, 4)
    assert types.ELEMS["bf16"].bytes_for(3) == 6
    assert types.ELEMS["fp8_e8m0"].bits == 8


def test_headers_per_cpp_type() -> None:
    assert types.headers({"__nv_bfloat16", "float", "__nv_fp4x2_e2m1"}) == ["cuda_bf16.h", "cuda_fp4.h"]


# ---- the producers' own names


def _dlpack_dtype(capsule: object) -> tuple[int, int, int]:
    """(code, bits, lanes) of a DLPack capsule's tensor, read with ctypes."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    ptr = get(capsule, b"dltensor")

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                    ("ndim", ctypes.c_int32), ("dtype", DLDataType)]

    t = DLTensor.from_address(ptr)
    return t.dtype.code, t.dtype.bits, t.dtype.lanes


def test_torch_names_and_dlpack_codes_agree_with_torch() -> None:
    torch = pytest.importorskip("torch")
    version = tuple(int(x) for x in torch.__version__.split(".")[:2])
    checked = 0
    for t in types.TORCH_DTYPES:
        if version < t.since:
            continue
        dtype = getattr(torch, t.attr)
        assert dtype.itemsize * 8 == t.bits, t
        checked += 1
    assert checked >= 12
    exported = 0
    for e in types.ELEM_TYPES:
        for enc in e.torch:
            if version < types.TORCH[enc.dtype].since:
                continue
            x = torch.zeros(16, dtype=torch.uint8).view(getattr(torch, enc.dtype))
            try:
                code = _dlpack_dtype(x.__dlpack__())
            except (BufferError, RuntimeError, TypeError):
                continue  # torch does not export this dtype through DLPack
            assert (*code, enc.per_item) in [(d.code, d.bits, d.lanes, d.per_item) for d in e.dlpack], (e.name, code)
            exported += 1
    assert exported >= 14


def test_typestrs_agree_with_numpy() -> None:
    np = pytest.importorskip("numpy")
    for e in types.ELEM_TYPES:
        for t in e.typestr:
            assert np.dtype(t.typestr).itemsize * 8 == e.lane_bits * t.per_item, (e.name, t)
