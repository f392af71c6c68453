"""Errors in a project's own templates (its templates/ folder) are user errors naming the file and
line, with the CLI's exit status for user input; a file there that nothing reads is warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.emit.base import unused_templates


@pytest.fixture
def root(project: Path) -> Path:
    """A writable copy of tests/fixtures/project (tests/conftest.py), with an empty templates/ folder."""
    (project / "templates").mkdir()
    return project


def _generate(root: Path, capsys: pytest.CaptureFixture[str], templates: dict[str, str]) -> tuple[int, str]:
    for name, text in templates.items():
        path = root / "templates" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    code = main(["--root", str(root), "generate"])
    return code, capsys.readouterr().err


ERRORS = [
    ("syntax", {"launchers.cu.j2": "// header\n{{ project.package }\n"},
     "templates/launchers.cu.j2:2: unexpected '}'"),
    ("undefined name", {"launchers.cu.j2": "// header\n\n{{ nope }}\n"},
     "templates/launchers.cu.j2:3: 'nope' is undefined (the template's names: "),
    ("undefined attribute", {"api.h.j2": "{{ project.packag }}\n"},
     "templates/api.h.j2:1: 'kernelgen.names.Naming object' has no attribute 'packag'"),
    ("unknown filter", {"api.h.j2": "\n{{ project.package | nofilter }}\n"},
     "templates/api.h.j2:2: No filter named 'nofilter'."),
    ("missing include", {"launchers.cu.j2": '// header\n{% include "kernelgen/launcher.cu.j2" %}\n'},
     "templates/launchers.cu.j2:2: includes 'kernelgen/launcher.cu.j2', which is not found "
     "(did you mean 'kernelgen/launchers.cu.j2'?)"),
    ("missing base", {"launchers.cu.j2": '{% extends "base.j2" %}\n'},
     "templates/launchers.cu.j2:1: extends 'base.j2', which is not found (expected one of: kernelgen/"),
    ("error in an included helper", {"launchers.cu.j2": '// header\n{% include "helper.j2" %}\n',
                                     "helper.j2": "one\n{{ 1 // 0 }}\n"},
     "templates/helper.j2:2: ZeroDivisionError: integer division or modulo by zero (included from "
     "templates/launchers.cu.j2:2)"),
    ("syntax in an included helper", {"launchers.cu.j2": '{% include "helper.j2" %}\n',
                                      "helper.j2": "\n\n{% if %}\n"},
     "templates/helper.j2:3: Expected an expression, got 'end of statement block' (included from "
     "templates/launchers.cu.j2:1)"),
    ("including itself", {"launchers.cu.j2": '{% include "launchers.cu.j2" %}\n'},
     "templates/launchers.cu.j2:1: RecursionError: "),
]


@pytest.mark.parametrize("case,templates,want", ERRORS, ids=[c[0] for c in ERRORS])
def test_template_errors_name_the_file_and_line(root: Path, capsys: pytest.CaptureFixture[str], case: str,
                                                templates: dict[str, str], want: str) -> None:
    code, err = _generate(root, capsys, templates)
    assert code == 2, err
    assert err.startswith(f"kernelgen: error: {want}"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err


def test_a_template_that_is_not_text_is_named(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "templates" / "api.h.j2").write_bytes(b"// \xff\xfe\n")
    assert main(["--root", str(root), "generate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelgen: error: templates/api.h.j2: cannot be read as a UTF-8 text file: "), err


def test_an_override_that_works_is_not_an_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _generate(root, capsys, {"launchers.cu.j2": '// (c)\n{% include "kernelgen/launchers.cu.j2" %}\n',
                                         "helper.j2": "// helper\n", "api.h.j2": '{% include "helper.j2" %}\n'})
    assert code == 0 and err == "", err


def test_a_file_no_rendering_reads_is_warned_about(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "templates" / ".gitkeep").write_text("")
    (root / "templates" / "NOTES.md").write_text("notes\n")  # not a template: left alone
    (root / "templates" / "launcher.cu.j2").write_text("// misspelt\n")
    (root / "templates" / "rust").mkdir()
    (root / "templates" / "rust" / "lib.rs").write_text("// the .j2 left out\n")
    want = ["templates/launcher.cu.j2 is not used: it replaces none of kernelgen's templates and no template of "
            "templates/ includes it (did you mean 'launchers.cu.j2'?)",
            "templates/rust/lib.rs is not used: it replaces none of kernelgen's templates and no template of "
            "templates/ includes it (did you mean 'rust/lib.rs.j2'?)"]
    assert unused_templates(root / "templates") == want
    for command in (["generate"], ["list"]):
        assert main(["--root", str(root), *command]) == 0
        assert capsys.readouterr().err == "".join(f"kernelgen: warning: {w}\n" for w in want)
    # a helper that an override includes is used
    (root / "templates" / "launchers.cu.j2").write_text('{% include "launcher.cu.j2" %}\n')
    assert unused_templates(root / "templates") == want[1:]
    assert unused_templates(root / "absent") == []


def test_generate_output_counts_in_words(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "generate"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernelgen: 1 module, ") and " files: " in out, out
