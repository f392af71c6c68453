"""A project's templates/ folder: every file no rendering reads is warned about (other template
endings, editors' backups, a templates/kernelgen/ folder, which never shadows kernelgen's own),
and template errors say which generated file was being rendered, the attributes a misspelt one
was meant to be, and what a template including itself by kernelgen's name means."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.emit import render_catalog
from kernelgen.emit.base import ENV, unused_templates
from kernelgen.loader import load_catalog
from tests.unit.test_project_templates import _generate


@pytest.fixture
def root(project: Path) -> Path:
    """A writable copy of tests/fixtures/project, with an empty templates/ folder."""
    (project / "templates").mkdir()
    return project


@pytest.mark.parametrize("name", ["launchers.cu.jinja", "launchers.cu.jinja2", "launchers.cu.tmpl", "launchers.cu"])
def test_a_template_with_another_ending_is_warned_about_with_the_name_meant(root: Path, name: str) -> None:
    (root / "templates" / name).write_text("// mine\n")
    assert unused_templates(root / "templates") == [
        f"templates/{name} is not used: it replaces none of kernelgen's templates and no template of templates/ "
        "includes it (did you mean 'launchers.cu.j2'?)"]


@pytest.mark.parametrize("name", ["launchers.cu.j2.bak", "launchers.cu.j2~", "launchers.cu.j2.orig"])
def test_an_editors_backup_is_named_as_such(root: Path, name: str) -> None:
    (root / "templates" / name).write_text("// old\n")
    (root / "templates" / "launchers.cu.j2").write_text('{% include "kernelgen/launchers.cu.j2" %}\n')
    assert unused_templates(root / "templates") == [
        f"templates/{name} is not used: an editor's backup or leftover copy of templates/launchers.cu.j2; "
        "remove it, or rename it to the template it should be"]


def test_any_other_file_is_warned_about_and_notes_are_left_alone(root: Path) -> None:
    (root / "templates" / "README.md").write_text("what these overrides are for\n")
    (root / "templates" / "helper.py").write_text("x = 1\n")
    (root / "templates" / ".gitkeep").write_text("")
    warnings = unused_templates(root / "templates")
    assert len(warnings) == 1 and warnings[0].startswith("templates/helper.py is not used: "), warnings


def test_kernelgen_prefix_always_names_kernelgens_own(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A templates/kernelgen/ folder is never read for `kernelgen/<name>` (which would otherwise
    make an override that extends the original include itself), and is warned about."""
    code, err = _generate(root, capsys, {"kernelgen/launchers.cu.j2": "// shadow\n",
                                         "launchers.cu.j2": '// (c)\n{% include "kernelgen/launchers.cu.j2" %}\n'})
    assert code == 0, err
    assert err == ("kernelgen: warning: templates/kernelgen/launchers.cu.j2 is not used: 'kernelgen/<name>' always "
                   "names kernelgen's own templates, so no rendering reads templates/kernelgen/; to replace "
                   "kernelgen's launchers.cu.j2, move it to templates/launchers.cu.j2\n"), err
    text = (root / "generated" / "hopper" / "src" / "fixture_ops.cu").read_text()
    assert text.startswith("// (c)\n") and "// shadow" not in text and "fixture_ops__scale_f32(" in text


def test_a_template_including_itself_says_so(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _generate(root, capsys, {"launchers.cu.j2": '{% include "launchers.cu.j2" %}\n'})
    assert code == 2
    assert err.startswith(
        "kernelgen: error: templates/launchers.cu.j2:1: RecursionError: templates/launchers.cu.j2 includes itself "
        "without end ('launchers.cu.j2' names the project's own template, which replaces kernelgen's; kernelgen's "
        "own is 'kernelgen/launchers.cu.j2'), while rendering generated/"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_templates_naming_each_other_say_so(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _generate(root, capsys, {"api.h.j2": '{% include "a.j2" %}\n', "a.j2": '{% include "b.j2" %}\n',
                                         "b.j2": '{% include "a.j2" %}\n'})
    assert code == 2
    assert "RecursionError: templates/api.h.j2, templates/a.j2, templates/b.j2 name each other without end (" in err
    assert "kernelgen's own is 'kernelgen/api.h.j2'" in err and len(err.splitlines()) == 1, err


def test_an_error_names_the_file_being_rendered(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _generate(root, capsys, {"launchers.cu.j2": "{{ m.targt }}\n"})
    assert code == 2
    assert err.startswith("kernelgen: error: templates/launchers.cu.j2:1: 'kernelgen.emit.cpp.CppModule object' has "
                          "no attribute 'targt' (did you mean 'target'"), err
    # the first target of specs/targets.yaml renders first
    assert err.rstrip().endswith(", while rendering generated/gb10/src/fixture_ops.cu"), err


def test_an_attribute_without_a_close_one_lists_them(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _generate(root, capsys, {"api.h.j2": "{{ project.zzzzzz }}\n"})
    assert code == 2
    assert "has no attribute 'zzzzzz' (its attributes: " in err and "package" in err, err


def _targets_and_modules(root: Path) -> tuple[list[str], list[str]]:
    catalog = load_catalog(root)
    return [t.name for t in catalog.targets], [m.name for m in catalog.modules]


@pytest.mark.parametrize("template", sorted(n for n in ENV.list_templates() if n != "package_config.cmake.j2"))
def test_every_template_error_names_a_file_generate_writes(root: Path, capsys: pytest.CaptureFixture[str],
                                                           template: str) -> None:
    """The file named is one that `kernelgen generate` writes (kept in step with the emitters)."""
    files = render_catalog(load_catalog(root))
    code, err = _generate(root, capsys, {template: "{{ no_such_name }}\n"})
    assert code == 2, err
    found = re.search(r", while rendering (generated/.+)$", err.strip())
    assert found, err
    targets, _ = _targets_and_modules(root)
    named = found.group(1)
    candidates = [named.replace("<each target>", t) for t in targets] if "<each target>" in named else [named]
    assert any(c in files for c in candidates), (named, sorted(files)[:20])
