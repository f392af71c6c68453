"""GPU test of host integers read from a struct argument's fields (`from`): the project of
tests/compile/test_struct_from_build.py (a parameter struct whose rows, cols and a nested count
give the grid, the array sizes and the clauses) built for the GPU's target, launched with torch
tensors: the launch covers the rows and columns the struct gives, the chain goes on to its
second member where the struct's cols make the first decline, a struct whose sizes exceed
the arrays is refused before the launch, and a kernel reading the fields in its expressions
(s.rows) launches alike."""

from __future__ import annotations

import pytest

from tests.compile.test_struct_from_build import SOURCE, SPEC
from tests.gpu import guards_build

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import kernelgen_ops  # noqa: E402

TARGET = guards_build.current_target_or_skip()


def populate(root):
    (root / "specs").mkdir()
    (root / "kernels").mkdir()
    (root / "specs" / "targets.yaml").write_text((guards_build.REPO / "specs" / "targets.yaml").read_text())
    (root / "specs" / "rp.yaml").write_text(SPEC)
    (root / "kernels" / "rp.cu").write_text(SOURCE)


@pytest.fixture(scope="module", name="m")
def built(tmp_path_factory):
    folder = guards_build.build(tmp_path_factory, TARGET, populate=populate, name="struct_from")
    return guards_build.load(folder, "rp")


def shape(rows, cols, count=1, eps=0.5):
    return {"rows": rows, "cols": cols, "span": {"first": 0, "count": count}, "eps": eps}


@pytest.mark.parametrize("rows,cols,kernel", [(3, 100, "row_scale"), (5, 4096, "row_scale"),
                                              (2, 5000, "row_scale_wide")])
def test_the_struct_gives_the_launch(m, rows, cols, kernel):
    # arrays larger than the struct's rows x cols: only those elements are written
    x = torch.arange(rows * cols + 64, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, -1.0)
    outcome = m.row_scale_any(shape(rows, cols), x, y)
    assert outcome.launched and outcome.kernel == kernel, outcome.reason
    torch.cuda.synchronize()
    n = rows * cols
    assert torch.equal(y[:n], x[:n] * 0.5)
    assert torch.equal(y[n:], torch.full_like(y[n:], -1.0))
    assert m.row_scale_any.plan(rows=rows, cols=cols, count=1)["kernel"] == kernel


def test_sizes_and_clauses_come_from_the_struct(m):
    x = torch.zeros(300, device="cuda", dtype=torch.float32)
    with pytest.raises(kernelgen_ops.ArgumentError, match="accesses 303"):
        m.row_scale(shape(3, 101), x, x.clone())
    with pytest.raises(kernelgen_ops.ArgumentError, match="requires count >= 0"):
        m.row_scale(shape(3, 100, count=-1), x, x.clone())
    outcome = m.row_scale(shape(0, 100), x, x.clone())
    assert not outcome.launched and "empty work" in outcome.reason


@pytest.mark.parametrize("rows,cols", [(3, 100), (7, 4096)])
def test_fields_read_in_expressions_give_the_launch(m, rows, cols):
    """row_scale_fields writes its grid, sizes and clauses with the struct's fields (s.rows,
    s.cols, s.span.count): the same launch as row_scale's."""
    x = torch.arange(rows * cols + 64, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, -1.0)
    outcome = m.row_scale_fields(shape(rows, cols, eps=0.25), x, y)
    assert outcome.launched, outcome.reason
    torch.cuda.synchronize()
    n = rows * cols
    assert torch.equal(y[:n], x[:n] * 0.25)
    assert torch.equal(y[n:], torch.full_like(y[n:], -1.0))
    assert m.row_scale_fields.plan(s_rows=rows, s_cols=cols, s_span_count=1)["grid"] == (rows, 1, 1)
    with pytest.raises(kernelgen_ops.ArgumentError, match=r"requires s\.span\.count >= 0"):
        m.row_scale_fields(shape(rows, cols, count=-1), x, y)
    declined = m.row_scale_fields(shape(rows, 5000), torch.zeros(rows * 5000, device="cuda"),
                                  torch.zeros(rows * 5000, device="cuda"))
    assert not declined.launched and "s.cols <= 4096 is false" in declined.reason
