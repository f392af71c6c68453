"""benchmarks/report.py rewrites RESULTS.md whole from the JSON results: hand-written text lives in
benchmarks/notes/<json stem>.md and follows its section, and RESULTS.md is written without
matplotlib (only the charts need it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402


def attn_result(kv_len: int, window: int) -> dict:
    ms = {"chain": 0.02, "unsplit": 0.2, "split": 0.02, "torch_sdpa": 0.1}
    return {"kv_len": kv_len, "dtype": "bf16", "window": window, "ms": ms, "gb_s": {"chain": 1500.0},
            "fraction_of_copy": {"chain": 0.35}, "speedup_chain_vs_sdpa": 5.0,
            "chain_member": "attn_dflash.prefill_attn_dflash_bf16_split"}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    (tmp_path / "results").mkdir()
    (tmp_path / "notes").mkdir()
    monkeypatch.setattr(report, "HERE", tmp_path)
    monkeypatch.setattr(report, "RES", tmp_path / "results")
    monkeypatch.setattr(report, "NOTES", tmp_path / "notes")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    return tmp_path


def test_notes_follow_their_section(tree, capsys):
    (tree / "results" / "bench_attn_dflash.json").write_text(json.dumps(
        {"device": "GPU", "copy_gb_s": 4000.0, "results": [attn_result(8192, 0), attn_result(8192, 2048)]}))
    (tree / "notes" / "bench_attn_dflash.md").write_text("Written by hand: another machine's run.\n")
    (tree / "notes" / "bench_nothing.md").write_text("No section has this name.\n")
    report.main()
    text = (tree / "RESULTS.md").read_text()
    lines = text.splitlines()
    section = lines.index("## Drafter attention (16 query rows, hq 32, hkv 8, head_dim 128, paged, block 16)")
    note = lines.index("Written by hand: another machine's run.")
    assert section < note
    # the unmasked row, then the windowed table, then the note
    assert lines.index("| bf16 | 8192 | 20.0 (split) | 1500 | 35% | 200.0 | 100.0 | 5.00x |") < note
    assert any("sliding window of 2048 keys" in ln for ln in lines[section:note])
    assert sum(ln.startswith("| bf16 | 8192 |") for ln in lines) == 2
    assert "No section has this name." not in text
    out = capsys.readouterr().out
    assert "notes/bench_nothing.md names no section" in out
    assert "the charts need matplotlib" in out


def test_sections_without_results_are_left_out(tree):
    (tree / "notes" / "bench_attn_dflash.md").write_text("A note for a section with no results.\n")
    report.main()
    text = (tree / "RESULTS.md").read_text()
    assert text.startswith("# Benchmark results")
    assert "Drafter attention" not in text and "A note for a section" not in text
