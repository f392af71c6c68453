"""What the docs quote of kernelgen's messages and generated signatures is what kernelgen says and
generates: the build's explanation of a symbol missing its namespace (docs/adopting.md), the
refusal of a cooperative launch on a kernel with variants and the dispatcher's C++ plan
(docs/spec-format.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgen.build import _explain_failure
from kernelgen.emit import render_catalog
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog
from tests.unit.test_launch_modes import SPEC as COOPERATIVE
from tests.unit.test_launch_modes import project as launch_modes_project
from tests.unit.test_loader import write_project
from tests.unit.test_structs_setup_spec import _generated_check

REPO = Path(__file__).resolve().parents[2]


def _quotes(path: str) -> list[str]:
    """The `code` spans of a doc's prose (outside code blocks), each on one line."""
    prose = re.sub(r"^```.*?^```$", "", (REPO / path).read_text(), flags=re.S | re.M)
    return [" ".join(q.split()) for q in re.findall(r"`([^`]+)`", prose)]


def _section(path: str, title: str) -> str:
    text = (REPO / path).read_text()
    start = text.index(f"\n## {title}\n")
    return " ".join(text[start:text.index("\n## ", start + 1)].split())


@pytest.mark.parametrize(("symbol", "start"), [
    ("::softmax_kernel<float>", "symbol 'softmax_kernel<float>' is not declared"),  # the namespace left out
    ("::softmax_kernal<float>", "did you mean 'lib::softmax_kernel'?"),  # misspelled
])
def test_adopting_quotes_the_builds_explanation_of_an_undeclared_symbol(tmp_path: Path, symbol: str,
                                                                         start: str) -> None:
    (quote,) = [q for q in _quotes("docs/adopting.md") if q.startswith(start)]
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.cu").write_text(
        "namespace lib { template <class T> __global__ void softmax_kernel(const T* x, T* out, int n) {} }\n")
    cu = _generated_check(tmp_path, "attention", symbol, "softmax_f32", "specs/attention.yaml:8",
                          "const f32* x, f32* out, i32 n", '#include "kernels/attention.cu"\n')
    name = symbol.removeprefix("::").split("<")[0]
    text = _explain_failure([f'{cu}(2): error: the global scope has no "{name}"',
                             f"{cu}(2): error: type name is not allowed"], tmp_path)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("kernelgen: specs/")]
    for piece in quote.split("..."):
        assert piece.strip(" ;,") in line, (piece, line)


def test_launch_modes_section_names_every_refusal_of_a_cooperative_launch(tmp_path: Path) -> None:
    spec = COOPERATIVE.replace("    args:", "    variants: {arg: n, symbols: {1: coop, 2: coop}}\n    args:")
    with pytest.raises(SpecError, match="but the kernel has variants"):
        load_catalog(launch_modes_project(tmp_path, spec))
    section = _section("docs/spec-format.md", "Launch modes")
    assert "Not with a cluster, and not on a kernel with `variants`" in section, section


GEMV = """\
module: mv
summary: A dispatcher.
sources: [kernels/demo.cu]
kernels:
  gemv:
    summary: Matrix-vector product.
    symbol: gemv_kernel<{T}, {TILE}>
    instantiate:
      T: [bf16, fp8_e4m3]
      TILE: [128, 64]
    instance_name: gemv_{T}_t{TILE}
    args:
      w: {type: "const {T}*", size: rows * cols}
      x: const f32*
      y: f32*
      rows: u32
      cols: u32
    grid: [div_ceil(rows, TILE), 1, 1]
    block: [TILE, 1, 1]
    applies_if: [cols % TILE == 0]
    examples:
      - {rows: 128, cols: 128}
"""


def test_the_dispatchers_plan_is_declared_and_reports_the_instance_as_documented(tmp_path: Path) -> None:
    files = render_catalog(load_catalog(write_project(tmp_path, GEMV, "mv.yaml")))
    header = next(t for p, t in files.items() if p.startswith("generated/hopper/include/") and p.endswith("/mv.h"))
    doc = _section("docs/spec-format.md", "Instantiation: one kernel spec, several launchers")
    (signature,) = re.findall(r"`(kg_plan plan_gemv\([^`]*\))`", doc)
    assert signature + ";" in header, header
    # The instances in the matrix's order, as the docs number them, and the number of instances
    # where none takes the element types.
    order = re.findall(r"`(gemv_\w+)` (\d)", doc)
    assert [n for n, _ in order] == ["gemv_bf16_t128", "gemv_bf16_t64", "gemv_fp8_e4m3_t128", "gemv_fp8_e4m3_t64"]
    assert "receives the number of instances (4)" in doc
    cu = files["generated/hopper/src/mv.cu"]
    body = cu[cu.index("kg_plan plan_gemv("):]
    body = body[:body.index("\n}\n")]
    assert "if (kg_kernel != nullptr) *kg_kernel = 4;" in body
    for name, index in order:
        call = body.index(f"plan_{name}(rows, cols)")
        assert body[call:].split("\n")[1].strip() == f"if (kg_kernel != nullptr) *kg_kernel = {index};", body
