"""scripts/ab_table.py: times found by key, list rows matched by what they measured (not by
position), ms shown in us, B over the mean of the A rounds, the filters, and a .tgz input."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("ab_table", ROOT / "scripts" / "ab_table.py")
ab_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab_table)


def bench(rows: list[tuple[str, int, float]], floor_us: float) -> dict:
    return {"device": "X", "copy_gb_s": 4000.0, "floor_us": floor_us,
            "linear": [{"shape": s, "rows": r, "bytes": 123 * r, "weight_copies": r % 3,
                        "kernels": {"k1": {"ms": ms, "tb_s": 2.0}}} for s, r, ms in rows]}


def write_rounds(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    a = [("qkv", 1, 0.010), ("qkv", 16, 0.020)]
    (folder / "bench_y-a1.json").write_text(json.dumps(bench(a, 5.0)))
    (folder / "bench_y-a2.json").write_text(json.dumps(bench([(s, r, ms * 1.1) for s, r, ms in a], 5.5)))
    # B lists its rows in the other order, with one row more: matched by shape and rows
    b = [("qkv", 16, 0.015), ("qkv", 1, 0.0105), ("o", 1, 0.5)]
    (folder / "bench_y-b.json").write_text(json.dumps(bench(b, 5.25)))
    (folder / "bench_y-a1.log").write_text("not json")
    (folder / "other.json").write_text("{}")


def test_times_by_key_and_label() -> None:
    t = ab_table.times(bench([("qkv", 16, 0.02)], 5.0))
    assert t == {"floor_us": 5.0, "linear[shape=qkv,rows=16].kernels.k1.ms": 20.0}


def test_table_lines_up_rounds(tmp_path: Path) -> None:
    write_rounds(tmp_path)
    rounds = ab_table.load_rounds(tmp_path)["bench_y"]
    assert sorted(rounds) == ["a1", "a2", "b"]
    lines = ab_table.table(rounds)
    assert lines[0].split() == ["case", "a1", "b", "a2", "b", "/", "A"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    assert rows["linear[shape=qkv,rows=1].kernels.k1.ms"] == ["10.0", "10.5", "11.0", "1.000"]
    assert rows["linear[shape=qkv,rows=16].kernels.k1.ms"] == ["20.0", "15.0", "22.0", "0.714"]
    assert rows["floor_us"] == ["5.0", "5.2", "5.5", "1.000"]  # 5.25 over the A mean 5.25
    assert not any("shape=o" in k for k in rows)  # only in B: not a row of A's


def test_filters(tmp_path: Path) -> None:
    write_rounds(tmp_path)
    rounds = ab_table.load_rounds(tmp_path)["bench_y"]
    assert [ln.split()[0] for ln in ab_table.table(rounds, match=r"rows=1\b")[1:]] == [
        "linear[shape=qkv,rows=1].kernels.k1.ms"]
    assert [ln.split()[0] for ln in ab_table.table(rounds, min_change=0.1)[1:]] == [
        "linear[shape=qkv,rows=16].kernels.k1.ms"]


def test_main_reads_a_tgz(tmp_path: Path, capsys) -> None:
    write_rounds(tmp_path / "r")
    tgz = tmp_path / "gpu-ab.tgz"
    with tarfile.open(tgz, "w:gz") as t:
        t.add(tmp_path / "r", arcname=".")
    assert ab_table.main([str(tgz), "--match", "rows=16"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "== bench_y (us)" and "0.714" in out
    assert ab_table.main([str(tmp_path / "none")]) == 2
    (tmp_path / "empty").mkdir()
    assert ab_table.main([str(tmp_path / "empty")]) == 1
