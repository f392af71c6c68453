"""Injection corpus: payloads placed in every free-text field that reaches generated code.

Each is rejected by the loader before anything is rendered, or, for summaries (free text),
rendered inertly: the marker KGX never appears in generated C++, Python or CMake outside
comments and string literals.
"""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.unit.test_loader import write_project

PAYLOADS = [
    'n); system("KGX"); (1',
    "KGX */ int x; /*",
    "*/ KGX /*",
    "// KGX",
    "n \\\nKGX",
    '#include "KGX"',
    "\n#define KGX 1",
    "{{ KGX }}",
    "{% if KGX %}x{% endif %}",
    "{# KGX #}",
    '__import__("KGX")',
    "n.__class__.KGX",
    "(lambda: KGX)()",
    "KGX\u2028n",
    "KGX\u2029",
    "KGX\x00",
    "1" * 400 + "KGX",
    "99999999999999999999999999 + KGX",
    '"KGX"',
    "'KGX'",
    "KGX; rm -rf /",
    "$(KGX)",
    "`KGX`",
    "KGX\r\nint y;",
    "??/KGX",
    "<%KGX%>",
    "KGX\\",
    "n + 1 # KGX",
    "n + 1 ; KGX",
    "KGX\tn",
    ") or __import__('os').system('KGX') or (",
    "${KGX}",
    "[[KGX]]",
    "@KGX@",
    "KGX\u202e",
    "KGX\ufeff",
    "kg_KGX",
    "__KGX__",
    "KGX::evil",
    "KGX<1>;int",
    "\x1b[31mKGX",
    "KGX\v",
    "n if KGX else 0",
    "getattr(n, 'KGX')",
]

BASE = {
    "module": "demo",
    "summary": "A demo module.",
    "sources": ["kernels/demo.cu"],
    "kill_switch": "DEMO_OFF",
    "constants": {"THREADS": 256},
    "kernels": {
        "scale": {
            "summary": "Scales.",
            "symbol": "scale_kernel",
            "args": {"x": {"type": "const f32*", "size": "n"}, "out": "f32*", "n": "u32", "alpha": "f32"},
            "grid": ["div_ceil(n, THREADS)", 1, 1],
            "block": ["THREADS", 1, 1],
            "shared_mem": "0",
            "skip_if": ["n == 0"],
            "applies_if": ["n % 4 == 0"],
            "requires": ["n <= 1000000"],
            "examples": [{"n": 1024}],
        },
        "scale2": {
            "summary": "Scales again.",
            "symbol": "scale_kernel",
            "args": {"x": {"type": "const f32*", "size": "n"}, "out": "f32*", "n": "u32", "alpha": "f32"},
            "grid": ["div_ceil(n, THREADS)", 1, 1],
            "block": ["THREADS", 1, 1],
            "examples": [{"n": 1024}],
        },
    },
    "fallbacks": {"any_scale": ["scale", "scale2"]},
}


def _rename_key(d: dict, old: str, new: str) -> dict:
    return {(new if k == old else k): v for k, v in d.items()}


def inject(field: str, payload: str) -> dict:
    spec = json.loads(json.dumps(BASE))
    k = spec["kernels"]["scale"]
    if field == "grid":
        k["grid"][0] = payload
    elif field == "block":
        k["block"][0] = payload
    elif field in ("shared_mem",):
        k[field] = payload
    elif field in ("skip_if", "applies_if", "requires"):
        k[field][0] = payload
    elif field == "size":
        k["args"]["x"]["size"] = payload
    elif field == "constant_value":
        spec["constants"]["EVIL"] = payload
    elif field == "constant_name":
        spec["constants"][payload] = 1
    elif field == "module_name":
        spec["module"] = payload
    elif field == "kernel_name":
        spec["kernels"] = _rename_key(spec["kernels"], "scale2", payload)
        spec["fallbacks"]["any_scale"] = ["scale", payload]
    elif field == "arg_name":
        k["args"] = _rename_key(k["args"], "alpha", payload)
    elif field == "fallback_name":
        spec["fallbacks"] = {payload: ["scale", "scale2"]}
    elif field == "kill_switch":
        spec["kill_switch"] = payload
    elif field == "symbol":
        k["symbol"] = payload
    elif field == "source":
        spec["sources"] = [payload]
    elif field == "type":
        k["args"]["n"] = payload
    elif field == "module_summary":
        spec["summary"] = payload
    elif field == "kernel_summary":
        k["summary"] = payload
    else:
        raise AssertionError(field)
    return spec


CODE_FIELDS = [
    "grid", "block", "shared_mem", "skip_if", "applies_if", "requires", "size", "constant_value", "constant_name",
    "module_name", "kernel_name", "arg_name", "fallback_name", "kill_switch", "symbol", "source", "type",
]
TEXT_FIELDS = ["module_summary", "kernel_summary"]


def write(tmp_path: Path, spec: dict) -> Path:
    # JSON is YAML: every payload arrives in the loader exactly as written above.
    return write_project(tmp_path, json.dumps(spec, indent=1))


def test_base_spec_is_valid(tmp_path: Path) -> None:
    assert render_catalog(load_catalog(write(tmp_path, BASE)))


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"p{i}" for i in range(len(PAYLOADS))])
@pytest.mark.parametrize("field", CODE_FIELDS)
def test_payload_in_code_field_is_rejected_before_rendering(tmp_path: Path, field: str, payload: str) -> None:
    try:
        load_catalog(write(tmp_path, inject(field, payload)))
    except SpecError as exc:
        assert str(exc).startswith("specs/demo.yaml"), str(exc)
        return
    # Accepted only when the payload is itself a well-formed name for that field (such as
    # "__KGX__" for an environment variable or "KGX::evil" for a C++ function), which
    # cannot change the syntax around it.
    assert field in ("kill_switch", "symbol"), f"{field} accepted {payload!r}"
    assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", payload), payload


def _cpp_code_only(text: str) -> str:
    """C/C++ text with comments, string and character literals removed."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            assert j >= 0, "unterminated comment in generated code"
            i = j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            assert j < n, "unterminated literal in generated code"
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _rust_code_only(text: str) -> str:
    """Rust text with // comments and string literals removed (the generated Rust has no block
    comments and no character literals; a lone ' starts a lifetime)."""
    return _cpp_code_only(re.sub(r"'(static|_)\b", "", text))


def _py_code_only(text: str) -> str:
    toks = tokenize.generate_tokens(io.StringIO(text).readline)
    return " ".join(t.string for t in toks if t.type not in (tokenize.COMMENT, tokenize.STRING))


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"p{i}" for i in range(len(PAYLOADS))])
@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_payload_in_summary_is_rejected_or_inert(tmp_path: Path, field: str, payload: str) -> None:
    try:
        catalog = load_catalog(write(tmp_path, inject(field, payload)))
    except SpecError as exc:
        assert "specs/demo.yaml" in str(exc)
        return
    files = render_catalog(catalog)
    for path, text in files.items():
        if path.endswith((".py", ".pyi")):
            code = _py_code_only(text)
        elif path.endswith(".rs"):
            code = _rust_code_only(text)
        elif path.endswith(("CMakeLists.txt", ".cmake", ".toml")):
            code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        else:
            code = _cpp_code_only(text)
        assert "KGX" not in code, f"payload reached code in {path}"
        compile(text, path, "exec") if path.endswith(".py") else None
        if path.endswith((".cu", ".h", ".cpp")):
            # A comment line never ends in a backslash (it would splice the next line in).
            assert not re.search(r"//[^\n]*\\\n", text), path
