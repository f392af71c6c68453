"""scripts/ncu_mix.py: Nsight Compute's per-instruction table read past its preamble, opcodes
grouped by family (predicates and suffixes dropped), counts per unit of work, stall samples by
reason, the most stalled instructions, and clear errors for a file without the table."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ncu_mix", ROOT / "scripts" / "ncu_mix.py")
ncu_mix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_mix)

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_barrier","stall_wait","stall_selected","stall_wait (Not Issued)"')


def table(rows: list[tuple[str, str, int, int, int, int, int]]) -> str:
    lines = ["==PROF== Connected to process 1", '"Kernel Name","k(int)"', HEADER]
    for addr, src, samples, executed, barrier, wait, selected in rows:
        lines.append(f'"{addr}","{src}","{samples}","{executed}","{barrier}","{wait}","{selected}","{wait}"')
    return "\n".join(lines) + "\n"


ROWS = [
    ("0x10", "      IMAD.SHL.U32 R1, R2, 0x10, RZ", 4, 300, 0, 3, 1),
    ("0x20", "@P0   IMAD R3, R4, R5, RZ", 0, 100, 0, 0, 0),
    ("0x30", "      BAR.SYNC.DEFER_BLOCKING 0x0", 10, 100, 9, 0, 1),
    ("0x40", "      HMUL2.BF16_V2 R6, R6, 1, 1", 6, 300, 0, 4, 2),
    ("0x50", "      EXIT", 0, 0, 0, 0, 0),
]


def test_opcodes_grouped_and_divided() -> None:
    s = ncu_mix.summarize(ncu_mix.read_table(table(ROWS)), per=100.0)
    assert s["instructions"] == 800 and s["instructions_per"] == 8.0
    ops = {o["op"]: o for o in s["opcodes"]}
    assert ops["IMAD"]["count"] == 400 and ops["IMAD"]["per"] == 4.0  # IMAD.SHL.U32 and a predicated IMAD
    assert ops["HMUL2"]["share"] == pytest.approx(300 / 800)
    assert [o["op"] for o in s["opcodes"]][:2] == ["IMAD", "HMUL2"]


def test_stalls_by_reason_and_hot_instructions() -> None:
    s = ncu_mix.summarize(ncu_mix.read_table(table(ROWS)), top=2)
    reasons = {r["reason"]: r for r in s["stalls"]}
    assert set(reasons) == {"barrier", "wait", "selected"}  # the "(Not Issued)" twin is not counted again
    assert reasons["barrier"]["samples"] == 9 and reasons["wait"]["samples"] == 7
    assert s["stall_samples"] == 20
    assert [h["address"] for h in s["hot"]] == ["0x30", "0x40"]
    assert s["hot"][0]["reasons"] == {"barrier": 9} and s["hot"][0]["share"] == pytest.approx(0.5)


def test_cli_report_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ncu-x-source.csv"
    f.write_text(table(ROWS))
    out = tmp_path / "mix.json"
    assert ncu_mix.main([str(f), "--per", "4", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "warp instructions executed: 800 (200.0 per unit, 4 units)" in text
    assert "BAR.SYNC" in text and "barrier 9" in text
    assert json.loads(out.read_text())["instructions"] == 800


def test_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("==PROF== no kernel matched\n")
    assert ncu_mix.main([str(f)]) == 1
    assert "no per-instruction table" in capsys.readouterr().err
    assert ncu_mix.main([str(tmp_path / "missing.csv")]) == 1
    assert "missing.csv" in capsys.readouterr().err
    f.write_text(HEADER + "\n")
    assert ncu_mix.main([str(f)]) == 1
    assert "no rows" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ncu_mix.main([str(f), "--per", "0"])


def test_results_section_from_the_summaries() -> None:
    """benchmarks/report.py renders the attention kernels' mix from summaries like these."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import attn_mix_md

    fp8_rows = ROWS + [("0x60", "      PRMT R1, R2, 0x9180, RZ", 2, 200, 0, 2, 0)]
    cases = {c: ncu_mix.summarize(ncu_mix.read_table(table(rows)), per=100.0)
             for c, rows in (("bf16", ROWS), ("fp8", fp8_rows))}
    d = {"kv_len": 32768, "q_rows": 16, "how": "a stand-in", "unit": "warp and tile", "cases": cases}
    text = "\n".join(attn_mix_md(d))
    assert "| bf16 | 8 | 4 | 3 |" in text  # 800 / 100 in all, IMAD 4, HMUL2 3
    assert "| fp8 | 10 | 4 | 3 |" in text and "PRMT" in text
    assert "takes 1.25x the instructions" in text
