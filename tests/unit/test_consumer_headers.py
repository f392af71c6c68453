"""What a strict C or C++ code base gets from a package's headers and its CMake package.

Each public header (a module's C++ API and C ABI headers, kernelgen/runtime.h, kernelgen/abi.h and
the generated plan_codes.h and target_table.h) compiles alone, and the C and C++ headers of a module
together, without a warning under the strictest usual options: g++ as C++17, C++20 and C++23,
clang++ and nvcc where present (the launchers' inline code as nvcc rewrites it), gcc as C99, C11 and
C17. An older standard gets one #error naming the one needed. The C++ API header defines the element
codes its dtype masks take, and marks the C ABI's reserved names (``__``) for clang-tidy. A struct
header protected by #pragma once only gets a warning from kernelgen generate and build, and from the
CMake function that copies it into the package. The package's imported target gives programs the
CUDA headers, and no toolkit library folder to link from or to put in their RUNPATH."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen import toolkit
from kernelgen.emit.cmake import package_config
from kernelgen.emit.cpp import pragma_once_only
from kernelgen.loader import load_catalog
from tests.conftest import REPO, run_cli
from tests.unit.test_header_abi_reference import ALPHA, _include, _render

CUDA = Path("/usr/local/cuda/include")
NVCC = Path("/usr/local/cuda/bin/nvcc")
WARNINGS = ["-Wall", "-Wextra", "-Wpedantic", "-Wshadow", "-Wconversion", "-Wsign-conversion", "-Wundef",
            "-Wcast-align", "-Wredundant-decls"]
CXX_ONLY = ["-Wold-style-cast"]
GCC_ONLY = ["-Wuseless-cast"]

CXX_HEADERS = ["alpha/demo.h", "alpha/gemmy.h", "kernelgen/runtime.h"]
C_HEADERS = ["alpha/demo_c.h", "alpha/gemmy_c.h", "kernelgen/abi.h", "kernelgen/plan_codes.h",
             "kernelgen/target_table.h"]

needs_cuda = pytest.mark.skipif(not (CUDA / "cuda_runtime.h").is_file(), reason="needs the CUDA toolkit's headers")


@pytest.fixture(scope="module")
def include(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The include folder of package alpha: a plain module and one with a dtype-keyed chain."""
    tmp = tmp_path_factory.mktemp("headers")
    return _include(tmp, _render(tmp / "alpha", "alpha", ALPHA))


def _compile(compiler: str, flags: list[str], include: Path, text: str, suffix: str) -> subprocess.CompletedProcess:
    src = include.parent / f"unit{abs(hash((compiler, *flags, text)))}{suffix}"
    src.write_text(text)
    cmd = [compiler, *flags, "-I", str(include), "-isystem", str(CUDA), "-fsyntax-only", str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _unit(*headers: str) -> str:
    return "".join(f'#include "{h}"\n' for h in headers) + "typedef int kg_unit_not_empty;\n"


@needs_cuda
@pytest.mark.parametrize("std", ["c++17", "c++20", "c++23"])
@pytest.mark.parametrize("header", [*CXX_HEADERS, *C_HEADERS])
def test_each_header_is_clean_as_cpp_under_gxx(include: Path, std: str, header: str) -> None:
    res = _compile("g++", [f"-std={std}", *WARNINGS, *CXX_ONLY, *GCC_ONLY, "-Werror"], include, _unit(header), ".cpp")
    assert res.returncode == 0, res.stderr[-3000:]


@needs_cuda
@pytest.mark.skipif(shutil.which("clang++") is None, reason="needs clang++")
@pytest.mark.parametrize("header", [*CXX_HEADERS, *C_HEADERS])
def test_each_header_is_clean_as_cpp_under_clangxx(include: Path, header: str) -> None:
    res = _compile("clang++", ["-std=c++17", *WARNINGS, *CXX_ONLY, "-Werror"], include, _unit(header), ".cpp")
    assert res.returncode == 0, res.stderr[-3000:]


@pytest.mark.parametrize("std", ["c99", "c11", "c17"])
@pytest.mark.parametrize("header", C_HEADERS)
def test_each_c_header_is_clean_as_c(include: Path, std: str, header: str) -> None:
    res = _compile("gcc", [f"-std={std}", *WARNINGS, "-Werror"], include, _unit(header), ".c")
    assert res.returncode == 0, res.stderr[-3000:]


@needs_cuda
@pytest.mark.skipif(not NVCC.is_file(), reason="needs nvcc")
@pytest.mark.parametrize("header", ["alpha/gemmy.h", "kernelgen/runtime.h"])
def test_each_cpp_header_is_clean_under_nvcc(include: Path, header: str) -> None:
    """nvcc rewrites the inline code of a header (``int64_t{1}`` into a C-style cast) before the
    host compiler sees it; the toolkit's own headers are not clean under these options, so only the
    warnings located in the package's headers count."""
    src = include.parent / f"nvcc_{header.replace('/', '_')}.cu"
    src.write_text(_unit(header))
    host = ",".join([*WARNINGS, *CXX_ONLY, *GCC_ONLY]).replace("-Wpedantic,", "")  # nvcc's #line style
    res = subprocess.run([str(NVCC), "-std=c++17", "-arch=sm_90a", f"-Xcompiler={host}", "-I", str(include), "-c",
                          str(src), "-o", str(src.with_suffix(".o"))], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    ours = [line for line in res.stderr.splitlines() if str(include) in line and "warning" in line]
    assert not ours, "\n".join(ours)


@needs_cuda
def test_the_c_and_cpp_headers_together_declare_nothing_twice(include: Path) -> None:
    text = _unit("alpha/gemmy.h", "alpha/gemmy_c.h", "alpha/demo_c.h", "alpha/demo.h", "alpha/gemmy.h")
    res = _compile("g++", ["-std=c++17", *WARNINGS, *CXX_ONLY, *GCC_ONLY, "-Werror"], include, text, ".cpp")
    assert res.returncode == 0, res.stderr[-3000:]


@needs_cuda
def test_the_cpp_header_defines_the_element_codes_its_masks_take(include: Path) -> None:
    header = (include / "alpha" / "gemmy.h").read_text()
    assert "KG_ELEM_" in header and "from kernelgen/abi.h;" not in header
    text = _unit("alpha/gemmy.h") + "static_assert(KG_DTYPE(KG_ELEM_F32) != 0u, \"a mask\");\n"
    res = _compile("g++", ["-std=c++17", *WARNINGS, *CXX_ONLY, "-Werror"], include, text, ".cpp")
    assert res.returncode == 0, res.stderr[-3000:]


@needs_cuda
@pytest.mark.parametrize("header", CXX_HEADERS)
def test_an_older_cpp_standard_gets_one_error_naming_cpp17(include: Path, header: str) -> None:
    res = _compile("g++", ["-std=c++14"], include, _unit(header), ".cpp")
    errors = [line for line in res.stderr.splitlines() if ": error:" in line]
    assert res.returncode != 0 and len(errors) == 1 and "C++17" in errors[0], res.stderr[-3000:]


@pytest.mark.parametrize("header", C_HEADERS)
def test_c90_gets_an_error_naming_c99(include: Path, header: str) -> None:
    res = _compile("gcc", ["-std=c90", "-pedantic"], include, _unit(header), ".c")
    errors = [line for line in res.stderr.splitlines() if ": error:" in line]
    assert res.returncode != 0 and errors and all("#error" in e and "C99" in e for e in errors), res.stderr[-3000:]


@pytest.mark.parametrize("header", C_HEADERS)
def test_the_c_headers_have_no_cpp_comments(include: Path, header: str) -> None:
    """C99 reads // comments, but the headers say what they need in C's own comments: a C90
    compiler then reports the #error, not the comments."""
    text = re.sub(r"/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", " ", (include / header).read_text(), flags=re.S)
    assert "//" not in text


def test_the_reserved_names_of_the_cpp_header_are_marked_for_clang_tidy(include: Path) -> None:
    text = (include / "alpha" / "gemmy.h").read_text()
    regions = re.findall(r"// NOLINTBEGIN\(([^)]*)\)\n(.*?)// NOLINTEND\(\1\)", text, flags=re.S)
    assert regions and all("bugprone-reserved-identifier" in checks for checks, _ in regions)
    marked = "".join(body for _, body in regions)
    code = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    reserved = {w for line in code for w in re.findall(r"\b\w*__\w*\b", line.split("//")[0])
                if not w.startswith("__")}  # the compiler's own: __GNUC__, __attribute__, __cplusplus
    assert reserved and all(w in marked for w in reserved), reserved


@needs_cuda
@pytest.mark.skipif(shutil.which("clang-tidy") is None, reason="needs clang-tidy")
def test_clang_tidy_reports_no_reserved_identifier_in_the_cpp_header(include: Path) -> None:
    src = include.parent / "tidy.cpp"
    src.write_text(_unit("alpha/gemmy.h"))
    res = subprocess.run(["clang-tidy", "--checks=-*,bugprone-reserved-identifier", "--header-filter=.*alpha/gemmy\\.h",
                          "--warnings-as-errors=*", str(src), "--", "-std=c++17", "-I", str(include), "-isystem",
                          str(CUDA)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


# ---------------------------------------------------------------- struct headers and #pragma once


@pytest.mark.parametrize(("text", "only"), [
    ("#pragma once\nstruct A {};\n", True),
    ("// #ifndef A_H\n#pragma once\n#include <cstdint>\n#ifndef A_H\n#define A_H\n#endif\n", True),
    ("#pragma once\n#ifndef A_H\n#define B_H\n#endif\n", True),
    ("/* guard */\n#pragma once\n#ifndef A_H\n#define A_H\nstruct A {};\n#endif\n", False),
    ("#ifndef A_H\n#define A_H\n#pragma once\nstruct A {};\n#endif\n", False),
    ("# if ! defined( A_H )\n# define A_H\n#pragma once\n#endif\n", False),
    ("#ifndef A_H\n#define A_H\nstruct A {};\n#endif\n", False),
    ("struct A {};\n", False),
])
def test_pragma_once_only(text: str, only: bool) -> None:
    assert pragma_once_only(text) is only


STRUCT_SPEC = """\
module: act
summary: Scaled activation.
sources: [kernels/act.cu]
structs:
  act_params:
    cpp: trial::ActParams
    fields: {scale: f32}
    header: kernels/act_params.h
  guarded_params:
    cpp: trial::Guarded
    fields: {bias: f32}
    header: kernels/guarded.h
kernels:
  act:
    summary: Scales.
    symbol: trial::act_kernel
    args:
      x: {type: f32*, size: 'n'}
      'n': u32
      p: act_params
      g: guarded_params
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples:
      - {'n': 1024}
"""


def _struct_project(root: Path) -> Path:
    from tests.conftest import small_project

    return small_project(root, {
        "specs/act.yaml": STRUCT_SPEC,
        "kernels/act.cu": '#include "kernels/act_params.h"\n#include "kernels/guarded.h"\n',
        "kernels/act_params.h": '#pragma once\n#include "detail.h"\nnamespace trial { struct ActParams { float scale; }; }\n',
        "kernels/detail.h": "#pragma once\nnamespace trial { inline int detail() { return 1; } }\n",
        "kernels/guarded.h": "#ifndef KERNELS_GUARDED_H\n#define KERNELS_GUARDED_H\n#pragma once\n"
                             "namespace trial { struct Guarded { float bias; }; }\n#endif\n",
    })


def test_generate_warns_of_struct_headers_protected_by_pragma_once_only(tmp_path: Path) -> None:
    root = _struct_project(tmp_path / "proj")
    res = run_cli("generate", cwd=root)
    assert res.returncode == 0, res.stderr
    warned = [line for line in res.stderr.splitlines() if "kernelgen: warning:" in line]
    assert len(warned) == 2, res.stderr
    assert "struct 'act_params'" in warned[0] and "kernels/act_params.h, its header," in warned[0]
    assert "kernels/detail.h, a header its header kernels/act_params.h includes" in warned[1]
    for line in warned:
        assert "#pragma once only" in line and "include guard" in line and "#ifndef KERNELS_" in line
        assert "kg_headers/kernels/" in line
    assert "guarded.h" not in res.stderr


def test_the_cmake_copy_of_struct_headers_warns_of_pragma_once_only(tmp_path: Path) -> None:
    root = _struct_project(tmp_path / "proj")
    script = tmp_path / "copy.cmake"
    script.write_text(f'set(KERNELGEN_ROOT "{root}")\n'
                      f'include("{REPO / "src" / "kernelgen" / "cmake" / "struct_headers.cmake"}")\n'
                      f'kernelgen_struct_headers("{tmp_path / "out"}" "kernels/act_params.h" "kernels/act_params.h" '
                      '"kernels/detail.h" "kernels/detail.h" "kernels/guarded.h" "kernels/guarded.h")\n')
    res = subprocess.run([toolkit.find_cmake(), "-P", str(script)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stderr.split())
    assert text.count("CMake Warning") == 2, res.stderr
    assert "kernels/act_params.h is protected by #pragma once only" in text
    assert "kernels/detail.h is protected by #pragma once only" in text
    assert "guarded.h is protected" not in text
    assert (tmp_path / "out" / "kernels" / "guarded.h").is_file()


# ---------------------------------------------------------------- the CMake package

CONSUMER = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(CUDAToolkit REQUIRED)
find_package(alpha CONFIG REQUIRED COMPONENTS hopper)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE alpha::hopper)
"""


@needs_cuda
def test_the_imported_target_gives_the_cuda_headers_and_no_toolkit_library_folder(tmp_path: Path) -> None:
    root = tmp_path / "alpha"
    files = _render(root, "alpha", ALPHA)
    target = files["generated/hopper/package_target.cmake"]
    (lib,) = re.findall(r'IMPORTED_LOCATION "\$\{CMAKE_CURRENT_LIST_DIR\}/(lib\w+\.so)"', target)
    pkg = tmp_path / "prefix" / "alpha"
    (pkg / "hopper" / "include").mkdir(parents=True)
    (pkg / "hopper" / "package_target.cmake").write_text(target)
    (pkg / "alpha-config.cmake").write_text(package_config(load_catalog(root)))
    stub = tmp_path / "stub.c"
    stub.write_text("void kg_stub(void) {}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", str(stub), "-o", str(pkg / "hopper" / lib)], check=True)
    src = tmp_path / "consumer"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CONSUMER)
    (src / "main.cpp").write_text("#include <cuda_runtime.h>\nint main() { return 0; }\n")
    cuda_root = CUDA.resolve().parent
    res = subprocess.run([toolkit.find_cmake(), "-S", str(src), "-B", str(src / "build"), "-G", "Ninja",
                          f"-DCMAKE_PREFIX_PATH={tmp_path / 'prefix'}", f"-DCUDAToolkit_ROOT={cuda_root}"],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0 and "CUDAToolkit" in res.stdout + res.stderr:
        pytest.skip("CMake's FindCUDAToolkit finds no toolkit here")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    ninja = (src / "build" / "build.ninja").read_text()
    link = "\n".join(line for line in ninja.splitlines() if line.strip().startswith(("LINK_PATH", "LINK_FLAGS",
                                                                                        "LINK_LIBRARIES")))
    assert str(pkg / "hopper" / lib) in link, link
    assert "cuda" not in link.lower().replace(str(tmp_path).lower(), ""), link
    includes = "\n".join(line for line in ninja.splitlines() if line.strip().startswith("INCLUDES"))
    assert "cuda" in includes.lower(), includes
    build = subprocess.run([toolkit.find_cmake(), "--build", str(src / "build")], capture_output=True, text=True,
                           timeout=300)
    assert build.returncode == 0, build.stdout[-3000:]


def test_build_warns_of_them_before_it_builds(tmp_path: Path) -> None:
    root = _struct_project(tmp_path / "proj")
    (tmp_path / "a_file").write_text("")
    res = run_cli("build", "--no-link", "-t", "hopper", "--build-dir", str(tmp_path / "a_file"), cwd=root)
    assert res.returncode == 2, res.stdout + res.stderr  # stopped before anything is built
    assert res.stderr.count("#pragma once only") == 2, res.stderr
