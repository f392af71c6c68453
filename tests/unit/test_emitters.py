"""One emitter per output language: each template is rendered by exactly one emitter, and the
IR (kernelgen.lower) spells no output language."""

from __future__ import annotations

import re

from tests.conftest import REPO

SRC = REPO / "src" / "kernelgen"


def test_each_template_has_one_emitter() -> None:
    emitters = {p.name: p.read_text() for p in (SRC / "emit").glob("*.py")}
    for tpl in sorted((SRC / "templates").rglob("*.j2")):
        rel = tpl.relative_to(SRC / "templates").as_posix()
        short = rel.removeprefix("rust/")
        owners = [n for n, text in emitters.items() if f'"{rel}"' in text or (rel.startswith("rust/") and
                                                                               f'"rust/{short}"' in text)]
        assert len(owners) == 1, (rel, owners)


def test_the_ir_spells_no_output_language() -> None:
    text = (SRC / "lower.py").read_text()
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    for token in ("static_cast", "int64_t", "void*", "__nv_", "_a[", "kg_i64_", "pybind11", "u32::", "Outcome"):
        assert token not in re.sub(r'"""(.|\n)*?"""', "", code), token
