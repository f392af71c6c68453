"""A build that fails in a file rendered from one of the project's templates (templates/<name>.j2,
copied whole from an earlier kernelgen, say) says which template that is, and kernelgen's to
compare it with (kernelgen.build._explain_failure; kernelgen.emit.base.output_template)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.build import _explain_failure
from kernelgen.emit.base import ENV, OWN_TEMPLATES, output_template

COMMAND = "/usr/local/cuda/bin/nvcc -O3 -c /p/generated/hopper/src/axpy.cu -o axpy.cu.o"


def _ninja(*output: str) -> list[str]:
    return ["[1/9] Building CUDA object kg_hopper/CMakeFiles/upproj_hopper_obj_axpy.dir/src/axpy.cu.o",
            "FAILED: [code=1] kg_hopper/CMakeFiles/upproj_hopper_obj_axpy.dir/src/axpy.cu.o ", COMMAND,
            *output, "ninja: build stopped: subcommand failed."]


def _project(root: Path, *templates: str) -> Path:
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "targets.yaml").write_text("hopper:\n  arch: sm_90a\n")
    (root / "specs" / "project.yaml").write_text("package: upproj\n")
    (root / "specs" / "axpy.yaml").write_text("module: axpy\n")
    (root / "specs" / "axpy_c.yaml").write_text("module: axpy_c\n")
    (root / "templates").mkdir()
    for name in templates:
        (root / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "templates" / name).write_text("// copied from an earlier kernelgen\n")
    return root


def _note(generated: str, template: str) -> str:
    return (f"kernelgen: {generated} comes from templates/{template}, the project's own template: compare it with "
            f"kernelgen's ({OWN_TEMPLATES / template}); a template copied whole from another kernelgen version "
            "writes what that version's build expected (where its headers are, its names), and one that extends or "
            f"includes \"kernelgen/{template}\" stays in step with kernelgen's")


def test_a_missing_header_in_an_overridden_launcher_names_the_template(tmp_path: Path) -> None:
    root = _project(tmp_path, "launchers.cu.j2")
    lines = _ninja(f"{root}/generated/hopper/src/axpy.cu:10:10: fatal error: kernelgen/axpy.h: No such file or "
                   "directory", "   10 | #include \"kernelgen/axpy.h\"", "      |          ^~~~~~~~~~~~~~~~~~",
                   "compilation terminated.")
    text = _explain_failure(lines, root).splitlines()
    assert text[0].endswith("fatal error: kernelgen/axpy.h: No such file or directory"), text
    assert text[-1] == _note("generated/hopper/src/axpy.cu", "launchers.cu.j2")
    assert text.count(text[-1]) == 1


def test_an_override_that_includes_kernelgens_says_so(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "templates" / "launchers.cu.j2").write_text('#include "kernelgen/axpy.h"\n'
                                                         '{% include "kernelgen/launchers.cu.j2" %}\n')
    lines = _ninja(f"{root}/generated/hopper/src/axpy.cu:1:10: fatal error: kernelgen/axpy.h: No such file or "
                   "directory")
    assert _explain_failure(lines, root).splitlines()[-1] == (
        "kernelgen: generated/hopper/src/axpy.cu comes from templates/launchers.cu.j2, the project's own template: "
        f"compare it with kernelgen's ({OWN_TEMPLATES / 'launchers.cu.j2'}); it names \"kernelgen/launchers.cu.j2\": "
        "what it writes around kernelgen's is the project's own")


def test_nvccs_errors_in_an_overridden_header_name_its_template(tmp_path: Path) -> None:
    root = _project(tmp_path, "api.h.j2", "api_c.h.j2")
    lines = _ninja(f"{root}/generated/hopper/include/upproj/axpy_c.h(12): error: identifier \"kg_status\" is "
                   "undefined", f"{root}/generated/hopper/include/upproj/axpy_c.h(14): error: expected a \";\"",
                   f"{root}/generated/hopper/include/upproj/axpy.h(3): error: expected a \";\"",
                   f"3 errors detected in the compilation of \"{root}/generated/hopper/src/axpy.cu\".")
    text = _explain_failure(lines, root).splitlines()
    # the C header of module axpy, then the C++ one (module axpy_c has its own of each)
    assert text[-2:] == [_note("generated/hopper/include/upproj/axpy_c.h", "api_c.h.j2"),
                         _note("generated/hopper/include/upproj/axpy.h", "api.h.j2")], text


def test_no_note_without_an_override_or_outside_its_file(tmp_path: Path) -> None:
    root = _project(tmp_path, "binding.cpp.j2")
    lines = _ninja(f"{root}/generated/hopper/src/axpy.cu:10:10: fatal error: kernelgen/axpy.h: No such file",
                   f"{root}/kernels/axpy.cu(4): error: identifier \"y\" is undefined")
    assert "the project's own template" not in _explain_failure(lines, root)
    # kernelgen's own templates alone
    (root / "templates" / "binding.cpp.j2").unlink()
    (root / "templates").rmdir()
    assert "the project's own template" not in _explain_failure(lines, root)


def test_a_failed_configure_names_an_overridden_cmake_template(tmp_path: Path) -> None:
    root = _project(tmp_path, "CMakeLists.txt.j2")
    lines = ["-- The CXX compiler identification is GNU 13.2.0",
             "CMake Error at generated/hopper/CMakeLists.txt:12 (add_library):",
             "  Cannot find source file:", "", "    src/old_name.cu", "-- Configuring incomplete, errors occurred!"]
    assert _explain_failure(lines, project=root).splitlines()[-1] == _note("generated/hopper/CMakeLists.txt",
                                                                            "CMakeLists.txt.j2")


@pytest.mark.parametrize(("path", "template"), [
    ("src/axpy.cu", "launchers.cu.j2"),
    ("include/upproj/axpy.h", "api.h.j2"),
    ("include/upproj/axpy_c.h", "api_c.h.j2"),
    ("include/ns/inner/axpy_c.h", "api_c.h.j2"),
    ("python/axpy.cpp", "binding.cpp.j2"),
    ("python/axpy.pyi", "stub.pyi.j2"),
    ("tests/test_axpy_hopper_contract.py", "test_contract.py.j2"),
    ("tests/test_myops_axpy_hopper_contract.py", "test_contract.py.j2"),  # a project's own package
    ("rust/src/axpy.rs", "rust/module.rs.j2"),
    ("rust/tests/axpy.rs", "rust/contract.rs.j2"),
    ("CMakeLists.txt", "CMakeLists.txt.j2"),
    ("include/kernelgen/types.h", "types.h.j2"),
    ("python/_runtime.cpp", "runtime_module.cpp.j2"),
    ("kernels/axpy.cu", None),
    ("src/other/axpy.cu", None),
])
def test_output_template_is_the_inverse_of_the_outputs_table(path: str, template: str | None) -> None:
    assert output_template(path) == template
    assert template is None or template in ENV.list_templates()


def test_output_template_reads_the_modules_given() -> None:
    assert output_template("include/upproj/axpy_c.h", ["axpy_c"]) == "api.h.j2"
    assert output_template("include/upproj/axpy_c.h", ["axpy"]) == "api_c.h.j2"
    assert output_template("tests/test_a_b_c_contract.py", ["a_b"]) == "test_contract.py.j2"
    assert output_template("src/axpy.cu", ["other"]) is None


def test_every_generated_file_names_its_template(project: Path) -> None:
    """Each file generation writes in generated/<target>/ is one output_template reads back, and
    every template kernelgen renders there (the CMake package file aside) is named for one."""
    from kernelgen.emit import render_catalog
    from kernelgen.loader import load_catalog

    catalog = load_catalog(project)
    modules = [m.name for m in catalog.modules]
    files = [f.split("/", 2)[2] for f in render_catalog(catalog) if f.startswith("generated/")]
    named = {f: output_template(f, modules) for f in files}
    assert all(named.values()), [f for f, t in named.items() if t is None]
    assert set(named.values()) == set(ENV.list_templates()) - {"package_config.cmake.j2"}
