"""Spec content that generation would refuse for the files it names is refused when the specs are
loaded, so `kernelgen list` accepts exactly what `kernelgen generate` (and build) accept: a module
whose generated file another module, the target's own files or a runtime header also produce
(`types`, `runtime`, `lib`, ...; `probe` beside `probe_c`), and two contract test files of one
name. The names the loader checks (kernelgen.emit.module_paths, TARGET_PATHS) are those the
emitters write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen import names
from kernelgen.cli import main
from kernelgen.emit import RUNTIME_HEADERS, TARGET_PATHS, module_paths, render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.conftest import FIXTURE, REPO


@pytest.mark.parametrize("fixture", [FIXTURE, REPO / "tests" / "fixtures" / "build_settings"])
def test_the_checked_names_are_the_files_the_emitters_write(fixture: Path) -> None:
    catalog = load_catalog(fixture)
    files = render_catalog(catalog)
    for t in catalog.targets:
        rendered = {p.removeprefix(f"generated/{t.name}/") for p in files if p.startswith(f"generated/{t.name}/")}
        with names.using(catalog.naming):
            named = set(TARGET_PATHS) | {p for m in catalog.modules for p in module_paths(m.name, t.name)}
        assert rendered == named, (sorted(rendered - named), sorted(named - rendered))


def _project(tmp_path: Path, modules: list[str], capsys: pytest.CaptureFixture[str],
             targets: dict[str, str] | None = None, namespace: str | None = "kernelgen") -> Path:
    """An init'ed project (package pathops) whose example module is copied under each of
    ``modules``' names (its kill switch only in the first), with its targets renamed by
    ``targets``; its C++ namespace ``namespace`` (kernelgen's own by default, whose module headers
    sit beside kernelgen's in include/kernelgen/; None: the package's)."""
    root = tmp_path / "p"
    assert main(["init", str(root), "--package", "pathops", "--target", "hopper", "--target", "gb10"]) == 0
    capsys.readouterr()
    if namespace:
        with (root / "specs" / "project.yaml").open("a") as f:
            f.write(f"namespace: {namespace}\n")
    spec = (root / "specs" / "scale.yaml").read_text()
    (root / "specs" / "scale.yaml").unlink()
    for i, name in enumerate(modules):
        text = spec.replace("module: scale", f"module: {name}")
        if i:
            text = re.sub(r"^kill_switch:.*\n", "", text, flags=re.M)
        (root / "specs" / f"{name}.yaml").write_text(text)
    if targets:
        path = root / "specs" / "targets.yaml"
        text = path.read_text()
        for old, new in targets.items():
            text = re.sub(rf"^{old}:", f"{new}:", text, flags=re.M)
        path.write_text(text)
    return root


def _refused_everywhere(root: Path, capsys: pytest.CaptureFixture[str], message: str, spec: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_catalog(root)
    assert message in str(exc.value), str(exc.value)
    assert str(exc.value).startswith(f"{spec}:1: module: "), str(exc.value)
    for command in ("list", "generate"):
        assert main(["--root", str(root), command]) == 2, command
        err = capsys.readouterr().err
        assert message in err and f"{spec}:1:" in err, (command, err)
    assert not (root / "generated").exists()


@pytest.mark.parametrize(("name", "path", "other"), [
    ("types", "include/kernelgen/types.h", "the target's own files"),
    ("plan_codes", "include/kernelgen/plan_codes.h", "the target's own files"),
    ("target_table", "include/kernelgen/target_table.h", "the target's own files"),
    ("lib", "rust/src/lib.rs", "the target's own files"),
    *[(h.removeprefix("kernelgen/").removesuffix(".h"), f"include/{h}", "the runtime's header")
      for h in RUNTIME_HEADERS if h.endswith(".h")],
])
def test_a_module_named_like_a_file_of_the_target_is_refused_at_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, path: str, other: str) -> None:
    root = _project(tmp_path, [name], capsys)
    _refused_everywhere(root, capsys, f"module '{name}' generates {path}, which {other} also generates",
                        f"specs/{name}.yaml")


def test_two_modules_generating_one_file_are_refused_at_load(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, ["probe", "probe_c"], capsys)
    # probe's C header and probe_c's C++ header are both include/kernelgen/probe_c.h
    _refused_everywhere(root, capsys, "module 'probe_c' generates include/kernelgen/probe_c.h, which module "
                        "'probe' also generates", "specs/probe_c.yaml")


def test_two_contract_test_files_of_one_name_are_refused_at_load(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # module a_b on target c and module a on target b_c: both test_pathops_a_b_c_contract.py (package pathops)
    root = _project(tmp_path, ["a", "a_b"], capsys, targets={"hopper": "b_c", "gb10": "c"})
    _refused_everywhere(root, capsys, "both have the contract test file test_pathops_a_b_c_contract.py", "specs/a_b.yaml")


def test_a_namespace_of_its_own_keeps_module_headers_apart(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """With the package's namespace (pathops::), the modules' API headers are include/pathops/<m>.h:
    modules named like kernelgen's headers load, and two projects' modules of one name do not share a
    header."""
    root = _project(tmp_path, ["runtime", "types"], capsys, namespace=None)
    files = render_catalog(load_catalog(root))
    assert {"generated/hopper/include/pathops/runtime.h", "generated/hopper/include/pathops/types_c.h",
            "generated/hopper/include/kernelgen/types.h"} <= set(files)
    assert '#include "pathops/runtime.h"' in files["generated/hopper/src/runtime.cu"]


def test_names_that_only_look_alike_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, ["types_ops", "runtimes", "probe"], capsys)
    assert [m.name for m in load_catalog(root).modules] == ["probe", "runtimes", "types_ops"]
    assert main(["--root", str(root), "generate"]) == 0


def test_a_source_at_the_path_of_a_generated_header_is_refused_at_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The launchers include their sources from the include path, where the generated headers come
    first: a source at a generated header's path (pathops/scale.h in package pathops) would never be
    the one included."""
    root = _project(tmp_path, ["scale"], capsys, namespace=None)
    (root / "pathops").mkdir()
    (root / "pathops" / "scale.h").write_text((root / "kernels" / "scale.cu").read_text())
    spec = root / "specs" / "scale.yaml"
    spec.write_text(re.sub(r"^sources:.*$", "sources: [pathops/scale.h]", spec.read_text(), flags=re.M))
    with pytest.raises(SpecError) as exc:
        load_catalog(root)
    assert ("sources: source pathops/scale.h has the path of generated/gb10/include/pathops/scale.h (module "
            "'scale'), which comes first on the launchers' include path: they would include it instead of the "
            "source (move or rename the source)") in str(exc.value), str(exc.value)
