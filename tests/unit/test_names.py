"""Generated symbol names are spelled once (kernelgen.names); templates place them."""

from __future__ import annotations

import re

from kernelgen import names
from tests.conftest import REPO

TEMPLATES = REPO / "src" / "kernelgen" / "templates"


def test_c_and_cpp_names() -> None:
    assert names.c_function("rms_norm", "rms_norm_bf16") == "kg_rms_norm__rms_norm_bf16"
    assert names.c_function("m", "k", "plan") == "kg_m__k__plan"
    assert names.cpp_launcher("m", "k") == "kernelgen::m::k"
    assert names.cpp_plan("m", "k") == "kernelgen::m::plan_k"


def test_templates_do_not_spell_the_naming_scheme() -> None:
    for path in TEMPLATES.rglob("*.j2"):
        text = path.read_text()
        assert not re.search(r"kg_\{\{", text), path.name
        assert "kernelgen::{{" not in text, path.name


def test_generated_c_header_uses_the_scheme() -> None:
    header = (REPO / "generated" / "hopper" / "include" / "kernelgen" / "rms_norm_c.h").read_text()
    for part in ("", "plan", "sizes", "info"):
        assert names.c_function("rms_norm", "rms_norm_bf16", part) + "(" in header
