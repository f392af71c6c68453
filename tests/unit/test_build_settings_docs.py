"""What the docs say `build:` refuses follows the loader: every nvcc option it refuses is named
(by its short spelling; the long forms are the same options) in the field reference's text
(src/kernelgen/schema.py) and in docs/spec-format.md's prose, and the macro names it reserves
are described as it tests them (a prefix in any case)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelgen import schema
from kernelgen.errors import SpecError
from kernelgen.loader import _REFUSED_FLAGS, load_catalog

REPO = Path(__file__).resolve().parents[2]


def _description(name: str) -> str:
    return next(f.description for f in schema.BUILD.fields if f.name == name)


def _prose(field: str) -> str:
    """docs/spec-format.md's bullet on a `build:` field, joined into one line."""
    text = (REPO / "docs" / "spec-format.md").read_text()
    m = re.search(rf"^- `{field}` .*?(?=^- |^$)", text, re.M | re.S)
    assert m, field
    return " ".join(m.group(0).split())


def test_refused_long_options_are_forms_of_refused_short_ones() -> None:
    short = {why for flag, why in _REFUSED_FLAGS if not flag.startswith("--")}
    assert [flag for flag, why in _REFUSED_FLAGS if flag.startswith("--") and why not in short] == []


@pytest.mark.parametrize("where", ["field reference", "prose"])
def test_every_refused_nvcc_option_is_named(where: str) -> None:
    text = _description("nvcc_flags") if where == "field reference" else _prose("nvcc_flags")
    short = [flag for flag, _ in _REFUSED_FLAGS if not flag.startswith("--")]
    assert [flag for flag in short if f"`{flag}`" not in text] == []
    assert "long forms" in text


@pytest.mark.parametrize("where", ["field reference", "prose"])
def test_reserved_macro_prefixes_are_described_as_refused_in_any_case(where: str) -> None:
    text = _description("defines") if where == "field reference" else _prose("defines")
    assert "starting with `kg_`, `_kg` or `kernelgen` in any case" in text
    assert "KERNELGEN_`" not in text.replace("`KERNELGEN_X`", "")  # no narrower prefix than the loader's


@pytest.mark.parametrize(("name", "refused"), [("KG_X", True), ("_KGX", True), ("KERNELGEN_X", True),
                                               ("KernelGen", True), ("kg_x", True), ("KGX", False)])
def test_the_described_macro_names_are_the_refused_ones(tmp_path: Path, name: str, refused: bool) -> None:
    root = tmp_path / "proj"
    shutil.copytree(REPO / "tests" / "fixtures" / "build_settings", root,
                    ignore=shutil.ignore_patterns("generated", "build", "bindings"))
    spec = root / "specs" / "plain.yaml"
    spec.write_text(spec.read_text() + f"build: {{defines: {{{name}: 1}}}}\n")
    if refused:
        with pytest.raises(SpecError, match="kernelgen's reserved names"):
            load_catalog(root)
    else:
        load_catalog(root)
