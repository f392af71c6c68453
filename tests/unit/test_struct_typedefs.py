"""Struct types whose C++ name is no class of that name, and what a failed build shows about them:
the CUDA toolkit's typedefs (`half2`, `nv_bfloat162`, `__half2_raw`, the vector types) are
toolkit structs, which the C++ API header names through the toolkit's header, never
forward-declared; a user's struct without `header` is forward-declared with its spec line in a
comment, which the build reads back when the sources declare the name as a typedef. And a
kernelgen check that fails after the compiler's own errors of its translation unit is shown
after those errors (kernelgen.build._explain_failure)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernelgen.build import MAX_ERRORS_BEFORE_CHECK, _explain_failure
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from kernelgen.types import TOOLKIT_STRUCTS

TARGETS = (Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml").read_text()
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"

SPEC = """\
module: ep
summary: Typedef'd struct types.
sources: [kernels/ep.cu]
structs:
  h2: {cpp: half2, fields: {x: f16, y: f16}, align: 4}
  nh2: {cpp: nv_half2, fields: {x: f16, y: f16}, align: 4}
  uh2: {cpp: "::__nv_half2", fields: {x: f16, y: f16}, align: 4}
  b2: {cpp: nv_bfloat162, fields: {x: bf16, y: bf16}, align: 4}
  raw: {cpp: __half2_raw, fields: {x: u16, y: u16}, align: 4}
  d4: {cpp: double4_16a, fields: {x: f64, y: f64, z: f64, w: f64}, align: 16}
  td: {cpp: tdns::TdParams, fields: {a: i32, b: f32}}
kernels:
  take:
    summary: Takes them all.
    args: {h2: h2, nh2: nh2, uh2: uh2, b2: b2, raw: raw, d4: d4, td: td, out: {type: f32*, size: 1}}
    grid: [1, 1, 1]
    block: [1, 1, 1]
    examples: [{}]
"""

API = "generated/hopper/include/kernelgen/ep.h"


def _project(root: Path) -> dict[str, str]:
    """The project of SPEC, its generated files written under ``root``."""
    (root / "specs").mkdir()
    (root / "kernels").mkdir()
    (root / "kernels" / "ep.cu").write_text("// ep\n")
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "specs" / "ep.yaml").write_text(SPEC)
    files = render_catalog(load_catalog(root))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return files


def _toolkit_header(name: str) -> str:
    path = CUDA_INCLUDE / name
    if not path.is_file():
        pytest.skip(f"needs the CUDA toolkit's {name}")
    return path.read_text(encoding="utf-8", errors="replace")


@pytest.mark.parametrize("header", ["cuda_fp16.h", "cuda_bf16.h"])
def test_every_alias_of_a_toolkit_struct_is_one(header: str) -> None:
    """The headers' own aliases (``typedef __half2 half2;``, ``typedef __half2_raw __nv_half2_raw;``)
    are toolkit structs with the same fields, alignment and header as the type they alias."""
    text = _toolkit_header(header)
    aliases = [(m.group(1), m.group(2)) for m in re.finditer(r"^\s*typedef\s+(\w+)\s+(\w+)\s*;", text, re.M)
               if m.group(1) in TOOLKIT_STRUCTS]
    assert len(aliases) >= (4 if header == "cuda_fp16.h" else 1), aliases
    for of, alias in aliases:
        assert TOOLKIT_STRUCTS.get(alias) == TOOLKIT_STRUCTS[of], (alias, of)
    # and the structs declared as typedefs of unnamed structs: `typedef struct {...} __half2_raw;`
    for name in re.findall(r"^\}\s*(\w+_raw)\s*;", text, re.M):
        assert TOOLKIT_STRUCTS[name].header == header, name


def test_every_vector_type_is_a_toolkit_struct() -> None:
    text = _toolkit_header("vector_types.h")
    names = re.findall(r"^typedef __device_builtin__ struct \w+(?: __VECTOR_TYPE_DEPRECATED__\([^)]*\))? (\w+);",
                       text, re.M)
    assert len(names) > 50 and "double4_16a" in names, names
    assert [n for n in names if n not in TOOLKIT_STRUCTS] == []
    assert TOOLKIT_STRUCTS["double4_32a"].align == 32 and TOOLKIT_STRUCTS["longlong4_16a"].fields[3] == ("w", "i64")


def test_the_api_header_includes_the_toolkits_header_for_its_typedefs(tmp_path: Path) -> None:
    api = _project(tmp_path)[API]
    decls = api.split("// The struct types the launchers take by value.\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert decls == [
        "#include <cuda_fp16.h>",
        "#include <cuda_bf16.h>",
        "#include <vector_types.h>",
        "namespace tdns { struct TdParams; }  // specs/ep.yaml:11: struct 'td' (C++ tdns::TdParams): "
        "forward-declared (a typedef needs header)",
    ], decls
    assert "kernelgen::Outcome take(::half2 h2, ::nv_half2 nh2, ::__nv_half2 uh2, ::nv_bfloat162 b2, " in api, api


def _ninja(*output: str) -> list[str]:
    """A failed ninja step as the build reads it: progress, FAILED, the command, its output."""
    return ["[1/13] Building CUDA object kg_hopper/CMakeFiles/kernelgen_hopper_obj_ep.dir/src/ep.cu.o",
            "FAILED: [code=2] kg_hopper/CMakeFiles/kernelgen_hopper_obj_ep.dir/src/ep.cu.o ",
            "/usr/local/cuda/bin/nvcc -c /p/generated/hopper/src/ep.cu -o ep.cu.o",
            *output, "ninja: build stopped: subcommand failed."]


TYPEDEF_HINT = ("kernelgen: specs/ep.yaml:11: struct 'td' (C++ tdns::TdParams): the sources declare tdns::TdParams "
                "otherwise than as a struct or class of that name (a typedef or an alias, say), which the C++ API "
                "header cannot forward-declare; give the struct header: the source that declares the type")


@pytest.mark.parametrize("order", ["forward declaration first", "typedef first"])
def test_a_typedef_of_a_forward_declared_name_is_named_by_its_struct(tmp_path: Path, order: str) -> None:
    """nvcc reports the clash at the typedef (naming the forward declaration's line) or at the
    forward declaration (naming the typedef's): either way the build names the spec's struct."""
    api = _project(tmp_path)[API]
    at = next(i for i, ln in enumerate(api.splitlines(), 1) if "struct TdParams;" in ln)
    header = tmp_path / API
    if order == "forward declaration first":
        error = [f'{tmp_path}/kernels/td.h(4): error: invalid redeclaration of type name "tdns::TdParams" '
                 f'(declared at line {at} of {header})',
                 "  typedef struct { int a; float b; } TdParams;",
                 "                                     ^"]
    else:
        error = [f'{header}({at}): error: type "tdns::TdParams" has already been defined (previous definition at '
                 f'line 4 of {tmp_path}/kernels/td.h)',
                 "  namespace tdns { struct TdParams; }",
                 "                          ^"]
    lines = _ninja(*error, "", '1 error detected in the compilation of "/p/generated/hopper/src/ep.cu".')
    text = _explain_failure(lines, tmp_path).splitlines()
    assert text[0].startswith(TYPEDEF_HINT), text
    assert text[1:4] == error, text
    # another error on a line of the header (or on no forward declaration) is no such clash
    other = [f'{header}({at - 1}): error: type "x" has already been defined']
    assert "struct 'td'" not in _explain_failure(_ninja(*other), tmp_path)


# A build of a struct whose C++ name the sources do not declare (cpp: TP, header: kernels/tp.h,
# which declares TPar): nvcc's output, the first errors on the names, then kernelgen's check.
def _undeclared(root: Path) -> list[str]:
    k = f"{root}/generated/hopper/src/k.cu"
    return [
        f'{root}/generated/hopper/include/kernelgen/k.h(30): error: the global scope has no "TP"',
        "    kernelgen::Outcome kern(::TP t, float* out, cudaStream_t stream = nullptr);",
        "                              ^",
        "",
        f'{k}(52): error: the global scope has no "TP"',
        "    using kg_signature_kern = void (*)(::TP, float*);",
        "                                         ^",
        "",
        f'{k}(63): error: the global scope has no "TP"',
        "    using kg_struct_tp = ::TP;",
        "                           ^",
        "",
        f'{k}(64): error: static assertion failed with "the spec\'s layout (kg_spec) differs from the C++ type\'s '
        '(kg_cpp)"',
        "",
        f'{k}(66): error: static assertion failed with "kernelgen: specs/k.yaml:5: struct \'tp\' (C++ TP): field '
        '\'p\': the C++ type has no public member \'p\'; name the field after the C++ member it is"',
        "    static_assert(kg_has_tp<0, kg_struct_tp>::value, \"kernelgen: specs/k.yaml:5: struct 'tp' ...\");",
        "    ^",
        "",
        f"{k}(67): error: expected a class, struct, or union type",
        "",
        f'14 errors detected in the compilation of "{k}".',
    ]


CHECK = ("kernelgen: specs/k.yaml:5: struct 'tp' (C++ TP): field 'p': the C++ type has no public member 'p'; name "
         "the field after the C++ member it is")


def test_the_compilers_errors_before_a_failed_check_come_first(tmp_path: Path) -> None:
    """A check that fails after compiler errors of its translation unit (an undeclared type has no
    members) may follow from them: the first of them come first, with their file:line and source
    excerpt, then the check, said to come after them."""
    output = _undeclared(tmp_path)
    text = _explain_failure(_ninja(*output), tmp_path).splitlines()
    assert text[0] == output[0] and text[1:3] == output[1:3], text
    shown = [ln for ln in text if ": error: " in ln]
    assert shown == [output[0], output[4], output[8]][:MAX_ERRORS_BEFORE_CHECK], text
    assert not any("kg_spec" in ln or "expected a class" in ln for ln in text), text  # kernelgen's own, or after
    assert text[-2:] == ["kernelgen: the compiler's errors above come before kernelgen's first failed check, which "
                         "may follow from them:", CHECK], text


def test_the_errors_shown_before_a_check_are_bounded(tmp_path: Path) -> None:
    output = _undeclared(tmp_path)
    many = [f"{tmp_path}/kernels/k.cu({i}): error: identifier \"x{i}\" is undefined" for i in range(6)]
    text = _explain_failure(_ninja(*many, *output), tmp_path).splitlines()
    assert [ln for ln in text if ": error: " in ln] == many[:MAX_ERRORS_BEFORE_CHECK], text
    assert f"... ({len(many) + 3 - MAX_ERRORS_BEFORE_CHECK} more errors; -v shows them)" in text, text
    assert text[-1] == CHECK


def test_a_check_that_fails_first_is_shown_alone(tmp_path: Path) -> None:
    """kernelgen's own static_asserts before the check (kg_layout's) and errors after it do not
    count; another translation unit's errors (another failed step) are explained as that step's."""
    output = _undeclared(tmp_path)
    own = output[12:]  # from kg_layout's static_assert on
    assert _explain_failure(_ninja(*own), tmp_path) == CHECK
    other = ["FAILED: [code=2] kg_hopper/CMakeFiles/kernelgen_hopper_obj_x.dir/src/x.cu.o ",
             "/usr/local/cuda/bin/nvcc -c /p/generated/hopper/src/x.cu -o x.cu.o",
             f'{tmp_path}/kernels/x.cu(3): error: identifier "y" is undefined',
             '1 error detected in the compilation of "/p/generated/hopper/src/x.cu".']
    both = _explain_failure(other + _ninja(*own), tmp_path).splitlines()
    assert both[:2] == ["2 build steps failed:",
                        "failed step 1 of 2: kg_hopper/CMakeFiles/kernelgen_hopper_obj_x.dir/src/x.cu.o"], both
    assert f'{tmp_path}/kernels/x.cu(3): error: identifier "y" is undefined' in both, both
    assert both[-2].startswith("failed step 2 of 2: ") and both[-1] == CHECK, both
    # without ninja's lines (the output alone), the whole output is the check's
    assert _explain_failure(output, tmp_path).splitlines()[0] == output[0]
