"""``kernelgen init``: a new project, and ``kernelgen cmake``: what a project's wheel build includes.

A new project holds ``specs/project.yaml`` (its package name), ``specs/targets.yaml`` (each field
commented), one example kernel with its spec and a test (one unit: ``--keep-existing`` in a
repository having one of their files writes none of them), ``pyproject.toml`` and ``CMakeLists.txt``
(scikit-build-core builds the project's own wheel), ``.gitignore``, an empty ``templates/``
folder (overrides of kernelgen's templates) and a README with its two commands.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from kernelgen import project, writer, yamlio
from kernelgen.emit.cmake import package_config_version
from kernelgen.errors import KernelgenError
from kernelgen.loader import kill_switch_example, project_name_problem
from kernelgen.model import Catalog
from kernelgen.schema import MODULE_RE

# Targets `kernelgen init --target NAME` knows: arch, compute capability, opt-in shared memory per block.
# Known targets: arch, compute capability, and the device table of a reference GPU of each (plans
# without a GPU read device.* names from it): max dynamic shared memory a block may opt in to,
# SMs, threads / blocks / shared memory per SM, and the largest cluster (1: no clusters).
KNOWN_TARGETS = {
    "ampere": ("sm_80", "8.0", 166912, "A100", 108, 2048, 32, 167936, 1),
    "ada": ("sm_89", "8.9", 101376, "L40S", 142, 1536, 24, 102400, 1),
    "hopper": ("sm_90a", "9.0", 232448, "H100/H200 SXM", 132, 2048, 32, 233472, 8),
    "blackwell": ("sm_100a", "10.0", 232448, "B200", 148, 2048, 32, 233472, 8),
    "gb10": ("sm_121a", "12.1", 101376, "GB10", 48, 1536, 32, 102400, 8),
}
DEFAULT_TARGETS = ("gb10", "hopper")


def targets_yaml(names: list[str]) -> str:
    out = [
        "# GPU targets this project builds for: `kernelgen build` builds them all (or those named with",
        "# --target), and the package picks the build whose compute capability matches the GPU.",
        "# Add a target by adding an entry; its name is how you select it (KERNELGEN_TARGET=NAME,",
        "# `kernelgen build --target NAME`, `import <package>.NAME`).",
    ]
    for name in names:
        if name not in KNOWN_TARGETS:
            raise KernelgenError(f"unknown target '{name}' for kernelgen init (known: {', '.join(KNOWN_TARGETS)}); "
                                 "add other targets to specs/targets.yaml afterwards")
        arch, cc, smem, gpu, sms, threads, blocks, smem_sm, cluster = KNOWN_TARGETS[name]
        commented = [
            (f"arch: {arch}", "what nvcc compiles for (-arch)"),
            (f'compute_capability: "{cc}"', "the GPUs this build runs on (quoted MAJOR.MINOR)"),
            ("max_threads_per_block: 1024", "generation checks every kernel's block against these"),
            ("max_block_dims: [1024, 1024, 64]", ""),
            (f"max_shared_mem_per_block_optin: {smem}", "bytes of dynamic shared memory a block may opt in to"),
        ]
        column = max(len(entry) for entry, _ in commented) + 2
        out += [f"{name}:"] + [f"  {entry:{column}}# {note}" if note else f"  {entry}" for entry, note in commented]
        out += [
            f"  # Plans without a GPU of this target read device.* names from here ({gpu}'s values; on the",
            "  # GPU the device's own are used): set sm_count to the GPU you plan for.",
            f"  sm_count: {sms}",
            f"  max_threads_per_sm: {threads}",
            f"  max_blocks_per_sm: {blocks}",
            f"  max_shared_mem_per_sm: {smem_sm}",
            "  reserved_shared_mem_per_block: 1024",
            f"  max_cluster_size: {cluster}",
        ]
    return "\n".join(out) + "\n"


_PROJECT_YAML = """\
# The project's names. The package is what `import` sees (@PKG@.<target>.<module>); the C++
# namespace, the C ABI prefix and the library names derive from it (set `namespace`, `c_prefix`
# or `library` here to choose them separately).
package: @PKG@
# Include folders, macros and nvcc options for every module (a target's entry in targets.yaml and a
# module spec take a `build:` of their own):
# build:
#   include_dirs: [third_party/cutlass/include]
#   defines: {NDEBUG: true}
#   nvcc_flags: [--use_fast_math]
"""

_SPEC = """\
module: scale
summary: out = alpha * x over n floats.
sources: [kernels/scale.cu]
kill_switch: @KILL@
constants: {THREADS: 256}
kernels:
  scale_f32:
    symbol: scale_kernel              # the __global__ function in the sources
    summary: One thread per element.
    args:                             # the kernel's parameters, in order
      x: {type: const f32*, size: 'n'}
      out: {type: f32*, size: 'n'}
      'n': u32
      alpha: f32
    grid: ["div_ceil(n, THREADS)", 1, 1]
    block: [THREADS, 1, 1]
    skip_if: [n == 0]
    examples:
      - {'n': 1000}
"""

_KERNEL = """\
// out[i] = alpha * x[i] for i < n. #included into the generated launcher file: helpers must be
// static, inline or in a namespace.
#pragma once
#include <cstdint>

__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ out, uint32_t n, float alpha) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i];
}
"""

_TEST = """\
\"\"\"The project's own tests: plans need no GPU; the launch needs one (marked `gpu`: it skips without
one, and `pytest -m "not gpu"` leaves it out).

Where @PKG@ is not importable (not built yet, or not on this Python's path), every test here is
skipped with the reason and the command that fixes it (a failure where KERNELGEN_REQUIRE_BUILT is set).
\"\"\"

import importlib.util

import pytest

from kernelgen.testing import built_module, built_target, kill_switches_unset

TARGET = built_target("@PKG@", __file__)
scale = built_module(TARGET, "scale", package="@PKG@", test_file=__file__)


@pytest.fixture(autouse=True)
def _kill_switch_unset():
    # The tests expect the launcher on, whatever the environment sets: the module's kill switch
    # (scale.KILL_SWITCH) is unset for each test, then restored and re-read (@PKG@.refresh()).
    with kill_switches_unset("@PKG@", TARGET, ["scale"]):
        yield


def test_plan_without_gpu():
    plan = scale.scale_f32.plan(n=1000)
    assert plan["grid"] == (4, 1, 1) and plan["block"] == (256, 1, 1) and plan["launched"]
    assert "empty work" in scale.scale_f32.plan(n=0)["reason"]


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the launch test uses torch")
def test_scale_on_gpu():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from @PKG@ import scale as on_this_gpu

    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    assert on_this_gpu.scale_f32(x, out, 1000, 2.0)
    torch.testing.assert_close(out, 2.0 * x)
"""

_PYPROJECT = """\
# kernelgen is not on PyPI, so an index must not supply it (any package could take the name there):
# build the wheel without isolation, in an environment that has kernelgen and scikit-build-core,
#   pip wheel --no-build-isolation .
# or, with isolation, from a folder of wheels only (kernelgen's and its requirements'):
#   pip wheel -w DIR /path/to/kernelgen scikit-build-core && pip wheel . --no-index --find-links DIR
[build-system]
requires = ["scikit-build-core>=0.10", "pybind11>=2.12", "kernelgen"]
build-backend = "scikit_build_core.build"

[project]
name = "@DIST@"
version = "0.1.0"  # the wheel's, and the CMake package's: find_package(@PKG@ 0.1 CONFIG ...)
description = "CUDA kernels built with kernelgen"
requires-python = ">=3.10"
dependencies = []

[project.optional-dependencies]
# kernelgen from its source tree or a wheel of it (see above), not from an index
dev = ["kernelgen", "pytest>=7.4"]

[tool.scikit-build]
cmake.version = ">=3.24"
# The package comes from CMake's install step: the built targets and kernelgen's package shell.
wheel.packages = []
# The sources of the wheel: no build outputs.
sdist.exclude = ["build/", "bindings/"]

[tool.pytest.ini_options]
testpaths = ["tests", "generated"]
addopts = "-ra"
# `pytest -m "not gpu"` runs the tests that need no GPU.
markers = ["gpu: needs a CUDA GPU (skipped without one)"]
"""

_CMAKE = """\
# The project's wheel (pip wheel . / pip install .): `kernelgen cmake` generates the sources and
# builds the targets with kernelgen's own driver in build/ (after `kernelgen build`, nothing is
# recompiled), then writes the script included below, which installs the package. The wheel holds
# every target of specs/targets.yaml, or those named (README.md: build isolation):
#   pip wheel --no-build-isolation . -Ccmake.define.KERNELGEN_TARGETS="hopper;ampere"
# Day-to-day builds use `kernelgen build`, which does not read this file.
cmake_minimum_required(VERSION 3.24)
project(@PKG@ LANGUAGES NONE)
set(KERNELGEN_TARGETS "" CACHE STRING "targets to build into the wheel (default: all)")
# OFF: no source line information in the device code (nvcc -lineinfo records this machine's paths)
option(KERNELGEN_LINEINFO "Build device code with source line information" ON)
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)
set(kg_args)
foreach(kg_t IN LISTS KERNELGEN_TARGETS)
  list(APPEND kg_args --target ${kg_t})
endforeach()
if(NOT KERNELGEN_LINEINFO)
  list(APPEND kg_args --no-lineinfo)
endif()
execute_process(
  COMMAND ${Python_EXECUTABLE} -m kernelgen.cli --root ${CMAKE_CURRENT_SOURCE_DIR} cmake
          --out ${CMAKE_BINARY_DIR}/kernelgen/project.cmake ${kg_args}
  RESULT_VARIABLE kg_rc)
if(NOT kg_rc EQUAL 0)
  message(FATAL_ERROR "kernelgen could not prepare the build (see its message above)")
endif()
include(${CMAKE_BINARY_DIR}/kernelgen/project.cmake)
"""

_GITIGNORE = """\
__pycache__/
*.py[cod]
/build/
/bindings/
/dist/
/.pytest_cache/
*.so
/generated/*/rust/target/
/generated/*/rust/Cargo.lock
"""

_README = """\
# @PKG@

CUDA kernels described by YAML specs (`specs/`), built with kernelgen (`kernelgen --help` lists its
commands, `kernelgen schema` prints the specs' JSON Schema) into the Python package `@PKG@`.
kernelgen is not on PyPI: install it from its source tree (`pip install /path/to/kernelgen`) or
from a wheel of it (`pip wheel --no-deps -w DIR /path/to/kernelgen`, then
`pip install DIR/kernelgen-*.whl`: a pure-Python wheel, for any Python 3 and machine).

```sh
pip install /path/to/kernelgen pytest      # kernelgen, from its source tree; pytest for the tests
kernelgen build                            # generate, build every target, make `import @PKG@` work here
pytest                                     # the project's tests and the generated contract tests
pytest -m "not gpu"                        # only the tests that need no GPU
```

@USAGE@
- `specs/project.yaml`: the package name (and from it the C++ namespace `@PKG@::<module>`, the C
  ABI prefix `@PKG@_` and the libraries `lib@PKG@_<target>_*.so`), and under `build:` include
  folders, macros and nvcc options for every module (targets and modules take their own).
- `specs/targets.yaml`: the GPU targets; `specs/<module>.yaml`: one kernel module each
  (format: kernelgen's docs/spec-format.md); `kernels/`: the CUDA sources. For kernels you
  already have, `kernelgen draft kernels/<file>.cu --write` writes a first spec of their
  `__global__` functions (check the entries it marks `check`; the build checks every parameter).
- `templates/`: a template here named like one of kernelgen's (`launchers.cu.j2`, `binding.cpp.j2`,
  `api.h.j2`, ...) replaces it, and kernelgen's own stays reachable as `kernelgen/<name>`. A licence
  header on every generated launcher file is a `templates/launchers.cu.j2` of two lines:
  `// Copyright ...` and `{% include "kernelgen/launchers.cu.j2" %}`.
- A wheel for other machines: `pip wheel --no-build-isolation . -Ccmake.define.KERNELGEN_TARGETS=hopper`
  (after `kernelgen build` nothing is recompiled; neither kernelgen nor a CUDA toolkit is needed where
  the wheel is installed, only the NVIDIA driver). Without build isolation pip uses this environment's
  build backend, so install the `[build-system]` requirements of `pyproject.toml` first:
  `pip install scikit-build-core` (kernelgen brings pybind11). With build isolation, pip installs
  them itself in a temporary environment, and must take kernelgen from a wheel of it, never from an
  index (kernelgen is not on PyPI, and anyone could publish a package of that name there): put the
  wheels of kernelgen and of the requirements in a folder and leave the index out:
  `pip wheel -w DIR /path/to/kernelgen scikit-build-core`, then
  `pip wheel . --no-index --find-links DIR -Ccmake.define.KERNELGEN_TARGETS=hopper`. Isolated and
  non-isolated builds and `kernelgen build` share `build/` (each configures a target afresh where the
  one before used kernelgen from another place, which recompiles it).
- From C++ (CMake): `find_package(@PKG@ CONFIG REQUIRED COMPONENTS <target>)` with this project's
  `bindings/` (or the installed wheel's folder) on `CMAKE_PREFIX_PATH`, then
  `target_link_libraries(app PRIVATE @PKG@::<target>)`: the C++ API `@PKG@::<module>::<kernel>`.
  `find_package(@PKG@ 0.1 ...)` checks the version of `pyproject.toml`'s `[project]` (for a wheel, the
  wheel's version): the same major version, not older (CMake's SameMajorVersion); without a version
  there (`kernelgen build` reads only a static one), no version is installed and a version asked for
  fails. A program is relinked after a module is added or removed: the target library's file name
  changes with the set of modules.
- `tests/`: the project's own tests. `kernelgen.testing.built_module(target, module, package="@PKG@",
  test_file=__file__)` imports a built module, and `built_target("@PKG@", __file__)` names a built target;
  where there is none, they skip the test file with the reason and the command to run. Mark tests that
  launch kernels `@pytest.mark.gpu` (registered in `pyproject.toml`): `pytest -m "not gpu"` leaves them out.
- `kernelgen unlink` stops `kernelgen build` from making the package importable here.
"""


# What a project loses where ``init --keep-existing`` keeps a file of its own, and how to get it.
KEPT_HINTS = {
    "pyproject.toml": "pytest collects the generated contract tests when its [tool.pytest.ini_options] "
                      "testpaths include \"generated\", and knows the tests' `gpu` marker from its markers; a "
                      "wheel of the project needs kernelgen's [build-system] and [tool.scikit-build] (see "
                      "`kernelgen init` in an empty folder)",
    "CMakeLists.txt": "`kernelgen build` does not read it; a wheel of the project (pip wheel .) needs "
                      "kernelgen's CMakeLists.txt, and a CMake program uses the built package through "
                      "find_package (README.md of an empty `kernelgen init`)",
    "README.md": "kernelgen's notes for the project (building, wheels, C++, templates) are the README.md "
                 "that `kernelgen init` writes in an empty folder",
    "specs/targets.yaml": "the project's own target table is kept: `--target` did not change it",
    "specs/project.yaml": "the project's own names are kept: `--package` did not change them",
}


def _merge_gitignore(old: str, new: str) -> str | None:
    """``old`` with the entries of ``new`` it lacks appended, or None when it has them all."""
    have = {ln.strip() for ln in old.splitlines()}
    missing = [ln for ln in new.splitlines() if ln.strip() and not ln.startswith("#") and ln.strip() not in have]
    if not missing:
        return None
    sep = "" if old.endswith("\n") or not old else "\n"
    return old + sep + "# kernelgen's build outputs\n" + "\n".join(missing) + "\n"


# The README's usage, with the example kernel, and without it (a repository that had one of its files).
_USAGE = """\
```python
from @PKG@ import scale          # the build for this GPU (KERNELGEN_TARGET=NAME to choose)
scale.scale_f32(x, out, n, 2.0)  # torch tensors, __cuda_array_interface__, DLPack or int pointers
```
"""
_USAGE_OWN = """\
```python
from @PKG@ import <module>       # a module of specs/; the build for this GPU (KERNELGEN_TARGET=NAME to choose)
<module>.<kernel>(...)           # torch tensors, __cuda_array_interface__, DLPack or int pointers
```
"""


def example_files(package: str) -> tuple[str, str, str]:
    """The example kernel's files: its source, spec and test are one unit, written together or not
    at all. The test's name carries the package, as the generated contract tests' do, so that two
    projects' tests collect in one pytest run (pytest's default import mode needs unique basenames)."""
    return ("kernels/scale.cu", "specs/scale.yaml", f"tests/test_{package}_scale.py")


def _files(targets: list[str], package: str, example: bool = True) -> dict[str, str]:
    """A new project's files (path -> text, with @PKG@, @KILL@ and @DIST@ to fill in); without the
    example kernel's unless ``example``."""
    unit = example_files(package)
    source, spec, test = unit
    files = {
        "specs/project.yaml": _PROJECT_YAML,
        "specs/targets.yaml": targets_yaml(targets),
        spec: _SPEC,
        source: _KERNEL,
        test: _TEST,
        "pyproject.toml": _PYPROJECT,
        "CMakeLists.txt": _CMAKE,
        ".gitignore": _GITIGNORE,
        "README.md": _README.replace("@USAGE@", _USAGE if example else _USAGE_OWN),
        "templates/.gitkeep": "",
    }
    return {p: t for p, t in files.items() if example or p not in unit}


def example_kept(folder: Path, package: str) -> list[str]:
    """The example kernel's files that ``folder`` already has: where there is one, ``init
    --keep-existing`` writes none of the example's."""
    return [p for p in example_files(package) if (folder / p).exists() or (folder / p).is_symlink()]


def has_module_specs(folder: Path) -> bool:
    """Whether ``folder/specs`` holds a module spec (a ``.yaml`` besides project.yaml and targets.yaml)."""
    specs = folder / "specs"
    return specs.is_dir() and any(p.suffix == ".yaml" and p.name not in ("project.yaml", "targets.yaml")
                                  for p in specs.iterdir())


def init_files(package: str) -> list[str]:
    """The paths ``init`` writes for ``package``, relative to the project folder."""
    return list(_files(list(DEFAULT_TARGETS), package))


def check_package(package: str) -> None:
    """Refuses a package name that ``kernelgen init`` must not write: one the loader refuses in
    specs/project.yaml (:func:`kernelgen.loader.project_name_problem`), or kernelgen's own."""
    if not MODULE_RE.fullmatch(package):
        raise KernelgenError(f"'{package}' is not a valid package name: use lower-case letters, digits and '_', "
                             "starting with a letter")
    if package in ("kernelgen", "kernelgen_ops"):
        raise KernelgenError(f"'{package}' is kernelgen's own package; choose another name")
    problem = project_name_problem("package", package)
    if problem:
        message, hint = problem
        raise KernelgenError(f"--package {package}: {message} ({hint})")


def _yaml_string(text: str) -> str:
    """``text`` as a YAML scalar that reads back as that string: as it is, or quoted where YAML
    would read another value (null, a YAML 1.1 boolean such as yes or off)."""
    try:
        node = yamlio.load("specs/project.yaml", f"package: {text}\n".encode())
        if isinstance(node, yamlio.YMap) and [(k.value, getattr(v, "value", None)) for k, v in node.items] \
                == [("package", text)]:
            return text
    except KernelgenError:
        pass
    return json.dumps(text)


def init(folder: Path, package: str, targets: list[str], force: bool = False,
         keep_existing: bool = False) -> list[str]:
    """Write a new project's files into ``folder`` and return the paths written. Files that exist
    are an error, unless ``force`` (overwrite them) or ``keep_existing`` (leave them, appending
    kernelgen's entries to a ``.gitignore``; the paths returned are then those written or merged,
    the latter as ``.gitignore (entries appended)``)."""
    check_package(package)
    targets = list(dict.fromkeys(targets))  # a target named twice is one entry of specs/targets.yaml
    files = _files(targets, package)
    if force and keep_existing:
        raise KernelgenError("--force and --keep-existing contradict each other: choose one")
    existing = [p for p in files if (folder / p).exists() or (folder / p).is_symlink()]
    if keep_existing and any(p in existing for p in example_files(package)):
        # A file of the example's that is the project's own (its kernels/scale.cu, say): the
        # example's spec would name a kernel its sources lack, so none of the example is written.
        files = _files(targets, package, example=False)
    if existing and not (force or keep_existing):
        raise KernelgenError(f"{folder} already has {', '.join(existing)}; use --keep-existing to add kernelgen's "
                             "files beside them (yours are left as they are), or --force to overwrite them")
    written = []
    for rel, text in files.items():
        text = (text.replace("package: @PKG@\n", f"package: {_yaml_string(package)}\n").replace("@PKG@", package)
                .replace("@KILL@", kill_switch_example(package, "scale")).replace("@DIST@", package.replace("_", "-")))
        p = folder / rel
        if keep_existing and rel in existing:
            if rel == ".gitignore" and p.is_file():
                merged = _merge_gitignore(p.read_text(encoding="utf-8", errors="replace"), text)
                if merged is not None:
                    writer.write_text(p, merged)
                    written.append(".gitignore (entries appended)")
            continue
        writer.write_text(p, text)
        written.append(rel)
    return written


def _cm(path: Path | str) -> str:
    return '"' + str(path).replace("\\", "/").replace('"', '\\"') + '"'


def cmake_script(catalog: Catalog, staging: Path, targets: Sequence[str] | None = None) -> str:
    """The CMake script a project's CMakeLists.txt includes for its wheel: of the package that
    ``kernelgen cmake`` built and staged, the folders of ``targets`` (default: every target of the
    catalog staged) and the package shell, with the CMake package's version file of the wheel's
    version (scikit-build-core's ``SKBUILD_PROJECT_VERSION``: pyproject.toml's version, static or
    dynamic), when there is one. Nothing else of the staging folder goes into the wheel: a staging
    folder kept between builds (a persistent build-dir) holds what earlier builds staged."""
    package = catalog.naming.package
    folder = staging / package
    if targets is None:
        targets = [t.name for t in catalog.targets if (folder / t.name).is_dir()]
    shell = project.shell_files(catalog, None, folder)
    project.write_shell(folder, shell)
    version_in = staging.parent / f"{package}-config-version.cmake.in"
    writer.write_text(version_in, package_config_version(catalog, "@KERNELGEN_PACKAGE_VERSION@"))
    version_out = f"${{CMAKE_CURRENT_BINARY_DIR}}/kernelgen/{package}-config-version.cmake"
    # without a trailing "/": the folder itself, under the package's
    lines = ["# Written by `kernelgen cmake` for the project's wheel build; do not edit."]
    lines += [f"install(DIRECTORY {_cm(folder / t)} DESTINATION {package} USE_SOURCE_PERMISSIONS "
              'PATTERN "__pycache__" EXCLUDE)' for t in targets]
    lines += ["install(FILES", *(f"        {_cm(folder / name)}" for name in sorted(shell)),
              f"        DESTINATION {package})"]
    return "\n".join([
        *lines,
        "# find_package(<package> <version>): the wheel's version (without one, no version file)",
        "if(DEFINED SKBUILD_PROJECT_VERSION AND NOT SKBUILD_PROJECT_VERSION STREQUAL \"\")",
        "  set(KERNELGEN_PACKAGE_VERSION \"${SKBUILD_PROJECT_VERSION}\")",
        f"  configure_file({_cm(version_in)} \"{version_out}\" @ONLY)",
        f"  install(FILES \"{version_out}\" DESTINATION {package})",
        "endif()",
        "",
    ])


def prune_staging(staging: Path, package: str, targets: Sequence[str]) -> list[str]:
    """Removes from a wheel's staging folder what earlier ``kernelgen cmake`` runs staged and this
    one does not: the folders of targets not asked for now, and packages of another name (the
    package's earlier names); only kernelgen's (a target's ``package_target.cmake``, a package's
    generated ``_project.py``). Returns the folders removed."""
    removed: list[str] = []
    if not staging.is_dir():
        return removed
    for sub in sorted(p for p in staging.iterdir() if p.is_dir() and not p.is_symlink()):
        if sub.name == package:
            for t in sorted(p for p in sub.iterdir() if p.is_dir() and not p.is_symlink()):
                if t.name not in targets and project.is_target_folder(t):
                    shutil.rmtree(t)
                    removed.append(str(t))
        elif project.is_package_folder(sub):
            shutil.rmtree(sub)
            removed.append(str(sub))
    return removed
