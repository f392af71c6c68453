"""A struct's `header` is installed into the package's include/ with the project's headers it
includes (quoted includes, transitively, at the paths the compiler finds them by), so that C++
programs including the module's API header compile against the package alone; an include that
reaches outside the project is refused at load time, naming the spec's line. The build and a C++
program compiled against the installed package are tests/compile/test_cpp_package.py (its
fixture's affine.cuh includes a header beside it and one from the project's include folders)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import HeaderError, header_files, load_catalog
from tests.conftest import REPO, run_cli

FIXTURE = REPO / "tests" / "fixtures" / "build_settings"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_closure_follows_quoted_includes_as_the_compiler_finds_them(tmp_path: Path) -> None:
    _write(tmp_path, {
        "csrc/norm.cuh": '#pragma once\n#include "common.cuh"\n#include "util/math.h"\n#include <cstdint>\n'
                         '#include "cuda_fp16.h"\n// #include "commented.h"\n/* #include "also_commented.h" */\n'
                         '#include "lib/vendored.h"\n#include "lib/external.h"\n',
        "csrc/common.cuh": '#pragma once\n#include "norm.cuh"\n#include "../shared/base.h"\n',  # a cycle
        "shared/base.h": "#pragma once\n",
        "util/math.h": '#pragma once\n#include "detail/impl.h"\n',  # beside util/math.h
        "util/detail/impl.h": "#pragma once\n",
        "csrc/commented.h": "", "csrc/also_commented.h": "",
        "third_party/inc/lib/vendored.h": '#pragma once\n#include "inner.h"\n',
        "third_party/inc/lib/inner.h": "#pragma once\n",
    })
    outside = tmp_path.parent / f"{tmp_path.name}_lib"
    _write(outside, {"lib/external.h": "#pragma once\n"})
    files = header_files(tmp_path, "csrc/norm.cuh", ["third_party/inc", str(outside)])
    assert files == (
        ("csrc/common.cuh", "csrc/common.cuh"),
        ("csrc/norm.cuh", "csrc/norm.cuh"),
        ("shared/base.h", "shared/base.h"),
        # found in an include folder of the project: its path from that folder
        ("third_party/inc/lib/inner.h", "lib/inner.h"),
        ("third_party/inc/lib/vendored.h", "lib/vendored.h"),
        ("util/detail/impl.h", "util/detail/impl.h"),
        ("util/math.h", "util/math.h"),
    )  # not the commented-out ones, the toolkit's, or a library's outside the project


def test_an_include_reaching_outside_the_project_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    _write(tmp_path, {"outside.h": "", "proj/csrc/norm.cuh": '#pragma once\n\n#include "../../outside.h"\n'})
    with pytest.raises(HeaderError, match=r'csrc/norm.cuh line 3 includes "../../outside.h", which is .*outside'
                                          r" the project"):
        header_files(root, "csrc/norm.cuh")
    # an include that is nowhere (a conditional one, the system's) is not the package's
    _write(tmp_path, {"proj/csrc/norm.cuh": '#pragma once\n#include "../../absent.h"\n'})
    assert header_files(root, "csrc/norm.cuh") == (("csrc/norm.cuh", "csrc/norm.cuh"),)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    return root


def test_the_target_installs_each_file_under_the_package_include_folder(tmp_path: Path) -> None:
    catalog = load_catalog(FIXTURE)
    hopper = render_catalog(catalog)["generated/hopper/CMakeLists.txt"]
    installs = re.findall(r"^install\(FILES((?: \"[^\"]*\")+)\n  DESTINATION (\S+) ", hopper, re.M)
    assert installs == [
        (' "${kg_struct_headers}/kernels/affine.cuh" "${kg_struct_headers}/kernels/affine_types.cuh"',
         "${KERNELGEN_INSTALL_DIR}/hopper/include/bsettings/kg_headers/kernels"),
        (' "${kg_struct_headers}/vendor/scale.cuh"', "${KERNELGEN_INSTALL_DIR}/hopper/include/bsettings/kg_headers/vendor"),
    ]


def test_load_refuses_a_header_whose_include_escapes_naming_the_spec_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (tmp_path / "private.h").write_text("#pragma once\n")
    affine = root / "kernels" / "affine.cuh"
    affine.write_text(affine.read_text().replace('#include "affine_types.cuh"',
                                                 '#include "affine_types.cuh"\n#include "../../private.h"'))
    with pytest.raises(SpecError) as exc:
        load_catalog(root)
    text = str(exc.value)
    spec = (root / "specs" / "half_ops.yaml").read_text().splitlines()
    line = next(i for i, ln in enumerate(spec, 1) if "header: kernels/affine.cuh" in ln)
    assert f"specs/half_ops.yaml:{line}" in text, text
    assert 'kernels/affine.cuh line 7 includes "../../private.h"' in text and "outside the project" in text, text
    # every command refuses it, `kernelgen list` too
    res = run_cli("list", cwd=root)
    assert res.returncode != 0 and "outside the project" in res.stdout + res.stderr


def test_a_cpp_program_compiles_against_the_installed_headers(tmp_path: Path) -> None:
    """What the target's CMake list installs (the struct's files and the generated API headers)
    is enough to compile a C++ program including the module's API header: g++ -fsyntax-only, with
    no folder of the project on the include path."""
    gxx = shutil.which("g++")
    cuda = Path("/usr/local/cuda/include")
    if gxx is None or not (cuda / "cuda_runtime.h").is_file():
        pytest.skip("needs g++ and the CUDA toolkit's headers")
    catalog = load_catalog(FIXTURE)
    inc = tmp_path / "include"
    for path, text in render_catalog(catalog).items():
        if path.startswith("generated/hopper/include/"):
            dest = inc / path.removeprefix("generated/hopper/include/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    runtime = REPO / "src" / "kernelgen" / "runtime" / "include" / "kernelgen"
    for name in ("abi.h", "runtime.h"):
        shutil.copy(runtime / name, inc / "kernelgen" / name)
    for st in (s for m in catalog.modules for s in m.structs):
        for src, dest in st.files:
            (inc / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURE / src, inc / dest)
    (tmp_path / "app.cpp").write_text('#include "bsettings/half_ops.h"\nint main() { affine p{}; return p.n; }\n')
    res = subprocess.run([gxx, "-std=c++17", "-fsyntax-only", "-I", str(inc), "-I", str(cuda),
                          str(tmp_path / "app.cpp")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
