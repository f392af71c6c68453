"""Build failures name what to fix: a kernel ``symbol`` that the sources do not declare is reported
by its spec's file:line and kernel, and a failed link (a function the sources of two modules
export with default visibility) shows the linker's own lines without ``-v``. Each test builds a
tiny two-module project for one target. (Functions of default visibility are the only ones two
modules can clash on: the rest of each module's symbols are local to it, see
tests/compile/test_structs_setup.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.build

TARGETS = """\
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
"""

SPEC = """\
module: {m}
summary: Fills out with ones.
sources: [kernels/{m}.cu]
kernels:
  {m}_fill:
    symbol: {symbol}
    summary: One thread an element.
    args:
      out: {{type: f32*, size: n}}
      n: u32
    grid: [div_ceil(n, 128), 1, 1]
    block: [128, 1, 1]
    skip_if: [n == 0]
    examples:
      - {{n: 1000}}
"""

SOURCE = """\
#pragma once
#include <cstdint>
{helper}
__global__ void {m}_kernel(float* out, uint32_t n) {{
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.0f;
}}
"""


def _project(root: Path, symbols: dict[str, str], helper: str = "") -> Path:
    (root / "specs").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    for m, symbol in symbols.items():
        (root / "specs" / f"{m}.yaml").write_text(SPEC.format(m=m, symbol=symbol))
        (root / "kernels" / f"{m}.cu").write_text(SOURCE.format(m=m, helper=helper))
    return root


def _build(root: Path):
    return run_cli("build", "--no-torch-reader", cwd=root)


def test_undeclared_symbol_fails_naming_spec_line_and_kernel(tmp_path: Path) -> None:
    # sources the spec loader reads whole: refused when the specs load, before anything compiles
    root = _project(tmp_path / "project", {"one": "one_kernel", "two": "two_kernel_typo"})
    res = _build(root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "nvcc" not in res.stdout + res.stderr
    assert ("kernelgen: error: specs/two.yaml:6: kernels.two_fill.symbol: 'two_kernel_typo' is not a __global__ "
            "function of kernels/two.cu or the project files it includes (did you mean 'two_kernel'? it is a "
            "__global__ function of the sources)") in res.stderr, res.stderr
    # an include named by a macro, which the loader does not follow: a warning at load, and the
    # build's own check of the compiled sources names the spec's line and kernel
    root = _project(tmp_path / "macro_include", {"one": "one_kernel", "two": "two_kernel_typo"},
                    helper="#define FILL_HEADER <cstddef>\n#include FILL_HEADER")
    res = _build(root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert ("kernelgen: specs/two.yaml:5: kernel 'two_fill': symbol 'two_kernel_typo' is not declared by the "
            "module's sources; make the spec's symbol name the kernel's __global__ function") in res.stderr, res.stderr
    assert "(did you mean 'two_kernel'? it is a __global__ function of the sources)" in res.stderr, res.stderr
    assert 'has no "two_kernel_typo"' in res.stderr or 'identifier "two_kernel_typo" is undefined' in res.stderr
    assert "one.yaml" not in res.stderr


def test_link_failure_shows_the_linkers_lines_without_verbose(tmp_path: Path) -> None:
    root = _project(tmp_path / "project", {"one": "one_kernel", "two": "two_kernel"},
                    helper='__attribute__((visibility("default"))) int helper_count() { return 1; }')
    res = _build(root)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "multiple definition of `helper_count()'" in res.stderr, res.stderr
    assert "first defined here" in res.stderr
    assert "collect2: error: ld returned 1 exit status" in res.stderr
    assert "mark such helpers static or inline, or leave their visibility hidden" in res.stderr
    assert "kernelgen: specs/one.yaml:3: module 'one': its sources are in this failed link" in res.stderr, res.stderr
    assert "kernelgen: specs/two.yaml:3: module 'two': its sources are in this failed link" in res.stderr
    # the failing command line itself is not repeated
    assert " -shared " not in res.stderr and " -o " not in res.stderr, res.stderr


LIBRARY = """\
#pragma once
template <class T>
__device__ float lib_value(T x) {
  return x.value();
}
"""


@pytest.mark.parametrize("case", ["library_template", "ptxas_extern", "host_option", "ptxas_option"])
def test_compiler_failures_show_their_context_and_causes(tmp_path: Path, case: str) -> None:
    """A template error in a library's header keeps nvcc's note that leads back to the module's
    source line, and the error count; ptxas's failures show ptxas's lines, not CMake's; an option the
    compilers refuse is traced to the spec line that gives it. No failed command line is shown."""
    root = _project(tmp_path / "project", {"one": "one_kernel"})
    spec, source = root / "specs" / "one.yaml", root / "kernels" / "one.cu"
    if case == "library_template":
        (root / "kernels" / "third_party").mkdir()
        (root / "kernels" / "third_party" / "lib.h").write_text(LIBRARY)
        source.write_text(source.read_text().replace("#include <cstdint>", '#include <cstdint>\n'
                                                     '#include "kernels/third_party/lib.h"\n'
                                                     "struct NoValue {};").replace("1.0f", "lib_value(NoValue{})"))
    elif case == "ptxas_extern":
        source.write_text(source.read_text().replace("#include <cstdint>", "#include <cstdint>\n"
                                                     "extern __device__ float missing_fn(float);")
                          .replace("1.0f", "missing_fn(1.0f)"))
    else:
        flag = "--no-such-flag" if case == "host_option" else "-Xptxas=--no-such-opt"
        spec.write_text(spec.read_text() + f'build:\n  nvcc_flags: ["{flag}"]\n')
    res = _build(root)
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr
    assert "Traceback" not in err and "nvcc -forward-unknown-to-host-compiler" not in err and "FAILED:" not in err, err
    if case == "library_template":
        assert 'third_party/lib.h(4): error: class "NoValue" has no member "value"' in err, err
        assert "    return x.value();" in err
        assert re.search(r'detected during instantiation of "float lib_value\(T\) \[with T=NoValue\]" at line 8 of '
                         r"\S*kernels/one\.cu", err), err
        assert re.search(r'^1 error detected in the compilation of "\S*generated/hopper/src/one\.cu"\.$', err, re.M)
    elif case == "ptxas_extern":
        assert "ptxas fatal   : Unresolved extern function '_Z10missing_fnf'" in err, err
        assert "kernelgen: the device function missing_fn (_Z10missing_fnf) is declared but not defined" in err
    else:
        option, tool = ("--no-such-flag", "gcc") if case == "host_option" else ("-no-such-opt", "ptxas")
        assert (f"kernelgen: specs/one.yaml:17: option '{option}' is one of the specs' build flags (build.nvcc_flags, "
                f"passed to nvcc for the modules it applies to), and {tool} refuses it") in err, err
