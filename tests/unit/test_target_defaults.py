"""A target's device-table defaults: the cluster limit follows the compute capability, and a target
without an SM count is planned with 1 SM, which `kernelgen plan` and `kernelgen list` say; and the
CLI's counts and articles read as English."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import wording
from kernelgen.cli import main
from kernelgen.loader import load_catalog, load_targets
from tests.unit.test_loader import GOOD, write_project

TARGETS = """\
ampere:
  arch: sm_80
  compute_capability: "8.0"
  max_shared_mem_per_block_optin: 166912
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_shared_mem_per_block_optin: 232448
  sm_count: 132
blackwell:
  arch: sm_100a
  compute_capability: "10.0"
  max_shared_mem_per_block_optin: 232448
  max_cluster_size: 4
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = write_project(tmp_path, GOOD)
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    return root


def test_cluster_limit_defaults_from_the_compute_capability(root: Path) -> None:
    t = {t.name: t for t in load_targets(root / "specs" / "targets.yaml", root)}
    assert t["ampere"].max_cluster_size == 1  # clusters need sm_90
    assert t["hopper"].max_cluster_size == 8
    assert t["blackwell"].max_cluster_size == 4  # as given
    assert t["ampere"].sm_count == 1 and t["ampere"].sm_label == "1 SM: no sm_count in specs/targets.yaml"
    assert t["hopper"].sm_label == "132 SMs"


def test_plan_and_list_say_where_the_sm_count_is_a_default(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(root), "plan", "demo.scale", "n=1024"]) == 0
    out = capsys.readouterr().out
    assert "  ampere (1 SM: no sm_count in specs/targets.yaml): launched" in out, out
    assert "  hopper (132 SMs): launched" in out, out
    assert main(["--root", str(root), "plan", "demo.scale", "n=1024,2048", "-t", "ampere"]) == 0
    assert "demo.scale on ampere (1 SM: no sm_count in specs/targets.yaml)" in capsys.readouterr().out
    assert main(["--root", str(root), "list"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "targets: ampere (sm_80, 1 SM: no sm_count in specs/targets.yaml), blackwell (sm_100a, 1 SM: no sm_count "
        "in specs/targets.yaml), hopper (sm_90a, 132 SMs)")


def test_plans_take_the_default_cluster_limit(root: Path) -> None:
    from kernelgen import plan

    catalog = load_catalog(root)
    table = plan.target_table(catalog.target("ampere"))
    assert table["max_cluster_size"] == 1


def test_reserved_names_take_the_right_article(tmp_path: Path) -> None:
    from kernelgen.errors import SpecError

    root = write_project(tmp_path, GOOD.replace("      alpha: f32", "      int: f32"))
    with pytest.raises(SpecError, match="cannot be used as an argument name"):
        load_catalog(root)


def test_wording() -> None:
    assert [wording.count(n, "module") for n in (0, 1, 2)] == ["0 modules", "1 module", "2 modules"]
    assert wording.count(1, "kernel function") == "1 kernel function"
    assert wording.count(3, "SM") == "3 SMs"
    assert [wording.plural_noun(w) for w in ("directory", "key", "nvcc flag", "axis", "match")] == \
        ["directories", "keys", "nvcc flags", "axes", "matches"]
    assert [wording.article(w) for w in ("argument name", "kernel name", "instance name", "")] == \
        ["an argument name", "a kernel name", "an instance name", "a "]
