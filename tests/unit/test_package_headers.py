"""What a package's C and C++ headers give a program that links several projects' libraries.

Each package's struct headers (and the project headers they include) are installed under its own
header folder and included from beside the API header, so two projects whose struct headers share
a path (and a struct name, in other namespaces, with other layouts) are included together and each
API header gets its own; each library's runtime functions are declared under the package's C prefix
(<c_prefix>_rt_refresh, ...), which the library defines besides the kg_rt_* names every library
shares, and the Rust crate calls those; each launcher's sizes function is documented and counted
(<...>__n_sizes), with a C++ counterpart. The build of two such packages in one program is
tests/compile/test_cpp_package.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen.emit import c as emit_c
from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.conftest import REPO

RUNTIME = REPO / "src" / "kernelgen" / "runtime"

TARGETS = """\
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
  sm_count: 132
"""

SPEC = """\
module: fancy
summary: Scaled copy.
sources: [kernels/fancy.cu]
kill_switch: @PKG@_NO_FANCY
structs:
  params:
    cpp: @NS@::Params
    fields: {@FIELDS@}
    header: kernels/params.h
kernels:
  fancy_vec4:
    symbol: @NS@::fancy_vec4_kernel
    summary: Four floats a thread.
    args:
      x: {type: const f32*, size: 'n'}
      out: {type: f32*, size: 'n'}
      bias: {type: const f32*, size: 'n', nullable: true}
      n_dev: {type: u32, device: true, bound: 'n'}
      'n': u32
      p: params
    grid: ["div_ceil(n, 512)", 1, 1]
    block: [128, 1, 1]
    applies_if: [n % 4 == 0]
    examples:
      - {'n': 4096}
  fancy_plain:
    extends: fancy_vec4
    symbol: @NS@::fancy_plain_kernel
    summary: One float a thread.
    grid: ["div_ceil(n, 128)", 1, 1]
    applies_if: []
    examples:
      - {'n': 1001}
fallbacks:
  fancy_any: [fancy_vec4, fancy_plain]
"""

# params.h includes a header beside it and one by its path from the project root (which the
# installed copy must find in its own package, whatever the include path holds).
PARAMS = """\
#pragma once
#include "kernels/detail.h"
#include "scalar.h"
namespace @NS@ {
struct Params {
@MEMBERS@
};
static_assert(sizeof(Params) == kParamsBytes, "its own detail.h");
}  // namespace @NS@
"""

DETAIL = "#pragma once\nnamespace @NS@ {\nconstexpr unsigned long kParamsBytes = @BYTES@;\n}\n"
SCALAR = "#pragma once\nnamespace @NS@ {\nusing scalar = float;\n}\n"

KERNEL = """\
#pragma once
#include <cstdint>
#include "params.h"
namespace @NS@ {
__global__ void fancy_vec4_kernel(const float* x, float* out, const float* bias, const uint32_t* n_dev, uint32_t n,
                                  Params p) {}
__global__ void fancy_plain_kernel(const float* x, float* out, const float* bias, const uint32_t* n_dev, uint32_t n,
                                   Params p) {}
}  // namespace @NS@
"""

# (package, namespace, spec fields, C++ members, bytes): the same header path, other layouts.
PACKAGES = [
    ("aops", "aops_k", "scale: f32, offset: i32", "  scalar scale;\n  int32_t offset;", 8),
    ("bops", "bops_k", "scale: f32, offset: i32, extra: i64", "  scalar scale;\n  int32_t offset;\n  int64_t extra;",
     16),
]


def _project(tmp_path: Path, pkg: str, ns: str, fields: str, members: str, size: int) -> Path:
    root = tmp_path / pkg
    files = {
        "specs/targets.yaml": TARGETS,
        "specs/project.yaml": f"package: {pkg}\n",
        "specs/fancy.yaml": SPEC.replace("@FIELDS@", fields),
        "kernels/params.h": PARAMS.replace("@MEMBERS@", members),
        "kernels/detail.h": DETAIL.replace("@BYTES@", str(size)),
        "kernels/scalar.h": SCALAR,
        "kernels/fancy.cu": KERNEL,
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.replace("@NS@", ns).replace("@PKG@", pkg.upper()))
    return root


def _render(root: Path) -> dict[str, str]:
    return render_catalog(load_catalog(root))


def test_struct_headers_go_under_the_package_folder_and_the_api_header_includes_its_own(tmp_path: Path) -> None:
    root = _project(tmp_path, *PACKAGES[0])
    files = _render(root)
    cmake = files["generated/hopper/CMakeLists.txt"]
    call = re.search(r"^kernelgen_struct_headers\(\$\{kg_struct_headers\}((?:\s+\"[^\"]*\" \"[^\"]*\")+)\)", cmake,
                     re.M)
    assert call, cmake
    assert re.findall(r'"([^"]*)" "([^"]*)"', call.group(1)) == [
        ("kernels/detail.h", "kernels/detail.h"), ("kernels/params.h", "kernels/params.h"),
        ("kernels/scalar.h", "kernels/scalar.h")]
    installs = re.findall(r"^install\(FILES((?: \"[^\"]*\")+)\n  DESTINATION (\S+) ", cmake, re.M)
    assert installs == [(' "${kg_struct_headers}/kernels/detail.h" "${kg_struct_headers}/kernels/params.h" '
                         '"${kg_struct_headers}/kernels/scalar.h"',
                         "${KERNELGEN_INSTALL_DIR}/hopper/include/aops/kg_headers/kernels")]
    assert "${KERNELGEN_ROOT}/kernels" not in cmake  # nothing at its path from the project root
    api = files["generated/hopper/include/aops/fancy.h"]
    assert ('#if __has_include("kg_headers/kernels/params.h")  // installed: the package\'s copy, beside this header\n'
            '#include "kg_headers/kernels/params.h"\n#else  // the project\'s build\n#include "kernels/params.h"\n'
            "#endif\n") in api, api
    assert '#include "kernels/params.h"' not in api.replace('#else  // the project\'s build\n#include "kernels/', "")


def _install(tmp_path: Path, root: Path, files: dict[str, str]) -> Path:
    """The target's include folder as `kernelgen build` installs it: the generated headers, the
    runtime's, and the struct headers as the CMake list's kernelgen_struct_headers call writes them
    (run here with cmake -P) at its install destinations."""
    pkg = root.name
    inc = tmp_path / "install" / pkg / "include"
    for path, text in files.items():
        if path.startswith("generated/hopper/include/"):
            dest = inc / path.removeprefix("generated/hopper/include/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
    for name in ("abi.h", "runtime.h"):
        shutil.copy(RUNTIME / "include" / "kernelgen" / name, inc / "kernelgen" / name)
    cmake = files["generated/hopper/CMakeLists.txt"]
    call = re.search(r"^kernelgen_struct_headers\(\$\{kg_struct_headers\}([^)]*)\)", cmake, re.M)
    assert call
    out = tmp_path / "configure" / pkg
    script = tmp_path / f"{pkg}.cmake"
    script.write_text(f'set(KERNELGEN_ROOT "{root}")\n'
                      f'include("{REPO}/src/kernelgen/cmake/struct_headers.cmake")\n'
                      f'kernelgen_struct_headers("{out}"{call.group(1)})\n')
    res = subprocess.run([shutil.which("cmake") or "cmake", "-P", str(script)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    for listed, folder in re.findall(r'^install\(FILES((?: "[^"]*")+)\n  DESTINATION \$\{KERNELGEN_INSTALL_DIR\}/hopper/'
                                    r"include/(\S+) ", cmake, re.M):
        for f in re.findall(r'"\$\{kg_struct_headers\}/([^"]*)"', listed):
            (inc / folder).mkdir(parents=True, exist_ok=True)
            shutil.copy(out / f, inc / folder / Path(f).name)
    return inc


def test_the_installed_copy_includes_its_own_package_files(tmp_path: Path) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("needs cmake")
    root = _project(tmp_path, *PACKAGES[0])
    inc = _install(tmp_path, root, _render(root))
    params = (inc / "aops" / "kg_headers" / "kernels" / "params.h").read_text()
    # found through the project root in the build: made relative; beside it: kept
    assert '#include "detail.h"' in params and '#include "scalar.h"' in params, params
    assert params.replace('#include "detail.h"', '#include "kernels/detail.h"') == \
        (root / "kernels" / "params.h").read_text()


COMPILE_BOTH = """\
#include "aops/fancy.h"
#include "bops/fancy.h"
#include "aops/fancy_c.h"
#include "bops/fancy_c.h"

// Each API header got its own package's struct (and that header's own kernels/detail.h).
static_assert(sizeof(::aops_k::Params) == 8, "aops's layout");
static_assert(sizeof(::bops_k::Params) == 16, "bops's layout");
static_assert(sizeof(aops_fancy__params__t) == 8 && sizeof(bops_fancy__params__t) == 16, "the C structs");
static_assert(aops_fancy__fancy_vec4__n_sizes == 4 && bops_fancy__fancy_any__n_sizes == 4, "sizes counts");

int main() {
  const kernelgen::Sizes<4> a = aops::fancy::sizes_fancy_vec4(4096);
  const kernelgen::Sizes<4> b = bops::fancy::sizes_fancy_any(1001);
  void (*const refresh[2])(void) = {aops_rt_refresh, bops_rt_refresh};
  void (*const limit[2])(int32_t) = {aops_rt_limit_sms, bops_rt_limit_sms};
  return static_cast<int>(a.values[0] + b.values[3]) + (refresh[0] == refresh[1]) + (limit[0] == limit[1]);
}
"""


@pytest.mark.parametrize("first", ["aops", "bops"])
def test_two_packages_struct_headers_of_one_path_are_included_together(tmp_path: Path, first: str) -> None:
    """One C++ translation unit includes both packages' API headers, whose struct headers have one
    path (kernels/params.h, including kernels/detail.h) and other namespaces and layouts; each gets its
    own whatever the include path order (g++ -fsyntax-only, no folder of either project on the path)."""
    gxx = shutil.which("g++")
    cuda = Path("/usr/local/cuda/include")
    if gxx is None or shutil.which("cmake") is None or not (cuda / "cuda_runtime.h").is_file():
        pytest.skip("needs g++, cmake and the CUDA toolkit's headers")
    incs = {}
    for pkg in PACKAGES:
        root = _project(tmp_path, *pkg)
        incs[pkg[0]] = _install(tmp_path, root, _render(root))
    order = [incs[first], *(v for k, v in incs.items() if k != first)]
    (tmp_path / "app.cpp").write_text(COMPILE_BOTH)
    flags = [f for inc in order for f in ("-I", str(inc))]
    res = subprocess.run([gxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-pedantic",
                          *flags, "-I", str(cuda), str(tmp_path / "app.cpp")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]


def test_runtime_functions_are_declared_and_defined_under_the_package_prefix(tmp_path: Path) -> None:
    abi = (RUNTIME / "include" / "kernelgen" / "abi.h").read_text()
    declared = re.findall(r"^[A-Za-z][\w ]*\*? ?kg_rt_(\w+)\(", abi, re.M)
    assert sorted(declared) == sorted(name for _, name, _ in emit_c.RUNTIME_FUNCTIONS)
    runtime = (RUNTIME / "src" / "runtime.cpp").read_text()
    own = re.findall(r"^[A-Za-z][\w ]*\*? ?KG_RT_OWN\((\w+)\)\(([^)]*)\)", runtime, re.M)
    assert [(name, params) for name, params in own] == [(name, params) for _, name, params in
                                                        emit_c.RUNTIME_FUNCTIONS]
    files = _render(_project(tmp_path, *PACKAGES[0]))
    cmake = files["generated/hopper/CMakeLists.txt"]
    assert "target_compile_definitions(${kg_lib} PRIVATE KERNELGEN_C_PREFIX=aops)" in cmake
    for header in ("fancy.h", "fancy_c.h"):
        text = files[f"generated/hopper/include/aops/{header}"]
        for ret, name, params in emit_c.RUNTIME_FUNCTIONS:
            assert f"{ret} aops_rt_{name}({params});" in text, (header, name)
    lib = files["generated/hopper/rust/src/lib.rs"]
    ffi = lib[lib.index("pub(crate) mod kg_ffi"):lib.index("pub(crate) mod kg_rt")]
    linked = re.findall(r'#\[link_name = "(\w+)"\]\n\s*pub fn (\w+)\(', ffi)
    assert linked and all(link == "aops_rt_" + fn.removeprefix("kg_rt_") for link, fn in linked), linked
    assert len(linked) == len(re.findall(r"pub fn kg_rt_", ffi))


def test_kernelgen_own_prefix_adds_no_second_name() -> None:
    files = render_catalog(load_catalog(REPO / "tests" / "fixtures" / "project"))
    assert not any("KERNELGEN_C_PREFIX" in text for path, text in files.items() if path.endswith("CMakeLists.txt"))
    headers = [text for path, text in files.items() if path.endswith(("_c.h", ".h")) and "/include/" in path]
    assert headers and not any("_RT_DECLARED" in text for text in headers)


def test_sizes_are_documented_and_counted(tmp_path: Path) -> None:
    files = _render(_project(tmp_path, *PACKAGES[0]))
    c_header = files["generated/hopper/include/aops/fancy_c.h"]
    assert ("/* aops_fancy__fancy_vec4__sizes: writes the element counts of the array arguments x, out, bias, n_dev "
            "(4 values, in this order), into\n * kg_sizes[aops_fancy__fancy_vec4__n_sizes]; returns 0, or the error "
            "code of an overflowing expression. */\nenum { aops_fancy__fancy_vec4__n_sizes = 4 };\n"
            "int32_t aops_fancy__fancy_vec4__sizes(uint32_t n, int64_t* kg_sizes);\n") in c_header, c_header
    assert "enum { aops_fancy__fancy_any__n_sizes = 4 };\nint32_t aops_fancy__fancy_any__sizes(" in c_header
    api = files["generated/hopper/include/aops/fancy.h"]
    for name in ("fancy_vec4", "fancy_plain", "fancy_any"):
        assert f"kernelgen::Sizes<4> sizes_{name}(uint32_t n);" in api, name
    launchers = files["generated/hopper/src/fancy.cu"]
    assert "kg_s.code = aops_fancy__fancy_any__sizes(n, kg_s.values.data());" in launchers


def test_the_crate_leaves_device_scalars_to_the_c_launcher(tmp_path: Path) -> None:
    """A null device scalar is the C launcher's E_DEVICE_SCALAR (as for one outside device memory):
    the crate's own null check covers the other pointers only, and its generated null-pointer test
    picks one of those."""
    files = _render(_project(tmp_path, *PACKAGES[0]))
    module = files["generated/hopper/rust/src/fancy.rs"]
    assert "x.is_null() || out.is_null()" in module
    assert "n_dev.is_null()" not in module and '"n_dev", ' not in module
    tests = files["generated/hopper/rust/tests/fancy.rs"]
    assert 'Some("n_dev")' not in tests
