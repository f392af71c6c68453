"""The binding support's type tables (C++) and the model's enums (Python) use the same codes."""

from __future__ import annotations

import re
from pathlib import Path

from kernelgen.model import Elem, Scalar

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "kernelgen" / "runtime"


def test_element_table_rows_follow_elem_codes() -> None:
    src = (RUNTIME / "src" / "python_support.cpp").read_text()
    table = src[src.index("const ElemInfo kElems[kElemCount] = {"):]
    table = table[: table.index("};")]
    names = re.findall(r'^\s*\{"([^"]+)"', table, re.M)
    assert names[1:] == [e.spelling for e in Elem]
    assert all(names.index(e.spelling) == e.code for e in Elem)


def test_code_enums_follow_the_model() -> None:
    header = (RUNTIME / "include" / "kernelgen" / "python.h").read_text()
    scalars = re.search(r"enum ScalarCode : uint8_t \{([^}]*)\}", header).group(1)  # type: ignore[union-attr]
    assert [int(v) for v in re.findall(r"= (\d+)", scalars)] == [s.code for s in Scalar]
    assert re.findall(r"k(\w+) =", scalars) == [s.spelling.upper() for s in Scalar]
    elems = re.search(r"enum ElemCode : uint8_t \{([^}]*)\}", header).group(1)  # type: ignore[union-attr]
    members = [m.strip() for m in elems.replace("\n", " ").split(",") if m.strip() and "kElemCount" not in m]
    assert len(members) == len(Elem)
