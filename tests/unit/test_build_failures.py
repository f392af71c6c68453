"""What a failed build shows (kernelgen.build._explain_failure on the build's output): each compiler
error with its own context lines (the source excerpt, nvcc's instantiation notes that lead from a
library's header back to the project's line), nvcc's error count, ptxas's own lines without the
failed command line, and the spec line that gives an option the compilers refuse. Also the build's
step count, the compiler launcher's check and the objects `kernelgen sass` reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelgen.build import (
    MAX_CONTEXT,
    MAX_ERRORS,
    BuildOptions,
    TargetResult,
    _explain_failure,
    check_launcher,
    configure_args,
)
from kernelgen.cli import build_parser
from kernelgen.errors import BuildError
from kernelgen.sass import module_objects

COMMAND = ("/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKERNELGEN_TARGET_CC=90 -O3 "
           "-Xcompiler=-fvisibility=hidden -c /p/generated/hopper/src/rowsum.cu -o rowsum.cu.o")


def _ninja(*output: str) -> list[str]:
    """A failed ninja step as the build reads it: progress, FAILED, the command, its output."""
    return ["[1/13] Building CUDA object kg_hopper/CMakeFiles/kernelgen_hopper_obj_rowsum.dir/src/rowsum.cu.o",
            "FAILED: [code=1] kg_hopper/CMakeFiles/kernelgen_hopper_obj_rowsum.dir/src/rowsum.cu.o ", COMMAND,
            *output, "ninja: build stopped: subcommand failed."]


def _spec(root: Path, build: str = "") -> Path:
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "specs" / "targets.yaml").write_text("hopper:\n  arch: sm_90a\n")
    (root / "specs" / "rowsum.yaml").write_text("module: rowsum\nsources: [kernels/rowsum.cu]\n" + build)
    return root


def test_a_template_error_in_a_library_header_leads_back_to_the_projects_line(tmp_path: Path) -> None:
    root = _spec(tmp_path)
    lines = _ninja(
        f"{root}/third_party/lib/reduce.h(4): error: class \"NoValue\" has no member \"value\"",
        "    return x.value();",
        "             ^",
        f"          detected during instantiation of \"float lib_value(T) [with T=NoValue]\" at line 12 of "
        f"{root}/kernels/rowsum.cu",
        "",
        f"{root}/kernels/rowsum.cu(20): error: identifier \"y\" is undefined",
        "    out[i] = y;",
        "             ^",
        "",
        f"2 errors detected in the compilation of \"{root}/generated/hopper/src/rowsum.cu\".")
    text = _explain_failure(lines, root)
    assert text.splitlines() == [ln for ln in lines[3:-1] if ln], text
    assert COMMAND not in text and "ninja" not in text


def test_long_contexts_and_many_errors_are_bounded_keeping_the_projects_lines(tmp_path: Path) -> None:
    root = _spec(tmp_path)
    chain = [f"            instantiation of \"f{i}\" at line {i} of /opt/cutlass/include/cute/x{i}.hpp"
             for i in range(MAX_CONTEXT + 5)]
    errors = [f"/opt/cutlass/include/cute/x.hpp({i}): error: no instance of f{i}" for i in range(MAX_ERRORS + 3)]
    lines = _ninja(errors[0], "          detected during:", *chain,
                   f"            instantiation of \"g\" at line 7 of {root}/kernels/rowsum.cu",
                   "", *errors[1:], "",
                   f"{len(errors)} errors detected in the compilation of \"{root}/generated/hopper/src/rowsum.cu\".")
    text = _explain_failure(lines, root).splitlines()
    assert text[0] == errors[0]
    assert f"            instantiation of \"g\" at line 7 of {root}/kernels/rowsum.cu" in text
    assert "    ... (6 more lines of this error; -v shows them)" in text, text
    assert errors[MAX_ERRORS - 1] in text and errors[MAX_ERRORS] not in text
    assert text[-2:] == ["... (3 more errors; -v shows them)",
                         f"11 errors detected in the compilation of \"{root}/generated/hopper/src/rowsum.cu\"."]


def test_ptxas_failures_show_ptxas_lines_and_name_the_missing_function(tmp_path: Path) -> None:
    root = _spec(tmp_path)
    text = _explain_failure(_ninja("ptxas fatal   : Unresolved extern function '_Z10missing_fnf'"), root)
    lines = text.splitlines()
    assert lines[0] == "ptxas fatal   : Unresolved extern function '_Z10missing_fnf'", text
    assert lines[1].startswith("kernelgen: the device function missing_fn (_Z10missing_fnf) is declared but not "
                               "defined in the module's translation unit")
    assert COMMAND not in text and "FAILED" not in text and "Building CUDA" not in text


@pytest.mark.parametrize("flags,output,option,tool,line", [
    ('build:\n  nvcc_flags: ["--no-such-flag"]\n',
     "gcc: error: unrecognized command-line option \u2018--no-such-flag\u2019; did you mean \u2018--no-mudflap\u2019?",
     "--no-such-flag", "gcc", 4),
    ("build:\n  nvcc_flags:\n    - -O3\n    - -Xptxas=--no-such-opt\n",
     "ptxas fatal   : Unknown option '-no-such-opt'", "-no-such-opt", "ptxas", 6),
])
def test_a_refused_option_is_traced_to_the_spec_that_gives_it(tmp_path: Path, flags: str, output: str, option: str,
                                                              tool: str, line: int) -> None:
    root = _spec(tmp_path, flags)
    text = _explain_failure(_ninja(output), root)
    assert text.splitlines()[0] == output
    assert (f"kernelgen: specs/rowsum.yaml:{line}: option '{option}' is one of the specs' build flags "
            f"(build.nvcc_flags, passed to nvcc for the modules it applies to), and {tool} refuses it") in text, text
    assert COMMAND not in text


def test_a_refused_option_no_spec_gives_is_said_to_come_from_elsewhere(tmp_path: Path) -> None:
    root = _spec(tmp_path, 'build:\n  nvcc_flags: ["--no-such-flags"]\n')
    text = _explain_failure(_ninja("gcc: error: unrecognized command-line option '--no-such-flag'"), root)
    assert "kernelgen: gcc refuses option '--no-such-flag', and no spec's build.nvcc_flags gives it" in text, text


def test_the_build_summary_says_what_it_counts() -> None:
    res = TargetResult("hopper", 1.0, ["Building CUDA object a.o", "Building CXX object b.o", "Linking CUDA shared "
                                       "library libx.so"], steps=5)
    assert res.summary() == "5 build steps: 2 compiled, 1 linked"
    assert TargetResult("hopper", 1.0).summary() == "up to date: no build step ran"


def _tools() -> SimpleNamespace:
    return SimpleNamespace(cuda=SimpleNamespace(nvcc="/cuda/bin/nvcc", root="/cuda"), cmake="cmake", ninja="ninja",
                           pybind11_dir="/pybind11", torch=None)


def test_the_compiler_launcher_is_checked_and_cleared_when_not_given(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="compiler launcher 'nosuchcache' is not on the PATH"):
        check_launcher("nosuchcache")
    with pytest.raises(BuildError, match="is not an executable file"):
        check_launcher(str(tmp_path / "bin" / "ccache"))
    script = tmp_path / "launch"
    script.write_text("#!/bin/sh\nexec \"$@\"\n")
    script.chmod(0o755)
    check_launcher(str(script))
    check_launcher(None)
    opts = BuildOptions(tmp_path, tmp_path / "build", tmp_path / "bindings")
    target = SimpleNamespace(name="hopper")
    args = configure_args(opts, target, _tools())
    assert "-DCMAKE_CUDA_COMPILER_LAUNCHER=" in args and "-DCMAKE_CXX_COMPILER_LAUNCHER=" in args
    opts.compiler_launcher = str(script)
    with_launcher = configure_args(opts, target, _tools())
    assert f"-DCMAKE_CUDA_COMPILER_LAUNCHER={script}" in with_launcher and with_launcher != args


def test_line_information_is_a_configure_setting(tmp_path: Path) -> None:
    """--no-lineinfo (BuildOptions.lineinfo) configures KERNELGEN_LINEINFO=OFF: a setting of the
    configure's arguments, so changing it configures the target again (the stamp compares them)."""
    opts = BuildOptions(tmp_path, tmp_path / "build", tmp_path / "bindings")
    target = SimpleNamespace(name="hopper")
    assert "-DKERNELGEN_LINEINFO=ON" in configure_args(opts, target, _tools())
    opts.lineinfo = False
    assert "-DKERNELGEN_LINEINFO=OFF" in configure_args(opts, target, _tools())
    args = build_parser().parse_args(["build", "--no-lineinfo"])
    assert args.no_lineinfo and not build_parser().parse_args(["cmake", "--out", "x"]).no_lineinfo


def test_sass_reads_the_objects_the_builds_compile_commands_name(tmp_path: Path) -> None:
    bdir = tmp_path / "build" / "hopper"
    stale = bdir / "kg_hopper" / "CMakeFiles" / "kernelgen_hopper_0a1b2c3d_rowsum.dir" / "src" / "rowsum.cu.o"
    live = bdir / "kg_hopper" / "CMakeFiles" / "kernelgen_hopper_obj_rowsum.dir" / "src" / "rowsum.cu.o"
    for obj in (stale, live):
        obj.parent.mkdir(parents=True)
        obj.write_bytes(b"")
    gen = tmp_path / "generated" / "hopper"
    (bdir / "compile_commands.json").write_text(json.dumps([
        {"directory": str(bdir), "file": str(gen / "src" / "rowsum.cu"),
         "output": os.path.relpath(live, bdir), "command": "nvcc ..."},
        {"directory": str(bdir), "file": str(gen / "python" / "rowsum.cpp"), "output": "x/python/rowsum.cpp.o",
         "command": "c++ ..."},
        {"directory": str(bdir), "file": str(tmp_path / "rt" / "src" / "runtime.cpp"), "output": "x/runtime.cpp.o",
         "command": "nvcc ..."},
    ]))
    assert module_objects(tmp_path / "build", "hopper") == {"rowsum": live}
    assert module_objects(tmp_path / "build", "gb10") == {}


def test_a_target_the_toolkit_cannot_build_stops_the_build_before_anything_is_configured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelgen import build, toolkit

    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n[ \"$1\" = --list-gpu-arch ] && printf 'compute_75\\ncompute_90\\ncompute_121\\n'\n")
    nvcc.chmod(0o755)
    tk = toolkit.Toolkit(nvcc, nvcc.parent.parent, "13.0", "PATH")
    monkeypatch.setattr(build.Tools, "find", staticmethod(lambda opts, echo=print: SimpleNamespace(cuda=tk)))
    built: list[str] = []
    monkeypatch.setattr(build, "_build_one", lambda opts, t, tools, echo: built.append(t.name) or t.name)
    opts = BuildOptions(tmp_path, tmp_path / "build", tmp_path / "bindings")
    hopper, gb10 = SimpleNamespace(name="hopper", arch="sm_90a"), SimpleNamespace(name="gb10", arch="sm_121a")
    volta = SimpleNamespace(name="volta", arch="sm_70")
    with pytest.raises(BuildError) as info:
        build.build_targets(opts, [hopper, volta], echo=lambda _: None)
    assert str(info.value) == (
        f"target 'volta' has arch sm_70, which nvcc 13.0 ({nvcc}, from PATH) cannot build; it builds sm_75, sm_90, "
        "sm_121 (nvcc --list-gpu-arch). To fix: build the other targets (-t), or use a CUDA toolkit that supports "
        "sm_70 (CUDA_HOME or CUDACXX)")
    assert built == []  # not even the target before it
    assert build.build_targets(opts, [hopper, gb10], echo=lambda _: None) == ["hopper", "gb10"]


def test_every_failed_step_is_explained_on_its_own(tmp_path: Path) -> None:
    """ninja goes on past a failed step (-k 0): a build where two modules do not compile explains
    each under the object it was making, kernelgen's own check of one included."""
    root = _spec(tmp_path)
    other = _ninja(f"{root}/kernels/other.cu(7): error: identifier \"z\" is undefined", "    out[i] = z;",
                   "             ^", "")
    other = [ln.replace("rowsum", "other") for ln in other]
    check = ('/p/generated/hopper/src/rowsum.cu(40): error: static assertion failed with "kernelgen: '
             'specs/rowsum.yaml:9: kernel \'rowsum\': argument \'n\' is u32 in the spec but int in the kernel"')
    lines = _ninja(check, "") [:-1] + other
    text = _explain_failure(lines, root)
    head, first, why1, second, *why2 = text.splitlines()
    assert head == "2 build steps failed:"
    assert first == "failed step 1 of 2: kg_hopper/CMakeFiles/kernelgen_hopper_obj_rowsum.dir/src/rowsum.cu.o", first
    assert why1.startswith("kernelgen: specs/rowsum.yaml:9: kernel 'rowsum': argument 'n' is u32"), why1
    assert second == "failed step 2 of 2: kg_hopper/CMakeFiles/kernelgen_hopper_obj_other.dir/src/other.cu.o", second
    assert any("kernels/other.cu(7): error: identifier \"z\" is undefined" in ln for ln in why2), why2
    assert not any("rowsum" in ln for ln in why2), why2


def test_many_failed_steps_are_counted(tmp_path: Path) -> None:
    from kernelgen.build import MAX_FAILED_STEPS

    root = _spec(tmp_path)
    lines = []
    for i in range(MAX_FAILED_STEPS + 2):
        lines += [ln.replace("rowsum", f"m{i}") for ln in _ninja(f"{root}/kernels/m{i}.cu(1): error: bad", "")[:-1]]
    text = _explain_failure(lines, root).splitlines()
    assert text[0] == f"{MAX_FAILED_STEPS + 2} build steps failed:"
    assert text[-1] == "... and 2 more failed steps (kernelgen build -v shows them)"

