"""A built package used from a C++ program, as a C++ engine would: `find_package(<package> CONFIG
COMPONENTS <target>)` over the install folder gives the imported library <package>::<target> with
the C++ API headers (and a struct's header, with the project's headers it includes), and the
program compiles, links and runs against it without kernelgen: plans answer without a GPU, and a
launch without one reports an error rather than launching. Also the messages for a target that is
not built and one the project lacks, and a second project's library in the same program: each
library's plans read its own device table whatever the link order, two projects' C headers of one
module name are included together, as are their struct headers of one path (each API header gets
its own package's), each package's <c_prefix>_rt_* functions reach its own library, and a program
linking two targets of one project fails to configure. A program compiled against headers generated from changed specs fails to link against
the library built before, naming the module's C ABI digest symbol."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen import toolkit
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.build

TARGET = "hopper"

CMAKELISTS = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(bsettings CONFIG REQUIRED COMPONENTS @COMPONENTS@)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE bsettings::hopper)
"""

MAIN = """\
#include <cstdio>

#include "bsettings/half_ops.h"
#include "bsettings/plain.h"

int main() {
  const kg_plan a = bsettings::half_ops::plan_apply_affine(1000);
  const kg_plan s = bsettings::plain::plan_scale(0);
  std::printf("plan %lld %lld %d\\n", (long long)a.grid[0], (long long)a.block[0], s.code == 0 ? 0 : 1);
  affine p{};  // the struct's header came with the package
  p.n = 1000;
  const kernelgen::Outcome o = bsettings::half_ops::apply_affine(p, nullptr, nullptr, 1000);
  std::printf("launched %d error %d\\n", o.launched() ? 1 : 0, o.code < 0 ? 1 : 0);
  const kernelgen::Sizes<2> sz = bsettings::half_ops::sizes_apply_affine(1000);
  std::printf("sizes %d %lld %lld\\n", sz.code, (long long)sz.values[0], (long long)sz.values[1]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cpp_package") / "project"
    shutil.copytree(REPO / "tests" / "fixtures" / "build_settings", root)
    res = run_cli("build", "--target", TARGET, "--no-link", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root / "bindings"


def _configure(tmp_path: Path, prefix: Path | str, components: str, cmakelists: str = CMAKELISTS,
               sources: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "consumer"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(cmakelists.replace("@COMPONENTS@", components))
    for name, text in (sources or {"main.cpp": MAIN}).items():
        (src / name).write_text(text)
    cmake = shutil.which("cmake")
    assert cmake, "cmake"
    return subprocess.run(
        [cmake, "-S", str(src), "-B", str(src / "build"), f"-DCMAKE_PREFIX_PATH={prefix}",
         f"-DCUDAToolkit_ROOT={toolkit.find_toolkit().root}"],
        capture_output=True, text=True, timeout=300)


def _build_and_run(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    build = tmp_path / "consumer" / "build"
    res = subprocess.run([shutil.which("cmake") or "cmake", "--build", str(build)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return subprocess.run([str(build / "app")], capture_output=True, text=True, timeout=60,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})


def test_the_install_folder_holds_the_cpp_package(installed: Path) -> None:
    pkg = installed / "bsettings"
    assert (pkg / "bsettings-config.cmake").is_file()
    assert (pkg / TARGET / "package_target.cmake").is_file()
    headers = sorted(p.relative_to(pkg / TARGET / "include").as_posix()
                     for p in (pkg / TARGET / "include").rglob("*") if p.is_file())
    assert headers == [
        "bsettings/half_ops.h", "bsettings/half_ops_c.h", "bsettings/kg_headers/kernels/affine.cuh",
        "bsettings/kg_headers/kernels/affine_types.cuh", "bsettings/kg_headers/vendor/scale.cuh",
        "bsettings/plain.h", "bsettings/plain_c.h",
        "kernelgen/abi.h", "kernelgen/plan_codes.h", "kernelgen/runtime.h", "kernelgen/target_table.h",
        "kernelgen/types.h",
    ]
    # Under the package's own folder: affine.cuh's include of vendor/scale.cuh (found through the
    # project's include folders in the build) reaches the package's copy, relative to it.
    affine = (pkg / TARGET / "include" / "bsettings" / "kg_headers" / "kernels" / "affine.cuh").read_text()
    source = (installed.parent / "kernels" / "affine.cuh").read_text()
    assert affine == source.replace('#include "vendor/scale.cuh"', '#include "../vendor/scale.cuh"'), affine


def test_a_cpp_program_builds_links_and_runs_against_the_package(installed: Path, tmp_path: Path) -> None:
    res = _configure(tmp_path, installed, TARGET)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    res = _build_and_run(tmp_path)
    assert res.returncode == 0, res.stderr
    # apply_affine at n = 1000: 4 blocks of 256; plain's scale at n = 0 is not launched (skip_if); no GPU:
    # the launch is an error, not a launch.
    # sizes: x and out, 1000 elements each.
    assert res.stdout.splitlines() == ["plan 4 256 1", "launched 0 error 1", "sizes 0 1000 1000"], res.stdout


def _abi_reference(header: Path) -> str:
    """The C ABI digest symbol a module's header references."""
    (sym,) = re.findall(r"= &(\w+__abi__[0-9a-f]{8});", header.read_text())
    return sym


def test_a_program_compiled_against_headers_of_changed_specs_fails_to_link(installed: Path,
                                                                          tmp_path: Path) -> None:
    # The library exports the digest its installed headers reference (the program above links and runs).
    include = installed / "bsettings" / TARGET / "include" / "bsettings"
    built = _abi_reference(include / "plain_c.h")
    assert _abi_reference(include / "plain.h") == built
    nm = shutil.which("nm")
    if nm is not None:
        lib = next((installed / "bsettings" / TARGET).glob("libbsettings_hopper_*.so"))
        res = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert built in [line.split()[-1] for line in res.stdout.splitlines() if line.strip()]
    # plain's scale gains an argument; the headers are regenerated, the library is not rebuilt.
    changed = tmp_path / "changed"
    for folder in ("specs", "kernels", "vendor"):
        shutil.copytree(installed.parent / folder, changed / folder)
    for path, old, new in [("specs/plain.yaml", '      "n": u32\n', '      "n": u32\n      bias: f32\n'),
                           ("kernels/plain.cu", "uint32_t n) {", "uint32_t n, float bias) {")]:
        text = (changed / path).read_text()
        assert text.count(old) == 1, (path, old)
        (changed / path).write_text(text.replace(old, new))
    res = run_cli("generate", cwd=changed)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    prefix = tmp_path / "prefix"
    shutil.copytree(installed / "bsettings", prefix / "bsettings")
    for name in ("plain.h", "plain_c.h"):
        shutil.copy(changed / "generated" / TARGET / "include" / "bsettings" / name,
                    prefix / "bsettings" / TARGET / "include" / "bsettings" / name)
    stale = _abi_reference(prefix / "bsettings" / TARGET / "include" / "bsettings" / "plain.h")
    assert stale != built and stale.startswith("bsettings_plain__abi__")
    # MAIN calls plan_scale, whose signature did not change: only the digest symbol stops the link.
    res = _configure(tmp_path, prefix, TARGET)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    res = subprocess.run([shutil.which("cmake") or "cmake", "--build", str(tmp_path / "consumer" / "build")],
                         capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out[-3000:]
    assert f"undefined reference to `{stale}'" in out, out[-3000:]
    assert "half_ops__abi__" not in out, out[-3000:]


@pytest.mark.parametrize(("component", "message"), [
    ("gb10", "bsettings: target gb10 is not built in"),
    ("ampere", "bsettings: ampere is not a target of the project (its targets: gb10 hopper)"),
])
def test_a_component_that_is_not_there_says_why(installed: Path, tmp_path: Path, component: str,
                                                message: str) -> None:
    res = _configure(tmp_path, installed, component)
    assert res.returncode != 0
    assert message in " ".join((res.stdout + res.stderr).split()), res.stdout + res.stderr


# A second project, smops: target ada (an L40S's table: 142 SMs, where bsettings's hopper entry has no
# sm_count: 1 SM) and a module named plain too, whose kernel's grid is device.sm_count, with a kill
# switch, and a struct whose header has bsettings's path (kernels/affine.cuh, including a header of
# bsettings's path too, by its path from the project root) and a name of bsettings's, in a
# namespace and a layout of its own.
SECOND_SPEC = """\
module: plain
summary: A grid of one block per SM.
sources: [kernels/plain.cu]
kill_switch: SMOPS_NO_PLAIN
structs:
  affine:
    cpp: smops_k::affine
    fields: {a: i64, b: i64}
    header: kernels/affine.cuh
kernels:
  fill:
    symbol: fill_kernel
    summary: out = 1 over n floats, a grid-stride loop over one block per SM.
    args:
      out: {type: f32*, size: "n"}
      p: affine
      "n": u32
    grid: [device.sm_count, 1, 1]
    block: [256, 1, 1]
    skip_if: [n == 0]
    examples:
      - {n: 1000}
"""

SECOND_KERNEL = """\
#pragma once
#include <cstdint>

#include "affine.cuh"

__global__ void fill_kernel(float* out, smops_k::affine p, uint32_t n) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = 1.0f;
}
"""

SECOND_HEADERS = {
    "kernels/affine.cuh": '#pragma once\n#include <cstdint>\n\n#include "kernels/affine_types.cuh"\n\n'
                          "namespace smops_k {\nstruct affine {\n  int64_t a;\n  int64_t b;\n};\n"
                          "static_assert(kAffineFields == 2, \"smops's affine_types.cuh\");\n}  // namespace smops_k\n",
    "kernels/affine_types.cuh": "#pragma once\nnamespace smops_k {\nconstexpr int kAffineFields = 2;\n}\n",
}


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cpp_package_second") / "smops"
    res = run_cli("init", str(root), "--package", "smops", "--target", "ada", cwd=root.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    for example in ("specs/scale.yaml", "kernels/scale.cu", "tests/test_smops_scale.py"):
        (root / example).unlink()
    (root / "specs" / "plain.yaml").write_text(SECOND_SPEC)
    (root / "kernels" / "plain.cu").write_text(SECOND_KERNEL)
    for rel, text in SECOND_HEADERS.items():
        (root / rel).write_text(text)
    res = run_cli("build", "--target", "ada", "--no-link", "--no-torch-reader", cwd=root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return root / "bindings"


TWO_PROJECTS_CMAKELISTS = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES C CXX)
find_package(bsettings CONFIG REQUIRED COMPONENTS hopper)
find_package(smops CONFIG REQUIRED COMPONENTS ada)
add_executable(app main.cpp plans.c)
target_link_libraries(app PRIVATE bsettings::hopper smops::ada)
"""

TWO_PROJECTS_MAIN = """\
#include <cstdio>
#include <cstdlib>

#include "bsettings/half_ops.h"
#include "bsettings/plain.h"
#include "smops/plain.h"

// Both packages' kernels/affine.cuh (and the kernels/affine_types.cuh each includes): each API header
// got its own package's, whatever the include path order.
static_assert(sizeof(::affine) == 8, "bsettings's affine");
static_assert(sizeof(::smops_k::affine) == 16, "smops's affine");

extern "C" void c_grids(long long* bsettings_grid, long long* smops_grid);

int main() {
  const kg_plan a = bsettings::plain::plan_scale(1000);
  const kg_plan s = smops::plain::plan_fill(1000);
  std::printf("c++ %lld %lld\\n", (long long)a.grid[0], (long long)s.grid[0]);
  long long ca = 0, cs = 0;
  c_grids(&ca, &cs);
  std::printf("c %lld %lld\\n", ca, cs);
  std::printf("program %s %lld\\n", kg_rt_target(), (long long)kg_rt_target_table()->sm_count);
  std::printf("own %s %s\\n", bsettings_rt_target(), smops_rt_target());
  const kernelgen::Outcome o = smops::plain::fill(nullptr, ::smops_k::affine{}, 1000);
  std::printf("launched %d error %d\\n", o.launched() ? 1 : 0, o.code < 0 ? 1 : 0);
  // Each package's own runtime settings: bsettings's reach bsettings's library only.
  bsettings_rt_limit_sms(5);
  std::printf("limit bsettings %lld\\n", (long long)smops::plain::plan_fill(1000).grid[0]);
  smops_rt_limit_sms(10);
  std::printf("limit smops %lld\\n", (long long)smops::plain::plan_fill(1000).grid[0]);
  setenv("SMOPS_NO_PLAIN", "1", 1);
  bsettings_rt_refresh();
  std::printf("refresh bsettings %d\\n", smops::plain::plan_fill(1000).code == KG_LAUNCHED ? 0 : 1);
  smops_rt_refresh();
  std::printf("refresh smops %d\\n", KG_CATEGORY(smops::plain::plan_fill(1000).code) == KG_NL_KILLED ? 1 : 0);
  return 0;
}
"""

# Both projects' plain_c.h in one C translation unit: each declares its own project's functions.
TWO_PROJECTS_C = """\
#include "bsettings/plain_c.h"
#include "smops/plain_c.h"

void c_grids(long long* bsettings_grid, long long* smops_grid) {
  int32_t (*const plans[2])(uint32_t, kg_plan*) = {bsettings_plain__scale__plan, smops_plain__fill__plan};
  kg_plan p;
  plans[0](1000, &p);
  *bsettings_grid = (long long)p.grid[0];
  plans[1](1000, &p);
  *smops_grid = (long long)p.grid[0];
}
"""


def test_each_project_library_in_one_program_plans_with_its_own_table(installed: Path, second: Path,
                                                                      tmp_path: Path) -> None:
    # bsettings first on the link line: the dynamic linker finds its runtime's functions first, and
    # smops's plans must still read smops's own table.
    res = _configure(tmp_path, f"{installed};{second}", "", TWO_PROJECTS_CMAKELISTS,
                     {"main.cpp": TWO_PROJECTS_MAIN, "plans.c": TWO_PROJECTS_C})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    res = _build_and_run(tmp_path)
    assert res.returncode == 0, res.stderr
    # scale at n = 1000: 4 blocks of 256; smops's fill: a block per SM of ada's 142. The program's own
    # kg_rt_* calls reach the first library on its link line (bsettings's: target hopper, 1 SM), its
    # <c_prefix>_rt_* calls each package's own: limiting bsettings's SMs leaves smops's plans at 142, and
    # refreshing bsettings's kill switches leaves smops's as read before; no GPU: smops's launch is an error.
    assert res.stdout.splitlines() == [
        "c++ 4 142", "c 4 142", "program hopper 1", "own hopper ada", "launched 0 error 1",
        "limit bsettings 142", "limit smops 10", "refresh bsettings 0", "refresh smops 1"], res.stdout


def test_the_target_library_exports_no_runtime_internals(second: Path) -> None:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("needs nm (binutils)")
    lib = next((second / "smops" / "ada").glob("libsmops_ada_*.so"))
    res = subprocess.run([nm, "-D", "--defined-only", str(lib)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    symbols = [line.split()[-1] for line in res.stdout.splitlines() if line.strip()]
    assert "kg_rt_device_values" in symbols and "smops_plain__fill__plan" in symbols, symbols
    # the runtime's functions under the package's own names too
    assert {"smops_rt_refresh", "smops_rt_limit_sms", "smops_rt_use_target_table"} <= set(symbols), symbols
    assert [s for s in symbols if s.startswith("_ZN2kg")] == []


TWO_TARGETS_CMAKELISTS = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(bsettings CONFIG REQUIRED COMPONENTS hopper gb10)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE bsettings::hopper bsettings::gb10)
"""


def test_a_program_linking_two_targets_of_one_project_fails_to_configure(installed: Path, tmp_path: Path) -> None:
    # gb10 as its install would hold it: its CMake file and include folder (generation reads no library).
    prefix = tmp_path / "prefix"
    shutil.copytree(installed / "bsettings", prefix / "bsettings", ignore=shutil.ignore_patterns("*.so"))
    (prefix / "bsettings" / "gb10" / "include").mkdir(parents=True)
    shutil.copy(installed.parent / "generated" / "gb10" / "package_target.cmake", prefix / "bsettings" / "gb10")
    res = _configure(tmp_path, prefix, "", TWO_TARGETS_CMAKELISTS)
    assert res.returncode != 0
    text = " ".join((res.stdout + res.stderr).split())
    assert ('The INTERFACE_bsettings_ONE_TARGET_PER_PROGRAM property of "bsettings::gb10" does not agree with the '
            'value of bsettings_ONE_TARGET_PER_PROGRAM already determined for "app"') in text, text
