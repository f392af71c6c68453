"""docs/spec-format.md's table of limits states the values the code enforces."""

from __future__ import annotations

import re
from pathlib import Path

from kernelgen import expr, loader, schema, yamlio

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec-format.md"


def _bound(pattern: re.Pattern[str]) -> int:
    m = re.search(r"\{0,(\d+)\}$", pattern.pattern)
    assert m is not None, pattern.pattern
    return int(m.group(1)) + 1


LIMITS = {
    "Spec file size": yamlio.MAX_SPEC_BYTES,
    "Text": schema.MAX_TEXT,
    "List items": schema.MAX_LIST,
    "Examples per kernel": schema.MAX_EXAMPLES,
    "Instantiations per kernel": loader.MAX_INSTANCES,
    "Arguments per launcher": loader.MAX_LAUNCHER_ARGS,
    "Struct argument bytes per launcher": loader.MAX_LAUNCHER_STRUCT_BYTES,
    "Struct size": loader.MAX_STRUCT_BYTES,
    "Struct fields": loader.MAX_FIELDS,
    "Kernel parameter space": loader.MAX_PARAM_BYTES,
    "Chain members": schema.MAX_CHAIN,
    "Kernels a chain tries": loader.MAX_CHAIN_LAUNCHES,
    "Name length": _bound(schema.IDENTIFIER_RE),
    "Module name length": _bound(schema.MODULE_RE),
    "Expression length": expr.MAX_EXPR_LEN,
    "Expression nesting": expr.MAX_DEPTH,
    "`let` nesting, written out": expr.MAX_WRITTEN_DEPTH,
    "`let` size, written out": expr.MAX_WRITTEN_NODES,
}


def _table() -> dict[str, int]:
    text = DOC.read_text()
    section = text[text.index("\n## Limits\n"):text.index("\n## Field reference\n")]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): int(cells[1].strip()) for cells in rows[1:]}


def test_the_table_of_limits_states_the_codes_values() -> None:
    assert _table() == LIMITS
