"""A fallback-chain member (or an instance behind a dispatcher) that earlier members keep from ever
launching (a specific kernel listed after a general one) is reported when generating, naming them
and an argument set."""

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
        "demo.plain before it launches each one it would take (among them its first example, n=1024, on gb10)" \
        in text, text
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


# 'scale' instantiated for f32 and bf16 (each n % 4 == 0), 'plain' for the same types (any n), and a
# third kernel 'tail' taking f32 only (any n).
TYPED = GOOD.replace("x: {type: const f32*, size: n}", 'x: {type: "const {T}*", size: n}').replace(
    "out: f32*", 'out: "{T}*"').replace("    applies_if: [n % 4 == 0]\n",
                                        "    applies_if: [n % 4 == 0]\n    instantiate: {T: [f32, bf16]}\n"
                                        "    instance_name: scale_{T}\n    symbol: scale\n")
TYPED += TYPED[TYPED.index("  scale:\n"):].replace("  scale:\n", "  plain:\n", 1).replace(
    "    applies_if: [n % 4 == 0]\n", "").replace("scale_{T}", "plain_{T}").replace("{n: 1024}", "{n: 1000}")
TYPED += _SCALE.replace("  scale:\n", "  tail:\n    symbol: scale\n", 1).replace(
    "    applies_if: [n % 4 == 0]\n", "").replace("{n: 1024}", "{n: 1001}")


def test_a_chain_by_element_type_is_checked_per_type(tmp_path: Path) -> None:
    """Per element type, over the members that take it: 'tail' (f32) follows plain_f32, which
    launches every n; the bf16 members do not hide it, and nothing hides the bf16 ones."""
    root = project(tmp_path, "[scale, plain, tail]", TYPED)
    (text,) = unreachable_members(load_catalog(root))
    assert "fallbacks.scale_any: demo.tail is launched for none of the argument sets the chain's tests try " \
        "(x: f32, out: f32): demo.scale_f32 and demo.plain_f32 before it launch each one it would take " \
        "(among them its first example, n=1001, on gb10)" in text, text
    # the f32 member first: nothing is hidden
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    root = project(tmp_path / "b", "[scale, tail, plain]", TYPED)
    (text,) = unreachable_members(load_catalog(root))
    assert "demo.plain_f32 is launched for none" in text and "demo.scale_f32 and demo.tail before it" in text, text
    assert unreachable_members(load_catalog(project(tmp_path / "c", "[scale_f32, tail, scale_bf16, plain_bf16]",
                                                    TYPED))) == []


def test_a_dispatcher_whose_general_instance_comes_first_is_reported(tmp_path: Path) -> None:
    """An instantiated kernel whose axis puts the instance for any n before the one for
    n % 4 == 0: its dispatcher never launches the second (which stays callable by its name)."""
    spec = GOOD.replace("x: {type: const f32*, size: n}", 'x: {type: "const {T}*", size: n}').replace(
        "out: f32*", 'out: "{T}*"').replace("    applies_if: [n % 4 == 0]\n",
                                            "    applies_if: [n % VEC == 0]\n    instantiate: {T: [f32], VEC: [1, 4]}\n"
                                            "    instance_name: scale_v{VEC}\n    symbol: scale\n")
    (text,) = unreachable_members(load_catalog(write_project(tmp_path, spec)))
    assert "kernels.scale: the dispatcher demo.scale launches demo.scale_v4 for none of the argument sets its " \
        "tests try (T: f32): demo.scale_v1 before it launches each one it would take (among them its first " \
        "example, n=1024, on gb10); it stays callable by its own name" in text, text
    (tmp_path / "b").mkdir()
    assert unreachable_members(load_catalog(write_project(tmp_path / "b", spec.replace("[1, 4]", "[4, 1]")))) == []


def test_the_member_that_ends_the_chain_hides_nothing(tmp_path: Path) -> None:
    """An argument set that an earlier member refuses (a requires clause: an error, not a
    fall-through) never reaches the later member; that is not the later member hidden."""
    spec = TWO.replace("    applies_if: [n % 4 == 0]\n", "    applies_if: [n % 4 == 0]\n    requires: [n < 4096]\n")
    assert unreachable_members(load_catalog(project(tmp_path, "[scale, plain]", spec))) == []


def test_generate_prints_the_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = project(tmp_path, "[plain, scale]")
    assert cli.main(["--root", str(root), "generate"]) == 0
    err = capsys.readouterr().err
    assert "kernelgen: warning: specs/demo.yaml:" in err and "demo.scale is launched for none" in err, err


def test_this_repository_has_none() -> None:
    assert unreachable_members(load_catalog(Path(__file__).resolve().parents[2])) == []
