"""A kernel symbol nvcc cannot find or compile is explained once per cause: a symbol the sources
do not declare (a namespace left out) is not also said not to compile for the errors that follow
from it on the same line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.build import _explain_failure
from tests.unit.test_structs_setup_spec import _generated_check

SOURCE = "namespace lib { template <class T> __global__ void softmax_kernel(const T* x, T* out, int n) {} }\n"


def _explained(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("kernelgen: specs/")]


@pytest.mark.parametrize("undeclared", [
    'error: the global scope has no "softmax_kernel"',
    'error: identifier "softmax_kernel" is undefined',
])
@pytest.mark.parametrize("first", [True, False])
def test_an_undeclared_symbol_is_not_also_said_not_to_compile(tmp_path: Path, undeclared: str, first: bool) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.cu").write_text(SOURCE)
    cu = _generated_check(tmp_path, "attention", "::softmax_kernel<float>", "softmax_f32", "specs/attention.yaml:8",
                          "const f32* x, f32* out, i32 n", '#include "kernels/attention.cu"\n')
    follow = [f"{cu}(2): error: type name is not allowed", f"{cu}(2): error: expected an expression"]
    lines = [f"{cu}(2): {undeclared}", *follow] if first else [*follow, f"{cu}(2): {undeclared}"]
    text = _explain_failure(lines, tmp_path)
    (line,) = _explained(text)
    assert line.startswith("kernelgen: specs/attention.yaml:8: kernel 'softmax_f32': symbol 'softmax_kernel<float>' "
                           "is not declared by the module's sources; "), text
    assert line.endswith("(the sources declare __global__ lib::softmax_kernel: spell the symbol with its namespace, "
                         "or check the preprocessor branch that declares it is taken)"), text
    assert "does not compile" not in text.replace("type name is not allowed", ""), text


def test_another_symbols_errors_are_still_explained(tmp_path: Path) -> None:
    """Only the undeclared symbol's own line is explained by it: a second kernel's template
    arguments that do not compile keep their explanation."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "attention.cu").write_text(SOURCE)
    cu = _generated_check(
        tmp_path, "attention", "::softmax_kernel<float>", "softmax_f32", "specs/attention.yaml:8",
        "const f32* x, f32* out, i32 n",
        "constexpr auto kg_kernel_softmax_bad_0 = kg::pick<kg_signature_softmax_bad>(&::lib::softmax_kernel<Half>, 0);"
        "  // kernelgen: specs/attention.yaml:20: kernel 'softmax_bad': parameters (const f16* x, f16* out, i32 n)\n"
        '#include "kernels/attention.cu"\n')
    lines = [f'{cu}(2): error: the global scope has no "softmax_kernel"', f"{cu}(2): error: type name is not allowed",
             f'{cu}(3): error: identifier "Half" is undefined']
    text = _explain_failure(lines, tmp_path)
    first, second = _explained(text)
    assert "kernel 'softmax_f32'" in first and "is not declared by the module's sources" in first, text
    assert second.startswith("kernelgen: specs/attention.yaml:20: kernel 'softmax_bad': symbol "
                             "'lib::softmax_kernel<Half>' does not compile: identifier \"Half\" is undefined"), text
