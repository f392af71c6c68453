"""`build.nvcc_flags`: a refused option is refused in every spelling nvcc takes (short or long, its
value after '=' or a space, glued where nvcc takes it so) and in the host compiler's spelling that
-Xcompiler forwards; options that compile nothing, make no object or pass others past the checks
are refused too."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.errors import SpecError
from kernelgen.loader import _REFUSED_FLAGS, _refused_flag, load_catalog
from tests.unit.test_loader import GOOD, write_project

DEPENDENCIES = "CMake tracks the dependencies"

# (option as a spec writes it, the reason it is refused)
REFUSED = [
    ("-M", DEPENDENCIES), ("--generate-dependencies", DEPENDENCIES),
    ("-MM", DEPENDENCIES), ("--generate-nonsystem-dependencies", DEPENDENCIES),
    ("-MD", DEPENDENCIES), ("--generate-dependencies-with-compile", DEPENDENCIES),
    ("-MMD", DEPENDENCIES), ("--generate-nonsystem-dependencies-with-compile", DEPENDENCIES),
    ("-MF=deps.d", DEPENDENCIES), ("-MF deps.d", DEPENDENCIES), ("--dependency-output=deps.d", DEPENDENCIES),
    ("--dependency-output deps.d", DEPENDENCIES),
    ("-MT=x.o", DEPENDENCIES), ("--dependency-target-name=x.o", DEPENDENCIES),
    ("--dependency-target-name x.o", DEPENDENCIES),
    ("-MP", DEPENDENCIES), ("--generate-dependency-targets", DEPENDENCIES),
    ("-dryrun", "a build compiles"), ("--dryrun", "a build compiles"),
    ("-V", "a build compiles"), ("--version", "a build compiles"),
    ("-h", "a build compiles"), ("--help", "a build compiles"),
    ("-arch-ls", "a build compiles"), ("--list-gpu-arch", "a build compiles"),
    ("-code-ls", "a build compiles"), ("--list-gpu-code", "a build compiles"),
    ("-clean", "a build compiles"), ("--clean-targets", "a build compiles"),
    ("-optix-ir", "a build makes objects"), ("--optix-ir", "a build makes objects"),
    ("-ltoir", "a build makes objects"), ("--ltoir", "a build makes objects"),
    ("-fdevice-syntax-only", "a build makes objects"),
    ("-e=scale", "every kernel of a module is compiled"), ("--entries scale", "every kernel of a module is compiled"),
    ("-optf=flags.txt", "bypass these checks"), ("-optf flags.txt", "bypass these checks"),
    ("--options-file=flags.txt", "bypass these checks"), ("--options-file flags.txt", "bypass these checks"),
    ("-forward-unknown-to-host-compiler", "go through -Xcompiler"),
    ("--forward-unknown-to-host-compiler", "go through -Xcompiler"),
    ("--forward-unknown-opts", "go through -Xcompiler"),
    ("-m32", "64-bit"), ("--machine=32", "64-bit"), ("--machine 32", "64-bit"), ("-m=32", "64-bit"),
    ("-m 32", "64-bit"),
    ("--std=c++20", "kernelgen compiles C++17"), ("-std c++20", "kernelgen compiles C++17"),
    ("--gpu-architecture=sm_80", "the target's arch sets it"), ("--generate-code arch=compute_80,code=sm_80",
                                                                 "the target's arch sets it"),
    ("--include-path=vendor", "include_dirs"), ("--define-macro X=1", "defines"), ("-lcublas", "does not link"),
    # host compiler options that -Xcompiler / --compiler-options forward
    ("-Xcompiler=-std=c++11", "kernelgen compiles C++17 (the host compiler's -std, forwarded by -Xcompiler)"),
    ("-Xcompiler -std=gnu++14", "kernelgen compiles C++17 (the host compiler's -std, forwarded by -Xcompiler)"),
    ("--compiler-options=-std=c++11", "forwarded by --compiler-options"),
    ("--compiler-options -std=c++11", "forwarded by --compiler-options"),
    ("-Xcompiler=-Wall,-std=c++11", "kernelgen compiles C++17"),
    ("-Xcompiler=-fvisibility=default", "hidden visibility"),
    ("-Xcompiler=-fvisibility-inlines-hidden", "hidden visibility"),
    ("-Xcompiler=-DX=1", "give the macro under defines (the host compiler's -DX"),
    ("-Xcompiler -UNDEBUG", "leave the macro out of defines"),
    ("-Xcompiler=-Ivendor", "include_dirs"), ("-Xcompiler=-isystem,vendor", "include_dirs"),
    ("-Xcompiler=-MD", DEPENDENCIES), ("-Xcompiler=-MF,deps.d", DEPENDENCIES),
    ("-Xcompiler -o,x.o", "CMake names the outputs"), ("-Xcompiler=-E", "a build compiles"),
    ("-Xcompiler=-m32", "64-bit"), ("-Xcompiler=-shared", "CMake links the target library"),
    ("-Xcompiler=-lm", "does not link"),
    # output and options files in every spelling, the host compiler's and the other tools'
    ("-Xcompiler=-o/tmp/x.o", "CMake names the outputs"), ("-Xcompiler -o/tmp/x.o", "CMake names the outputs"),
    ("-Xcompiler=--output=/tmp/x", "CMake names the outputs"), ("-Xcompiler=@/tmp/opts", "an options file"),
    ("-Xcompiler=-dumpdir,/tmp", "dump files"), ("-Xcompiler=-specs=/tmp/s", "specs file"),
    ("-Xcompiler=-wrapper,gdb", "subprocesses"), ("-Xcompiler=-B/tmp/bin", "programs"),
    ("-Xcompiler=-fplugin=/tmp/p.so", "plugins"),
    ("-Xptxas=-o,/tmp/x", "CMake names the outputs (-o, forwarded by -Xptxas)"),
    ("-Xptxas -o,/tmp/x", "forwarded by -Xptxas"),
    ("--ptxas-options=--output-file=/tmp/x", "forwarded by --ptxas-options"),
    ("-Xnvlink=@/tmp/opts", "an options file"), ("-Xlinker=-o,/tmp/x", "forwarded by -Xlinker"),
    ("--keep-dir=/tmp/k", "CMake names the outputs"),
]


@pytest.mark.parametrize(("flag", "why"), REFUSED, ids=[f for f, _ in REFUSED])
def test_refused_in_every_spelling(flag: str, why: str) -> None:
    reason = _refused_flag(flag)
    assert reason is not None and why in reason, reason


ACCEPTED = [
    "--use_fast_math", "-maxrregcount=64", "-Xptxas=-v", "-Xptxas -v", "-G", "-O0", "-lineinfo", "-m64", "--m64",
    "-m=64", "--machine=64", "--machine 64", "-Xcompiler=-Wall", "-Xcompiler -Wall,-Wextra", "-Xcompiler=-fPIC",
    "--compiler-options=-O2", "-Xcompiler=-Wno-unused-function,-fno-strict-aliasing", "-t 4", "--keep",
    "--diag-suppress=177", "-res-usage", "-Xcompiler=-save-temps", "-Xptxas=-v,-warn-spills", "-Xcompiler=-mavx2",
]


@pytest.mark.parametrize("flag", ACCEPTED)
def test_ordinary_options_are_accepted(flag: str) -> None:
    assert _refused_flag(flag) is None


def test_every_refused_long_form_has_its_short_form() -> None:
    """The long forms of `nvcc --help` beside each refused short option (the pairs nvcc lists)."""
    refused = {flag for flag, _ in _REFUSED_FLAGS}
    pairs = [("-M", "--generate-dependencies"), ("-MM", "--generate-nonsystem-dependencies"),
             ("-MD", "--generate-dependencies-with-compile"),
             ("-MMD", "--generate-nonsystem-dependencies-with-compile"), ("-MF", "--dependency-output"),
             ("-MT", "--dependency-target-name"), ("-MP", "--generate-dependency-targets"), ("-dryrun", "--dryrun"),
             ("-V", "--version"), ("-h", "--help"), ("-arch-ls", "--list-gpu-arch"), ("-code-ls", "--list-gpu-code"),
             ("-optix-ir", "--optix-ir"), ("-optf", "--options-file"), ("-ptx", "--ptx"), ("-E", "--preprocess")]
    assert [p for p in pairs if not set(p) <= refused] == []


def test_a_long_form_is_refused_at_its_file_and_line(tmp_path: Path) -> None:
    root = write_project(tmp_path, GOOD + "build:\n  nvcc_flags: [-O3, --dependency-output=x.d]\n")
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    assert str(info.value) == ("specs/demo.yaml:21: build.nvcc_flags[1]: option '--dependency-output=x.d' is refused: "
                               "CMake tracks the dependencies")
