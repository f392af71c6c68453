"""Every C or C++ translation unit including a module's generated header (`<module>.h` or
`<module>_c.h`) references the module's C ABI digest symbol, which its launchers define: a program
compiled against headers of other specs than its library's fails to link, or to load, naming
`<c_prefix>_<module>__abi__<digest>`, instead of calling launchers whose parameters changed. The
headers still compile alone and together (two modules, two projects' modules of one name) as C99
and C++17 under -Wall -Wextra -Werror -pedantic. Here the library is a stand-in defining the
symbols; tests/compile/test_cpp_package.py links against a built one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.loader import load_catalog
from tests.conftest import REPO
from tests.unit.test_emit_rust import UPPER
from tests.unit.test_loader import GOOD, TARGETS

STRICT = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"]
CUDA = Path("/usr/local/cuda/include")


def _render(root: Path, package: str, specs: dict[str, str]) -> dict[str, str]:
    (root / "specs").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "kernels" / "demo.cu").write_text("// demo\n")
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "specs" / "project.yaml").write_text(f"package: {package}\n")
    for name, text in specs.items():
        (root / "specs" / f"{name}.yaml").write_text(text)
    return render_catalog(load_catalog(root))


def _defined(files: dict[str, str], module: str) -> str:
    """The digest symbol the module's launchers define."""
    (sym,) = re.findall(r'__attribute__\(\(visibility\("default"\)\)\) void (\w+__abi__[0-9a-f]{8})\(void\) \{\}',
                        files[f"generated/hopper/src/{module}.cu"])
    return sym


# Project alpha: a plain module and one with structs and instantiated kernels (a dtype-keyed
# chain); project beta: a module of the same name as alpha's first.
ALPHA = {"demo": GOOD, "gemmy": UPPER}
BETA = {"demo": GOOD.replace("kill_switch: DEMO_OFF", "kill_switch: BETA_DEMO_OFF")}
# alpha's demo after its kernel gained an argument.
CHANGED = GOOD.replace("      alpha: f32\n", "      alpha: f32\n      beta: f32\n")


def test_each_header_references_the_symbol_its_launchers_define(tmp_path: Path) -> None:
    files = _render(tmp_path / "alpha", "alpha", ALPHA)
    for module in ALPHA:
        sym = _defined(files, module)
        assert sym.startswith(f"alpha_{module}__abi__")
        cpp = files[f"generated/hopper/include/alpha/{module}.h"]
        c = files[f"generated/hopper/include/alpha/{module}_c.h"]
        # declared with C linkage, and held by a pointer the compiler keeps (GCC and Clang)
        assert f'extern "C" void {sym}();\n' in cpp
        assert (f"#if defined(__GNUC__)\nstatic void (*const kg_abi_cpp_{sym})() __attribute__((used)) = &{sym};\n"
                "#endif\n") in cpp
        assert f"void {sym}(void);\n" in c
        assert (f"#if defined(__GNUC__)\nstatic void (*const kg_abi_c_{sym})(void) __attribute__((used)) = &{sym};\n"
                "#endif\n") in c
    changed = _render(tmp_path / "changed", "alpha", {**ALPHA, "demo": CHANGED})
    assert _defined(changed, "demo") != _defined(files, "demo")
    assert _defined(changed, "demo") in changed["generated/hopper/include/alpha/demo_c.h"]
    assert _defined(changed, "gemmy") == _defined(files, "gemmy")


def _include(tmp_path: Path, *renders: dict[str, str]) -> Path:
    """An include folder holding the rendered API headers and kernelgen's runtime headers."""
    inc = tmp_path / "include"
    for files in renders:
        for path, text in files.items():
            if path.startswith("generated/hopper/include/"):
                dest = inc / path.removeprefix("generated/hopper/include/")
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_text(text)
    for name in ("abi.h", "runtime.h"):
        shutil.copy(REPO / "src" / "kernelgen" / "runtime" / "include" / "kernelgen" / name, inc / "kernelgen" / name)
    return inc


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _library(tmp_path: Path, name: str, symbols: list[str]) -> Path:
    """A stand-in target library defining the digest symbols, in a folder of its own."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "lib.c").write_text("".join(f"void {s}(void) {{}}\n" for s in symbols))
    res = _run(["gcc", "-shared", "-fPIC", str(folder / "lib.c"), "-o", str(folder / "libkgops.so")])
    assert res.returncode == 0, res.stderr
    return folder


C_PROGRAM = """\
#include "alpha/demo_c.h"
#include "alpha/gemmy_c.h"
#include "beta/demo_c.h"

int main(void) { return 0; }
"""

CPP_PROGRAM = """\
#include "alpha/demo.h"
#include "alpha/demo_c.h"
#include "alpha/gemmy.h"
#include "alpha/gemmy_c.h"
#include "beta/demo.h"
#include "beta/demo_c.h"

int main() { return 0; }
"""


@pytest.mark.parametrize("language", ["c", "c++"])
def test_a_program_links_and_loads_only_with_the_library_of_its_headers_specs(tmp_path: Path, language: str) -> None:
    compiler = "gcc" if language == "c" else "g++"
    if shutil.which(compiler) is None or (language == "c++" and not (CUDA / "cuda_runtime.h").is_file()):
        pytest.skip(f"needs {compiler}" + (" and the CUDA toolkit's headers" if language == "c++" else ""))
    alpha = _render(tmp_path / "alpha", "alpha", ALPHA)
    beta = _render(tmp_path / "beta", "beta", BETA)
    changed = _render(tmp_path / "changed", "alpha", {**ALPHA, "demo": CHANGED})
    built = [_defined(alpha, "demo"), _defined(alpha, "gemmy"), _defined(beta, "demo")]
    lib = _library(tmp_path, "built", built)

    def program(name: str, *renders: dict[str, str]) -> Path:
        """The program compiled against these headers, as an object file."""
        folder = tmp_path / name
        folder.mkdir()
        src = folder / ("main.c" if language == "c" else "main.cpp")
        src.write_text(C_PROGRAM if language == "c" else CPP_PROGRAM)
        std = "-std=c99" if language == "c" else "-std=c++17"
        res = _run([compiler, std, *STRICT, "-I", str(_include(folder, *renders)), "-isystem", str(CUDA),
                    "-c", str(src), "-o", str(folder / "main.o")])
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        return folder / "main.o"

    def link(obj: Path, library: Path | None) -> subprocess.CompletedProcess[str]:
        libs = [f"-L{library}", "-lkgops", f"-Wl,-rpath,{library}"] if library else []
        return _run([compiler, str(obj), *libs, "-o", str(obj.with_suffix(""))])

    # Headers of the library's specs: it links and runs.
    same = program("same", alpha, beta)
    res = link(same, lib)
    assert res.returncode == 0, res.stderr
    assert _run([str(same.with_suffix(""))]).returncode == 0
    # Without the library, each module's symbol is undefined: every header included references it.
    res = link(same, None)
    assert res.returncode != 0
    assert all(f"undefined reference to `{s}'" in res.stderr for s in built), res.stderr

    # Headers generated after alpha's demo kernel gained an argument, the library not rebuilt: the
    # link fails naming that module's new digest, and only it.
    new = _defined(changed, "demo")
    stale = program("stale", changed, beta)
    res = link(stale, lib)
    assert res.returncode != 0
    assert set(re.findall(r"undefined reference to `(\w+)'", res.stderr)) == {new}, res.stderr
    # Linked against a rebuilt library, then started against the earlier one: loading fails.
    rebuilt = _library(tmp_path, "rebuilt", [new, _defined(alpha, "gemmy"), _defined(beta, "demo")])
    res = link(stale, rebuilt)
    assert res.returncode == 0, res.stderr
    shutil.copy(lib / "libkgops.so", rebuilt / "libkgops.so")
    res = _run([str(stale.with_suffix(""))])
    assert res.returncode != 0
    assert f"undefined symbol: {new}" in res.stderr, res.stderr
