"""scripts/ncu_cases.py: profiled cases side by side: the details page's kernel, launch and
figures, the per-instruction table's summary where there is one, clear errors otherwise; and
benchmarks/report.py's section over such a file."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
_spec = importlib.util.spec_from_file_location("ncu_cases", ROOT / "scripts" / "ncu_cases.py")
ncu_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_cases)

DETAILS = """==PROF== Connected to process 7
[7] python3.12@127.0.0.1
  {kernel}(const float *, unsigned int) ({gx}, 1, {gz})x(384, 1, 1), Context 1, Stream 7, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    Elapsed Cycles                cycle       49,168
    Duration                         us        {us}
    SM Active Cycles              cycle    41,951.64
    Section: Scheduler Statistics
    Issued Warp Per Scheduler                        {issued}
    Section: Launch Statistics
    Block Size                                                   384
    Cluster Size                                                   {cluster}
    Grid Size                                                    {grid}
"""
HEADER = '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait","stall_barrier"'


def source(rows: list[tuple[str, int, int, int]]) -> str:
    lines = ['"Kernel Name","k"', HEADER]
    lines += [f'"0x{16 * i:x}","{src}","{w + b}","{n}","{w}","{b}"' for i, (src, n, w, b) in enumerate(rows)]
    return "\n".join(lines) + "\n"


def write_case(folder: Path, name: str, kernel: str, gx: int, gz: int, us: str, instr: list | None) -> None:
    (folder / f"ncu-{name}.txt").write_text(DETAILS.format(kernel=kernel, gx=gx, gz=gz, us=us, issued="0.29",
                                                           cluster=gz, grid=gx * gz))
    if instr is not None:
        (folder / f"ncu-{name}-source.csv").write_text(source(instr))


def test_cases_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "gpu.txt").write_text("name, compute_cap\nNVIDIA H200, 9.0, 580\n")
    write_case(tmp_path, "fp8_tma_o_256", "dflash_fp8_gemm_tma_kernel", 64, 2, "26.85",
               [("      LOP3.LUT R1, R2, 0x7, RZ, 0xc0, !PT", 6000000, 3, 0), ("      HGMMA.64x128x16 R24", 1000000, 1, 5)])
    write_case(tmp_path, "dense_tma_o_256", "dense_gemm_tma_bf16_kernel", 64, 2, "21.79",
               [("      LOP3.LUT R1, R2, 0x7, RZ, 0xc0, !PT", 1000000, 1, 0), ("      HGMMA.64x128x16 R24", 1000000, 1, 5)])
    write_case(tmp_path, "cublas_o_256", "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_TNT", 128, 1, "18.75",
               [("      UIADD3 UR4, UR4, 0x1, URZ", 50, 0, 1), ("      HGMMA.64x64x16 R24", 100, 4, 0)])
    write_case(tmp_path, "fp8_tma_qkv_256", "dflash_fp8_gemm_tma_kernel", 48, 2, "37.50", None)  # stopped profile
    out = tmp_path / "cases.json"
    assert ncu_cases.main([str(tmp_path), "fp8_tma_o_256", "dense_tma_o_256", "cublas_o_256", "fp8_tma_qkv_256",
                           "--json", str(out), "--note", "o at 256 rows"]) == 0
    d = json.loads(out.read_text())
    assert d["device"] == "NVIDIA H200" and d["note"] == "o at 256 rows"
    f = d["cases"]["fp8_tma_o_256"]
    assert f["kernel"] == "dflash_fp8_gemm_tma_kernel" and f["grid"] == [64, 1, 2] and f["block"] == [384, 1, 1]
    assert f["duration_us"] == 26.85 and f["issued_per_scheduler"] == 0.29 and f["sm_active_cycles"] == 41951.64
    assert f["grid_size"] == 128 and f["cluster_size"] == 2
    assert f["instructions"] == 7000000 and f["opcodes"][0]["op"] == "LOP3" and f["stalls"][0]["reason"] == "barrier"
    assert "instructions" not in d["cases"]["fp8_tma_qkv_256"]  # no table: the details only

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report

    md = "\n".join(report.many_rows_ncu_md(d))
    assert "| fp8_tma_o_256 | dflash_fp8_gemm_tma_kernel | 64 x 1 x 2 (2) | 26.9 | 7.00 M |" in md
    assert "| fp8_tma_qkv_256 | dflash_fp8_gemm_tma_kernel | 48 x 1 x 2 (2) | 37.5 | - | 0.29 | - | - |" in md
    # 5 M more instructions than dense_gemm_tma, all LOP3; the split named from the grids
    assert "5.00 M more warp instructions (3.50x; most added: LOP3 +5.00 M" in md
    assert "ours split it in two" in md


def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ncu-x.txt").write_text("==PROF== Disconnected\n")
    assert ncu_cases.main([str(tmp_path), "x", "--json", str(tmp_path / "o.json")]) == 1
    assert "no profiled kernel" in capsys.readouterr().err
    assert ncu_cases.main([str(tmp_path), "missing", "--json", str(tmp_path / "o.json")]) == 1
    assert "ncu-missing.txt" in capsys.readouterr().err
