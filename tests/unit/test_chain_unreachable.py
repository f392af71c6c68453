"""A fallback-chain member that an earlier member keeps from ever launching (a specific kernel
listed after a general one) is reported when generating, naming both and an argument set."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import cli
from kernelgen.loader import load_catalog
from kernelgen.lower import unreachable_members
from tests.unit.test_loader import GOOD, write_project

# Two kernels of one module: 'scale' (n % 4 == 0) and 'plain' (any n), GOOD's kernel twice.
_SCALE = GOOD[GOOD.index("  scale:\n"):]
TWO = GOOD + _SCALE.replace("  scale:\n", "  plain:\n    symbol: scale\n", 1).replace(
    "    applies_if: [n % 4 == 0]\n", "").replace("{n: 1024}", "{n: 1000}")


def project(tmp_path: Path, chain: str, spec: str = TWO) -> Path:
    return write_project(tmp_path, spec + f"fallbacks:\n  scale_any: {chain}\n")


def test_specific_after_general_is_reported(tmp_path: Path) -> None:
    (text,) = unreachable_members(load_catalog(project(tmp_path, "[plain, scale]")))
    assert text.startswith("specs/demo.yaml:"), text
    assert "fallbacks.scale_any: demo.scale is launched for none of the argument sets the chain's tests try: " \
        "demo.plain before it launches them (its first example, n=1024, on gb10 among them)" in text, text
    assert "list the more specific kernel first" in text


def test_specific_first_is_not_reported(tmp_path: Path) -> None:
    assert unreachable_members(load_catalog(project(tmp_path, "[scale, plain]"))) == []


def test_a_general_member_with_its_own_kill_switch_is_not_reported(tmp_path: Path) -> None:
    """The general kernel in another module with a kill switch: turning it off makes the chain
    reach the specific one, so the order may be intended."""
    root = project(tmp_path, "[other.plain, scale]", GOOD)
    other = TWO.replace("module: demo", "module: other").replace("DEMO_OFF", "OTHER_OFF")
    other = other[: other.index("  scale:\n")] + other[other.index("  plain:\n"):]
    (root / "specs" / "other.yaml").write_text(other)
    assert unreachable_members(load_catalog(root)) == []
    # the same without a kill switch: nothing turns 'plain' off
    (root / "specs" / "other.yaml").write_text(other.replace("kill_switch: OTHER_OFF\n", ""))
    (text,) = unreachable_members(load_catalog(root))
    assert "demo.scale is launched for none" in text and "other.plain before it" in text, text


def test_a_general_member_reading_device_values_is_not_reported(tmp_path: Path) -> None:
    """Its plan reads the device (planned here with the target's table): on another GPU it may
    decline, and the chain reach the next member."""
    head, plain = TWO.split("  plain:\n")
    spec = head + "  plain:\n" + plain.replace("grid: [div_ceil(n, THREADS), 1, 1]",
                                              "grid: [min(div_ceil(n, THREADS), device.sm_count * 8), 1, 1]")
    assert "device.sm_count" in spec
    assert unreachable_members(load_catalog(project(tmp_path, "[plain, scale]", spec))) == []


def test_generate_prints_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "[plain, scale]")
    assert cli.main(["--root", str(root), "generate"]) == 0
    err = capsys.readouterr().err
    assert "kernelgen: warning: specs/demo.yaml:" in err and "demo.scale is launched for none" in err, err


def test_this_repository_has_none() -> None:
    assert unreachable_members(load_catalog(Path(__file__).resolve().parents[2])) == []
