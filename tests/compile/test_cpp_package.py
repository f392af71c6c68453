"""A built package used from a C++ program, as a C++ engine would: `find_package(<package> CONFIG
COMPONENTS <target>)` over the install folder gives the imported library <package>::<target> with
the C++ API headers (and a struct's header, with the project's headers it includes), and the
program compiles, links and runs against it without kernelgen: plans answer without a GPU, and a
launch without one reports an error rather than launching. Also the messages for a target that is
not built and one the project lacks."""

from __future__ import annotations

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


def _configure(tmp_path: Path, prefix: Path, components: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "consumer"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(CMAKELISTS.replace("@COMPONENTS@", components))
    (src / "main.cpp").write_text(MAIN)
    cmake = shutil.which("cmake")
    assert cmake, "cmake"
    return subprocess.run(
        [cmake, "-S", str(src), "-B", str(src / "build"), f"-DCMAKE_PREFIX_PATH={prefix}",
         f"-DCUDAToolkit_ROOT={toolkit.find_toolkit().root}"],
        capture_output=True, text=True, timeout=300)


def test_the_install_folder_holds_the_cpp_package(installed: Path) -> None:
    pkg = installed / "bsettings"
    assert (pkg / "bsettings-config.cmake").is_file()
    assert (pkg / TARGET / "package_target.cmake").is_file()
    headers = sorted(p.relative_to(pkg / TARGET / "include").as_posix()
                     for p in (pkg / TARGET / "include").rglob("*") if p.is_file())
    assert headers == [
        "bsettings/half_ops.h", "bsettings/half_ops_c.h", "bsettings/plain.h", "bsettings/plain_c.h",
        "kernelgen/abi.h", "kernelgen/plan_codes.h", "kernelgen/runtime.h", "kernelgen/target_table.h",
        "kernelgen/types.h", "kernels/affine.cuh", "kernels/affine_types.cuh", "vendor/scale.cuh",
    ]


def test_a_cpp_program_builds_links_and_runs_against_the_package(installed: Path, tmp_path: Path) -> None:
    res = _configure(tmp_path, installed, TARGET)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    build = tmp_path / "consumer" / "build"
    res = subprocess.run([shutil.which("cmake") or "cmake", "--build", str(build)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    res = subprocess.run([str(build / "app")], capture_output=True, text=True, timeout=60,
                         env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    # apply_affine at n = 1000: 4 blocks of 256; plain's scale at n = 0 is not launched (skip_if); no GPU:
    # the launch is an error, not a launch.
    assert res.stdout.splitlines() == ["plan 4 256 1", "launched 0 error 1"], res.stdout


@pytest.mark.parametrize(("component", "message"), [
    ("gb10", "bsettings: target gb10 is not built in"),
    ("ampere", "bsettings: ampere is not a target of the project (its targets: gb10 hopper)"),
])
def test_a_component_that_is_not_there_says_why(installed: Path, tmp_path: Path, component: str,
                                                message: str) -> None:
    res = _configure(tmp_path, installed, component)
    assert res.returncode != 0
    assert message in " ".join((res.stdout + res.stderr).split()), res.stdout + res.stderr
