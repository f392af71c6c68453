#!/usr/bin/env python3
"""Turns the latest benchmark JSON in benchmarks/results/ into RESULTS.md (with the hand-written
notes of benchmarks/notes/ after their sections) and PNG charts.

Usage: python3 benchmarks/report.py     (the charts need matplotlib: pip install matplotlib)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
RES = HERE / "results"


def load(name: str) -> dict | None:
    p = RES / name
    return json.loads(p.read_text()) if p.is_file() else None


def attention_md(d: dict) -> list[str]:
    lines = [
        "## Prefill attention (hq 16, hkv 4, head_dim 256, causal)",
        "",
        f"Device: {d['device']}. Median of CUDA-event timings; TFLOP/s = 2*2*hq*L^2*d/2 / time.",
        "",
        "| kernel | " + " | ".join(f"L={r['L']}" for r in d["results"]) + " |",
        "| --- | " + " | ".join("---" for _ in d["results"]) + " |",
    ]
    names = list(d["results"][0]["ms"])
    for n in names:
        cells = [f"{r['ms'][n] * 1000:.0f} us, {r['tflops'][n]:.0f} TF/s" for r in d["results"]]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    for layout in ("contiguous", "paged"):
        ratios = " | ".join(f"{r['speedup_twin_vs_64'][layout]:.2f}x" for r in d["results"])
        lines.append(f"| speed-up twin / 64-row, {layout} | {ratios} |")
    lines.append("")
    if d.get("grid_fill"):
        lines += [
            f"Grid fill (contiguous; the device has {d['sms']} SMs): a twin CTA covers 128 query "
            "rows, so at short prompts its grid has half the 64-row kernel's CTAs and can leave "
            "SMs idle; batch multiplies both grids.",
            "",
            "| L | batch | 64-row CTAs | 64-row | twin CTAs | twin | speed-up | bit diffs |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in d["grid_fill"]:
            c, ms = r["ctas"], r["ms"]
            lines.append(f"| {r['L']} | {r['batch']} | {c['attn_prefill_64']} | "
                         f"{ms['attn_prefill_64'] * 1000:.1f} us | {c['attn_prefill_fa128']} | "
                         f"{ms['attn_prefill_fa128'] * 1000:.1f} us | "
                         f"{r['speedup_twin_vs_64']:.2f}x | {r['bit_diffs']} |")
        lines.append("")
    return lines


def memory_md(d: dict) -> list[str]:
    lines = [
        "## Memory-bound kernels",
        "",
        f"Device: {d['device']}; device-to-device copy measured in the same run: {d['copy_tb_s']:.2f} TB/s "
        "(read + write). Bytes = each input read once plus each output written once. "
        "'% of same-size copy' divides by a plain copy moving the kernel's own byte count, "
        "measured in the same run.",
        "",
        "| kernel | shape | TB/s | % of copy | % of same-size copy | torch TB/s | vs torch |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["large"]:
        same = r.get("fraction_of_same_size_copy")
        same_txt = f"{100 * same:.0f}%" if same is not None else "-"
        lines.append(f"| {r['kernel']} | {r['shape']} | {r['tb_s']:.2f} | {100 * r['fraction_of_copy']:.0f}% | "
                     f"{same_txt} | {r['torch_tb_s']:.2f} | {r['speedup_vs_torch']:.2f}x |")
    lines += ["", "Small shapes (hidden 4096 / inter 14336 / vocab 151936): host time per call, launch included.", "",
              "| kernel | rows | kernelgen us/call | torch us/call |", "| --- | --- | --- | --- |"]
    for r in d["small"]:
        lines.append(f"| {r['kernel']} | {r['rows']} | {r['kernelgen_us']:.2f} | {r['torch_us']:.2f} |")
    lines.append("")
    return lines


def attn_dflash_md(d: dict) -> list[str]:
    """The drafter's paged attention (bench_attn_dflash.py): chain, split and unsplit members."""
    lines = [
        "## Drafter attention (16 query rows, hq 32, hkv 8, head_dim 128, paged, block 16)",
        "",
        f"Device: {d['device']}; copy measured in the same run: {d['copy_gb_s'] / 1000:.2f} TB/s. GB/s on the KV "
        "bytes read, caches rotated beyond the L2. torch: `scaled_dot_product_attention` on the same data made "
        "contiguous.",
        "",
    ]
    header = ["| cache | kv_len | chain us (member) | GB/s | % of copy | unsplit us | torch us | chain vs torch |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += header

    def row(r: dict) -> str:
        ms, member = r["ms"], r["chain_member"].rsplit("_", 1)[-1]
        return (f"| {r['dtype']} | {r['kv_len']} | {1000 * ms['chain']:.1f} ({member}) | "
                f"{r['gb_s']['chain']:.0f} | {100 * r['fraction_of_copy']['chain']:.0f}% | "
                f"{1000 * ms['unsplit']:.1f} | {1000 * ms['torch_sdpa']:.1f} | "
                f"{r['speedup_chain_vs_sdpa']:.2f}x |")
    lines += [row(r) for r in d["results"] if not r.get("window")]
    windowed = [r for r in d["results"] if r.get("window")]
    if windowed:
        lines += ["", f"With a sliding window of {windowed[0]['window']} keys (DFlash2's sliding layers), the "
                  "last 16 positions of kv_len: GB/s on the bytes of the keys some query row can see; torch "
                  "with the window as a boolean mask.", "",
                  *header]
        lines += [row(r) for r in windowed]
    lines.append("")
    return lines


def rope_cache_md(d: dict) -> list[str]:
    """rope_qwen3 and reshape_cache_fp8 (bench_rope_cache.py)."""
    lines = [
        "## Drafter RoPE and FP8 cache writes",
        "",
        f"Device: {d['device']}; copy measured in the same run: {d['copy_gb_s'] / 1000:.2f} TB/s (2 GiB). Bytes: "
        "rope_qwen3 reads and writes q and k (plus positions); reshape_cache_fp8 reads bf16 key/value rows and "
        "writes FP8 ones. Cold data. '% of same-size copy' divides by a copy of the kernel's own byte count.",
        "",
        "| kernel | tokens x heads x dim | MB moved | us | GB/s | % of copy | % of same-size copy |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["rows"]:
        lines.append(f"| {r['kernel']} | {r['shape']} | {r['bytes'] / 1e6:.1f} | {1000 * r['ms']:.1f} | "
                     f"{r['gb_s']:.0f} | {100 * r['fraction_of_copy']:.0f}% | "
                     f"{100 * r['fraction_of_same_size_copy']:.0f}% |")
    lines.append("")
    return lines


def dflash2_md(d: dict) -> list[str]:
    """dflash2_conv2, dflash2_topk16 and dflash2_selector_walk (bench_dflash2.py)."""
    tk, wk = d["topk16"], d["selector_walk"]
    lines = [
        "## DFlash2 ops",
        "",
        f"Device: {d['device']}; copy measured in the same run: {d['copy_gb_s'] / 1000:.2f} TB/s. Device time per "
        "launch: the median CUDA-event time of single launches, each queued behind a GPU sleep so that the host's "
        "launch cost stays out, over inputs rotated so that they come cold from memory (but the rows marked 'logits "
        "in the L2': inputs the L2 holds, as the drafter's lm_head leaves them; 'back to back': the mean of 64 "
        "launches queued back to back between two events, median over rounds). '% of same-size copy' "
        "divides by a copy of the kernel's own byte count timed the same way.",
        "",
        "| dflash2_conv2 rows x hidden | MB moved | us | GB/s | % of copy | % of same-size copy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in d["conv2"]:
        same = r.get("fraction_of_same_size_copy")
        lines.append(f"| {r['rows']} x {r['hidden']} | {r['bytes'] / 1e6:.1f} | {r['us']:.1f} | {r['gb_s']:.0f} | "
                     f"{100 * r['fraction_of_copy']:.0f}% | " + (f"{100 * same:.0f}% |" if same else "- |"))
    lines += ["", "| op | shape | us per launch | torch |", "| --- | --- | --- | --- |"]
    topks = [t for t in (tk, d.get("topk16_bf16")) if t]
    for us, ref in (("us", "torch_topk_us"), ("us_l2", "torch_topk_us_l2")):
        for t in topks:
            # runs without "us_l2" rotated 4 sets of logits, which the L2 holds
            label = ("logits in the L2" if us == "us_l2" else "cold" if "us_l2" in t
                     else "logits in the L2 (4 rotated sets)")
            if us in t:
                lines.append(f"| dflash2_topk16 ({t['dtype']}), {label} | {t['rows']} x {t['vocab']} | {t[us]:.1f} | "
                             f"torch.topk {t[ref]:.1f} |")
    for t in topks:
        if "us_b2b" in t:
            lines.append(f"| dflash2_topk16 ({t['dtype']}), cold, back to back | {t['rows']} x {t['vocab']} | "
                         f"{t['us_b2b']:.1f} ({t['us_b2b_no_pdl']:.1f} without PDL) | "
                         f"torch.topk {t['torch_topk_us_b2b']:.1f} |")
    lines += [f"| dflash2_selector_walk | batch {wk['batch']}, {wk['slots']} slots, rank {wk['rank']} | "
              f"{wk['us']:.1f} | - |", ""]
    return lines


def launch_md(d: dict) -> list[str]:
    meta = d.get("meta", {})
    lines = [
        "## Host launch cost (per launch, bursts of 64 between synchronisations, median)",
        "",
        f"Device: {meta.get('device', '?')}, torch {meta.get('torch', '?')}, Python {meta.get('python', '?')}. "
        "The same 11-argument kernel (5 pointers, 5 u32, 1 f32) through each launcher, interleaved in one run. "
        "'x raw C++' divides by raw.cu's `<<<>>>` loop (a separate process); 'x floor' by a C++ loop of "
        "64 `<<<>>>` launches called from the benchmark's own process.",
        "",
        "| launcher | us/launch | x raw C++ | x floor |",
        "| --- | --- | --- | --- |",
    ]
    catalog = []
    for r in d.get("results", {}).values():
        if not isinstance(r, dict) or r.get("us_per_launch") is None:
            continue
        if "ratio_to_minimal_pybind" in r:
            catalog.append(r)
            continue
        raw, floor = r.get("ratio_to_raw_cpp"), r.get("ratio_to_floor_in_process")
        lines.append(f"| {r.get('label', '?')} | {r['us_per_launch']:.3f} | {'-' if raw is None else f'{raw:.2f}'} | "
                     f"{'' if floor is None else f'{floor:.2f}'} |")
    if catalog:
        lines += [
            "",
            "Catalog kernels, interleaved in the same run: each generated launcher against a minimal pybind11 "
            "binding of the same signature (int pointers and scalars) calling the same C ABI function "
            "(benchmarks/launch_cost/minimal_catalog.cpp). 'x minimal' divides by that binding; 'x floor' by a "
            "C++ loop of 64 calls of the C ABI function from the same process. Arguments: "
            + "; ".join(f"{k}: {v.get('values')}" for k, v in d.get("catalog", {}).items()) + ".",
            "",
            "| kernel, launcher | us/launch | x minimal | x floor |",
            "| --- | --- | --- | --- |",
        ]
        for r in catalog:
            m, fl = r.get("ratio_to_minimal_pybind"), r.get("ratio_to_kernel_floor")
            lines.append(f"| {r.get('label', '?')} | {r['us_per_launch']:.3f} | {'-' if m is None else f'{m:.2f}'} | "
                         f"{'-' if fl is None else f'{fl:.2f}'} |")
    g = d.get("graph_check", {})
    verdict = "PASS" if g.get("passed") else "FAIL"
    lines += ["", f"CUDA graph of 64 generated launches (torch tensors), replayed: {verdict}.", ""]
    for note in d.get("notes", []):
        lines.append(f"- {note}")
    lines.append("")
    return lines


def linear_md(fp8: dict | None, dense: dict | None) -> list[str]:
    """The drafter's linear layers: few-row GEMVs as a fraction of copy bandwidth on the weight
    bytes (with the ratio to torch's peer), and many-row GEMMs in TFLOP/s against cuBLAS bf16."""
    lines = ["## The drafter's linear layers (Qwen3-8B drafter shapes, weights cold)", ""]
    if fp8:
        lines += ["![linear layers](results/linear.png)", ""]
    dense_rows = {(r["shape"], r["m"], r["kernel"]): r for r in (dense or {}).get("rows", [])}
    fp8_rows = {(r["shape"], r["rows"]): r for r in (fp8 or {}).get("linear", [])}
    shapes = list(dict.fromkeys([r["shape"] for r in (dense or {}).get("rows", [])] +
                                [r["shape"] for r in (fp8 or {}).get("linear", [])]))
    lines += [
        f"Device: {(fp8 or dense or {}).get('device', '?')}; copy bandwidth "
        f"{(fp8 or dense or {}).get('copy_tb_s', 0):.2f} TB/s (read + write). Few rows: % of copy bandwidth on the "
        "bytes that must be read, and speed-up over torch's peer in the same run (FP8: `_scaled_mm` with row-wise "
        "scales, activations already FP8; bf16 and NVFP4: cuBLAS bf16 `F.linear`). Read floor: the % of copy "
        "bandwidth that one launch of a plain streaming-read kernel reaches on the weight's bytes (FP8, or BF16 "
        "for dense_gemv), measured the same way (ramp and tail included): what a single kernel reading those "
        "bytes can reach.",
        "",
        "| shape | M | FP8 read floor | FP8 chain | vs _scaled_mm | BF16 read floor | dense_gemv_rt1 / dense_gemv "
        "| vs cuBLAS | w4a16_gemv_rt1_128 / rt1 / rt2 | vs cuBLAS bf16 | w4a16_gemv | vs cuBLAS bf16 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for shape in shapes:
        for m in (1, 8, 16):
            f = fp8_rows.get((shape, m))
            fc = f["kernels"].get("chain") if f else None
            fp8_cells = ("", "")
            floor = ""
            if f and f.get("read_floor_ms"):
                floor = f"{100 * f['n'] * f['k'] / f['read_floor_ms'] / 1e9 / fp8['copy_tb_s']:.0f}%"
            if fc:
                ran = fc.get("ran", "?").split(".")[-1]
                peer = f"{f['scaled_mm_ms'] / fc['ms']:.2f}x" if f.get("scaled_mm_ms") else "n/a"
                fp8_cells = (f"{100 * fc['weight_fraction_of_copy']:.0f}% ({ran})", peer)
            bf16_floor = dense_rows.get((shape, 0, "read_floor"))
            cells = [f"{100 * bf16_floor['fraction_of_copy']:.0f}%" if bf16_floor else ""]
            for ks in (("dense_gemv_rt1", "dense_gemv"), ("w4a16_gemv_rt1_128", "w4a16_gemv_rt1", "w4a16_gemv_rt2"),
                       ("w4a16_gemv",)):
                # the first of ks measured (the chain's order), named when there is a choice
                k, r = next(((k, dense_rows[(shape, m, k)]) for k in ks if (shape, m, k) in dense_rows), (None, None))
                name = f" ({k.removeprefix('w4a16_gemv_').removeprefix('dense_gemv_')})" if r and len(ks) > 1 else ""
                cells += ([f"{100 * r['fraction_of_copy']:.0f}%{name}", f"{r['speedup_vs_cublas']:.2f}x"]
                          if r else ["", ""])
            lines.append(f"| {shape} | {m} | {floor} | {fp8_cells[0]} | {fp8_cells[1]} | " + " | ".join(cells) + " |")
    batch = [(shape, m, fp8_rows[(shape, m)]) for m in (32, 48, 64) for shape in shapes if (shape, m) in fp8_rows]
    if batch:
        lines += ["", "32-64 rows (batches of two to four 16-row blocks), bench_fp8_linear, us: the FP8 chain (the "
                      "kernel it ran), fp8_gemm_n128_row_scaled (the chain's kernel at these rows before the 32- and "
                      "64-row GEMVs), cuBLAS bf16 on the BF16 weight (twice the bytes) and torch `_scaled_mm`.", "",
                  "| shape | M | FP8 chain | fp8_gemm_n128_row_scaled | cuBLAS bf16 | chain vs cuBLAS bf16 "
                  "| _scaled_mm | chain vs _scaled_mm |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for shape, m, f in batch:
            fc, n128 = f["kernels"].get("chain"), f["kernels"].get("fp8_gemm_n128_row_scaled")
            if not fc:
                continue
            cub, sm = f.get("cublas_bf16_ms"), f.get("scaled_mm_ms")
            cells = [f"{1e3 * fc['ms']:.1f} ({fc.get('ran', '?').split('.')[-1]})",
                     f"{1e3 * n128['ms']:.1f}" if n128 else "",
                     f"{1e3 * cub:.1f}" if cub else "", f"{cub / fc['ms']:.2f}x" if cub else "",
                     f"{1e3 * sm:.1f}" if sm else "", f"{sm / fc['ms']:.2f}x" if sm else ""]
            lines.append(f"| {shape} | {m} | " + " | ".join(cells) + " |")
    lines += ["", "Many rows (TFLOP/s, and the ratio to cuBLAS bf16 on the same shape timed in the same run as "
                  "the kernel: the FP8 columns come from bench_fp8_linear, the others and the cuBLAS column from "
                  "bench_dense_linear). dense_gemm_tma's tile (128 rows by 128, 192 or 256 columns, K split over "
                  "up to two CTAs) and fp8_gemm_tma's (128 or 256 rows by 128 weight rows, K split over up to four) "
                  "are their specs' choices: `kernelgen plan dense_linear.dense_gemm_tma m=M n=N k=K` (or "
                  "`fp8_linear.fp8_gemm_tma rows=M ...`) shows them step by step.", "",
              "| shape | M | cuBLAS bf16 | fp8_gemm_n128_row_scaled | fp8_gemm_tma | dense_gemm_pipelined "
              "| dense_gemm_tma |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for shape in shapes:
        for m in (256, 2048):
            cub = dense_rows.get((shape, m, "cublas_bf16"))
            f = fp8_rows.get((shape, m))
            n128 = f["kernels"].get("fp8_gemm_n128_row_scaled") if f else None
            ftma = f["kernels"].get("fp8_gemm_tma") if f else None
            if not cub:
                continue
            c1 = " | ".join(f"{r['tflop_s']:.0f} ({r['vs_cublas_bf16']:.2f}x{tile})" if r else ""
                            for r, tile in ((n128, ""), (ftma, fp8_tma_tile(ftma, m, f["n"]) if ftma else "")))
            dense = []
            for name in ("dense_gemm_pipelined", "dense_gemm_tma"):
                r = dense_rows.get((shape, m, name))
                tile = tma_tile(r) if r and name == "dense_gemm_tma" else ""
                dense.append(f"{r['tflop_s']:.0f} ({r['speedup_vs_cublas']:.2f}x{tile})" if r else "")
            lines.append(f"| {shape} | {m} | {cub['tflop_s']:.0f} | {c1} | " + " | ".join(dense) + " |")
    q = (fp8 or {}).get("quantize")
    if q:
        torch_cell = ""
        if q.get("speedup_vs_torch"):
            torch_cell = f", {q['speedup_vs_torch']:.1f}x torch's row-wise quantization"
        cast_cell = ""
        if q.get("cast_ms"):
            cast_cell = (f" The same traffic as a plain bf16 -> E4M3 cast (torch, no scale): "
                         f"{q['cast_ms'] * 1000:.1f} us, {100 * q['cast_fraction_of_copy']:.0f}% of copy bandwidth.")
        if q.get("same_size_copy_fraction_of_copy"):
            cast_cell += (f" A plain copy moving the same {q['bytes'] / 1e6:.0f} MB, timed the same way: "
                          f"{100 * q['same_size_copy_fraction_of_copy']:.0f}% of copy bandwidth.")
        lines += ["", f"quantize_bf16_to_fp8 {q['n']}x{q['k']}: {q['ms'] * 1000:.1f} us, "
                      f"{100 * q['fraction_of_copy']:.0f}% of copy bandwidth{torch_cell}.{cast_cell}"]
    return lines + [""]


def k_split(grid: list[int]) -> str:
    """The K split a GEMM's grid shows along z (nothing when unsplit)."""
    return f", K / {grid[2]}" if grid[2] > 1 else ""


def fp8_tma_tile(r: dict, rows: int, n: int) -> str:
    """fp8_gemm_tma's tile from the grid its plan gave (results that recorded it): 128 or 256 x
    rows (256 when ceil(rows / 128) tiles along the rows would not match the grid, as the kernel
    reads it) by 128 weight rows, and the K split."""
    grid = r.get("grid")
    if not grid:
        return ""
    xtile = 256 if grid[0] // -(-n // 128) * 128 < rows else 128
    return f", {xtile} x 128{k_split(grid)}"


def tma_tile(r: dict) -> str:
    """dense_gemm_tma's tile from the grid its plan gave (results that recorded it): 128 rows by the
    narrowest of 128, 192 and 256 columns whose tile count along n matches (as the kernel reads
    its grid), and the K split."""
    grid = r.get("grid")
    if not grid:
        return ""
    nt = grid[0] // -(-r["m"] // 128)
    width = next((w for w in (128, 192, 256) if -(-r["n"] // w) == nt), None)
    return f", 128 x {width}{k_split(grid)}" if width else ""


def ablation_md(d: dict, title: str, text: str, table, after: list[str] | None = None) -> list[str]:
    """An ablation benchmark's section: title, device and method text, its table (nothing when the
    run was skipped)."""
    if d.get("skipped") or not d.get("cases"):
        return []
    return [f"### {title}", "", f"Device: {d['device']}. {text}", "", table(d["cases"]), ""] + (after or [])


def attn_ablation_md(d: dict) -> list[str]:
    from bench_attn_dflash_ablation import table

    return ablation_md(d, "Where the drafter attention's time goes",
            "benchmarks/attn_dflash_ablation.cu: the shipped split kernel beside itself "
            "with part of its work left out, over the same rotated caches in one process (means of back-to-back "
            "launches). floor: a plain streaming read of the K / V bytes; no_fold: partial states sent to "
            "the CTAs that fold them and counted, the folds left out; no_partials: no partial states and no "
            "folds (the products and softmax still run); loads: no_partials without the tiles' products and "
            "softmax (the K / V ring, block-table reads, barriers and the FP8 conversion kept); reads: loads "
            "without the FP8 conversion (bf16: loads again), the paged read pattern alone. The last three "
            "columns split the full kernel's time: compute (no_partials - loads), partial states (no_fold - "
            "no_partials) and the folds (full - no_fold: the cluster's states, then past one cluster the group "
            "states' through the workspace).", table)


def attn_mix_md(d: dict) -> list[str]:
    """The split attention kernels' instruction mix and warp states (one profiled launch each)."""
    cases = d["cases"]
    names = list(cases)
    per = {c: {o["op"]: o["per"] for o in cases[c]["opcodes"]} for c in names}
    # the columns: each case's largest, in order of first appearance
    ops = list(dict.fromkeys(o["op"] for c in names for o in cases[c]["opcodes"][:10]))
    states = list(dict.fromkeys(x["reason"] for c in names for x in cases[c]["stalls"][:7]))
    share = {c: {x["reason"]: x["share"] for x in cases[c]["stalls"]} for c in names}
    lines = ["Instruction mix (Nsight Compute, one launch of each split kernel at kv_len "
             f"{d['kv_len']}, {d['q_rows']} query rows: {d['how']}). Warp instructions executed per "
             f"{d['unit']}, in all and for the largest opcode families; then the warps' sampled states "
             "(selected: issuing; wait: a fixed-latency dependency; long_sb: a memory result; barrier: a "
             "CTA or cluster barrier or a warpgroup MMA wait):", "",
             "| cache | all | " + " | ".join(ops) + " |", "| --- | --- | " + " | ".join("---" for _ in ops) + " |"]
    for c in names:
        lines.append(f"| {c} | {cases[c]['instructions_per']:.0f} | "
                     + " | ".join(f"{per[c].get(op, 0.0):.0f}" for op in ops) + " |")
    lines += ["", "| cache | " + " | ".join(states) + " |", "| --- | " + " | ".join("---" for _ in states) + " |"]
    for c in names:
        lines.append(f"| {c} | " + " | ".join(f"{100 * share[c].get(r, 0.0):.0f}%" for r in states) + " |")
    if {"bf16", "fp8"} <= set(names):
        b, f = cases["bf16"], cases["fp8"]
        # the opcode families whose count per tile grows most from bf16 to FP8
        def added(op: str) -> float:
            return per["fp8"].get(op, 0.0) - per["bf16"].get(op, 0.0)

        grown = sorted(set(per["bf16"]) | set(per["fp8"]), key=added, reverse=True)
        more = ", ".join(f"{op} +{added(op):.0f}" for op in grown[:3])
        lines += ["", f"Reading: a tile of the FP8 cache takes {f['instructions_per'] / b['instructions_per']:.2f}x "
                  f"the instructions of a bf16 one (most added: {more}; F2FP holds the E4M3 -> f16 conversions, "
                  "one a pair of cache bytes, and the f16 packing of P and Q), issued at about the same rate "
                  f"({100 * share['fp8'].get('selected', 0.0):.0f}% of FP8's warp samples issuing, "
                  f"{100 * share['bf16'].get('selected', 0.0):.0f}% of bf16's): both kernels are held by their "
                  "tiles' instructions and latencies, so the FP8 cache's half-size reads do not make it faster."]
    return lines + [""]


def topk_ablation_md(d: dict) -> list[str]:
    from bench_topk16_ablation import table

    return ablation_md(d, "Where dflash2_topk16's time goes",
            "benchmarks/topk16_ablation.cu: the shipped kernel at 16 x 151936 logits "
            "(rotated beyond the L2) ended after each stage, beside an empty kernel of the same grid and 8-CTA "
            "clusters. empty: the launch alone; maxima: the loads and each thread's maximum (its key); "
            "cta_top16: and each CTA's 16 largest thread maxima; threshold: and the row's threshold (the "
            "lists exchanged over distributed shared memory and merged); full: the whole kernel (candidates "
            "gathered, sorted, written). single: one launch behind a GPU spin (as the DFlash2 table above); "
            "b2b: back-to-back launches with programmatic dependent launch. read floor: a plain streaming "
            "read of the logits, back to back.", table)


def w4a16_ablation_md(d: dict) -> list[str]:
    from bench_w4a16_gemv_ablation import table

    return ablation_md(d, "Where the NVFP4 GEMVs' time goes",
            "benchmarks/w4a16_gemv_ablation.cu: the three few-row NVFP4 kernels (w4a16_gemv: 128 rows "
            "a CTA over all of K; w4a16_gemv_rt2: gemv_stream's whole-line ring, 2-CTA clusters splitting K; "
            "w4a16_gemv_rt1: the same, one CTA over all of K) and rt1 with part of its work left out, over the "
            "same rotated weights in one process (means of back-to-back launches). floor: a plain streaming "
            "read of the codes and scale bytes; loads: rt1 without the E2M1 / scale conversions and the "
            "tensor-core products (code ring, scale window, x slots, reduction kept); convert: with the "
            "conversions, without the products; mma: with the products, without the conversions.", table)


def fp8_ablation_md(d: dict) -> list[str]:
    from bench_fp8_gemv_ablation import table

    if d.get("skipped") or not d.get("cases"):
        return []
    mma = [c["mma_share"] for c in d["cases"] if c["rows"] == 16 and c.get("mma_share") is not None]
    return ablation_md(d, "Where the FP8 GEMVs' time goes",
            "benchmarks/fp8_gemv_ablation.cu: the shipped fp8_gemv_rt2 (1 row), "
            "fp8_gemv_rt2_16 (16 rows) and fp8_gemv_rt2_64 (48 and 64 rows: six and eight x tiles) beside the "
            "same kernel with part of its work left out, over the same rotated weights in one process (means "
            "of back-to-back launches). floor: a plain streaming read of the weight; loads: the kernel without "
            "the E4M3 conversions and the tensor-core products (its weight ring, x loads, warp reduction and "
            "cluster exchange kept; at 48 and 64 rows also the x slots' shared-memory reads); convert: with "
            "the conversions, without the products; mma: with the products, without the conversions. rt1: the "
            "whole-K form (fp8_gemv_rt1 / rt1_16 / rt1_64, one CTA over all of K, no cluster; the chain's "
            "choice for weights of more than SMs / 2 row tiles: qkv, gate_up, lm_head).", table,
            ["Reading: the kernel's load structure alone (loads / floor) stays below the streaming read, and "
            "the compute adds the rest; at 16 rows the products without the conversions account for "
            + (f"{min(mma):.0%}-{max(mma):.0%}" if mma else "(n/a)")
            + " of the time the full kernel spends above `loads` (the mma share; the two parts overlap, so "
            "the shares need not add up to 100%)." + wide_reading(d["cases"]) + rt1_reading(d["cases"]), ""])


def wide_reading(cases: list[dict]) -> str:
    """How the six- and eight-tile kernels' time compares with the 16-row kernel's on each weight."""
    at = {(c["shape"], c["rows"]): c for c in cases}
    growth = [at[(sh, m)]["full_us"] / at[(sh, 16)]["full_us"] for sh, m in at if m == 64 and (sh, 16) in at]
    loads = [c["loads_us"] / c["full_us"] for c in cases if c["rows"] == 64]
    if not growth or not loads:
        return ""
    return (f" At 64 rows (the same weight bytes) the full kernel takes {min(growth):.2f}-{max(growth):.2f}x "
            f"its 16-row time, and `loads`, which there keeps the x slots' shared-memory reads, takes "
            f"{min(loads):.0%}-{max(loads):.0%} of the full time: the x operand's traffic, not the products, "
            "bounds the few-row design there (at eight x tiles each weight byte brings two bytes of x from the "
            "L2 into shared memory, and each warp reads four bytes of x out of it a weight byte).")


def rt1_reading(cases: list[dict]) -> str:
    """Where the whole-K form beats the split kernel, from the ablation's rt1 column."""
    def where(pick) -> str:
        by_shape: dict[str, list[str]] = {}
        for c in cases:
            if c.get("rt1_us") and pick(c["rt1_us"], c["full_us"]):
                by_shape.setdefault(c["shape"], []).append(str(c["rows"]))
        return ", ".join(f"{sh} ({' and '.join(rows)} row{'' if rows == ['1'] else 's'})"
                         for sh, rows in by_shape.items()) or "none"

    if not any(c.get("rt1_us") for c in cases):
        return ""
    return (f" In these back-to-back means the whole-K form (rt1) is faster than the split kernel on "
            f"{where(lambda a, b: a < b)} and not on {where(lambda a, b: a >= b)}; bench_fp8_linear's single "
            "launches (the table above) time the chain's choice.")


def load_pattern_md(d: dict) -> list[str]:
    from bench_load_pattern import table

    if d.get("skipped") or not d.get("cases"):
        return []
    return ["### Why the GEMVs copy whole lines", "",
            f"Device: {d['device']}. benchmarks/load_pattern.cu: the streamed GEMVs' load structure alone "
            "(8 warps, chunk c of a CTA's rows to warp c % 8, a 3-slot cp.async ring, the same bytes in "
            "flight per warp) over cold weights, with 64-byte pieces of a row per copy instruction (4 lanes "
            "a row, the mma fragments' layout: half lines), 128-byte chunks copied as two such instructions, "
            "and whole 128-byte lines (8 lanes a row, kcommon::LineChunk: what dense_gemv and fp8_gemv_rt2 / "
            "rt2_16 copy), beside a plain streaming read of the same bytes (means of back-to-back launches).",
            "", table(d["cases"]), "",
            "Reading: the three move the same bytes with the same bytes in flight; what differs is the "
            "number of requests, one per line a copy instruction touches, which half lines double. The "
            "whole-line stream comes within 8% of the plain read.", ""]


def sm48_attention_md(full: dict | None, sm48: dict) -> list[str]:
    """The attention twins against the 64-row kernels on 48 SMs (GB10's count) of the H200,
    beside the same run on the whole GPU."""
    lines = [
        f"## GB10-sized runs: {sm48.get('sm_limit')} SMs of the H200 (a CUDA green context)",
        "",
        f"Device: {sm48['device']}, confined to {sm48.get('sm_limit')} of its SMs (a probe grid ran on "
        f"{sm48.get('probe_sms')} SMs). Such a run shows the effect of GB10's SM count only: not GB10's memory "
        "bandwidth (about 273 GB/s of LPDDR5x against the H200's 4.8 TB/s of HBM3e), nor its sm_121a code "
        "path (no warpgroup MMAs there: the twins use their mma.sync path, tested on the H200 through an sm_90 "
        "build), nor its clocks.",
        "",
        "Prefill attention (hq 16, hkv 4, head_dim 256, causal), speed-up of the 128-row twin over the 64-row "
        "kernel:",
        "",
        "| L | layout | 64-row | twin | twin / 64-row, 48 SMs | twin / 64-row, all SMs |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    whole = {r["L"]: r for r in (full or {}).get("results", [])}
    for r in sm48["results"]:
        for layout, a, b in (("contiguous", "attn_prefill_64", "attn_prefill_fa128"),
                             ("paged", "attn_prefill_paged_64", "attn_prefill_fa128_paged")):
            w = whole.get(r["L"])
            wcell = f"{w['speedup_twin_vs_64'][layout]:.2f}x" if w else ""
            lines.append(f"| {r['L']} | {layout} | {r['ms'][a] * 1000:.0f} us | {r['ms'][b] * 1000:.0f} us | "
                         f"{r['speedup_twin_vs_64'][layout]:.2f}x | {wcell} |")
    return lines + [""]


def pdl_chains_md(d: dict) -> list[str]:
    """Chains of FP8 GEMVs and norms in a graph, with programmatic dependent launch and without."""
    lines = ["### Chains with programmatic dependent launch", "",
             f"Device: {d['device']}. benchmarks/bench_pdl_chains.py: runs of launches captured in a CUDA graph "
             "(the same GEMV over several cold weights, the GEMV once, a norm before each GEMV, the norms alone), "
             "replayed after a write that leaves the L2 cold, with programmatic dependent launch and with plain "
             "launches (KERNELGEN_NO_PDL); medians of replays.", "",
             "| chain | launches | with PDL us | plain us | plain / PDL |", "| --- | --- | --- | --- | --- |"]
    for r in d["chains"]:
        lines.append(f"| {r['chain']} | {r['launches']} | {r['pdl_us']:.1f} | {r['plain_us']:.1f} | "
                     f"{r['plain_us'] / r['pdl_us']:.2f}x |")
    return lines + [""]


def drafter_md(full: dict, sm48: dict | None) -> list[str]:
    """One DFlash2 draft step (drafter/): graph-replayed latency against torch and the floor,
    the per-kernel breakdown, and the same on 48 SMs."""
    lines = [
        "## One DFlash2 draft step (drafter/, Qwen3-8B shape: 5 layers, FP8 weights, vocab 151936)",
        "",
        f"Device: {full['device']}; copy {full['copy_gb_s']:.0f} GB/s in the same run. The block step (16 rows) "
        "captured once in a CUDA graph and replayed; torch: the same step in torch ops, BF16 weights through "
        "`F.linear` or the same FP8 weights through `_scaled_mm` (row-wise scales), eager and captured in a CUDA "
        "graph. Floor: the bytes the step must read (every weight once, the gathered embedding and codebook rows, "
        "the visible KV rows) over the copy bandwidth. Times in us.",
        "",
    ]

    def table(d: dict) -> list[str]:
        out = ["| context rows | kernelgen graph | kernelgen eager | graph, NVFP4 lm_head | torch BF16 eager | "
               "torch BF16 graph | torch FP8 eager | torch FP8 graph | floor | graph / floor | torch BF16 graph / "
               "kernelgen graph |",
               "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for c in d["contexts"]:
            cells = [c.get(k) for k in ("kernelgen_graph_us", "kernelgen_eager_us", "kernelgen_nvfp4_graph_us",
                                        "torch_bf16_eager_us", "torch_bf16_graph_us", "torch_fp8_eager_us",
                                        "torch_fp8_graph_us", "floor_us")]
            tg = c.get("torch_bf16_graph_us")
            ratio = f"{tg / c['kernelgen_graph_us']:.2f}x" if tg else ""
            out.append(f"| {c['context_rows']} | " + " | ".join(f"{v:.0f}" if v else "" for v in cells)
                       + f" | {c['graph_over_floor']:.2f}x | {ratio} |")
        return out

    lines += table(full) + [""]
    pdl = [c for c in full["contexts"] if "graph_pdl_us" in c]
    if pdl:
        lines += ["Programmatic dependent launch: the step's kernels launch with it, each starting (and the GEMVs "
                  "loading their first weight chunks) while the kernel before finishes. The same step captured with "
                  "plain launches (KERNELGEN_NO_PDL) beside it, medians of interleaved rounds of replays:", "",
                  "| context rows | graph with PDL us | graph without us | speed-up | same bits |",
                  "| --- | --- | --- | --- | --- |"]
        for c in pdl:
            lines.append(f"| {c['context_rows']} | {c['graph_pdl_us']:.0f} | {c['graph_no_pdl_us']:.0f} | "
                         f"{c['graph_no_pdl_us'] / c['graph_pdl_us']:.2f}x | {'yes' if c['pdl_same_bits'] else 'NO'} |")
        lines.append("")
    last = full["contexts"][-1]
    if last.get("marginals_by_op"):
        lines += [f"What each operation costs inside the graph at {last['context_rows']} context rows: the step's "
                  "first k launches captured alone for every k, each replay timed after a write that leaves the L2 "
                  "cold, launch k costing t(k) - t(k - 1), summed over the layers (single replays, so a few us of "
                  "noise each):", "", "| op | launches | plain us | with PDL us |", "| --- | --- | --- | --- |"]
        for g in sorted(last["marginals_by_op"], key=lambda g: -g["plain_us"]):
            lines.append(f"| {g['op']} | {g['count']} | {g['plain_us']:.1f} | {g['pdl_us']:.1f} |")
        lines.append("")
    if last.get("breakdown_by_op"):
        lines += [f"Per-kernel breakdown at {last['context_rows']} context rows (each launch timed alone; sum "
                  f"{last['breakdown_sum_us']:.0f} us against {last['kernelgen_graph_us']:.0f} us for the graph):", "",
                  "| op | launches | us | kernel |", "| --- | --- | --- | --- |"]
        for g in sorted(last["breakdown_by_op"], key=lambda g: -g["us"]):
            lines.append(f"| {g['op']} | {g['count']} | {g['us']:.1f} | {', '.join(g['kernels'])} |")
        lines.append("")
    if sm48:
        plans = (f"The plans saw {sm48['plans_sm_count']} SMs (kernelgen_ops.limit_sms)"
                 if sm48.get("plans_sm_count") else "The chains' plans still saw the whole device's SM count")
        lines += [f"On {sm48.get('sm_limit')} SMs (a green context; a probe grid reached {sm48.get('probe_sms')} SMs; "
                  f"copy {sm48['copy_gb_s']:.0f} GB/s there, the floor's bandwidth). {plans}:", ""]
        lines += table(sm48) + [""]
    return lines


def build_md(d: dict) -> list[str]:
    lines = [f"## Build loop ({d['machine']})", "", f"- generate the whole catalog: {d['generate_s']:.2f} s "
             f"(again, nothing changed: {d['generate_unchanged_s']:.2f} s)"]
    for t, r in d["targets"].items():
        lines.append(
            f"- {t}: cold build {r['cold_build_s']:.0f} s ({r['cold_compiled']} compile steps); no-op build "
            f"{r['noop_build_s']:.2f} s ({len(r['noop_compiled'])} compiled); spec edit {r['spec_edit_s']:.1f} s "
            f"recompiling {', '.join(r['spec_edit_compiled'])}; kernel edit {r['kernel_edit_s']:.1f} s recompiling "
            f"{', '.join(r['kernel_edit_compiled'])}")
    if d.get("ccache"):
        c = d["ccache"]
        lines.append(f"- {c['target']} through ccache: filling build {c['filling_build_s']:.0f} s, clean rebuild "
                     f"{c['clean_rebuild_s']:.0f} s; ccache stats {c['stats']}")
    if d.get("sccache"):
        c = d["sccache"]

        def steps(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"

        for phase in ("filling_build", "clean_rebuild"):
            s = c["stats"][phase]
            lines.append(
                f"- {c['target']} through sccache {c.get('version', '')}".rstrip() + f", {phase.replace('_', ' ')} "
                f"{c[phase + '_s']:.0f} s ({c.get('compiled', '?')} compile steps): hits {sum(s['hits'].values())} "
                f"({steps(s['hits'])}); misses {sum(s['misses'].values())} ({steps(s['misses'])}); "
                f"{s['not_cacheable']} nvcc calls not cacheable as a whole")
        lines.append("  (sccache never caches an nvcc call as one unit: it splits it with `nvcc --dryrun` and caches "
                     "its cudafe++, cicc, ptxas and host-compile steps, the last counted as 'cuda [nvcc]'; its "
                     "preprocessing steps and fatbinary run on every build, so a cached nvcc call costs more than "
                     "through ccache)")
    lines.append("")
    return lines


def chart(att: dict | None, mem: dict | None, launch: dict | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(20, 5), gridspec_kw={"width_ratios": [1.1, 1, 1.2]})
    if mem:
        ax = axes[0]
        kernels = [r["kernel"] for r in mem["large"]]
        names = [f"{r['kernel']} {r['shape']}" if kernels.count(r["kernel"]) > 1 else r["kernel"]
                 for r in mem["large"]]
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [r["tb_s"] for r in mem["large"]], 0.4, label="kernelgen")
        ax.bar([i + 0.2 for i in x], [r["torch_tb_s"] for r in mem["large"]], 0.4, label="torch")
        ax.axhline(mem["copy_tb_s"], color="gray", ls="--", label=f"copy {mem['copy_tb_s']:.2f} TB/s")
        ax.axhline(0.8 * mem["copy_tb_s"], color="gray", ls=":", label="80% of copy")
        ax.set_xticks(list(x), names, rotation=30, ha="right")
        ax.set_ylabel("TB/s")
        ax.set_title(f"Memory-bound kernels, {mem['device']}")
        ax.legend(fontsize=8)
    if att:
        ax = axes[1]
        Ls = [r["L"] for r in att["results"]]
        for n in att["results"][0]["tflops"]:
            ax.plot(Ls, [r["tflops"][n] for r in att["results"]], marker="o", label=n)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length L")
        ax.set_ylabel("TFLOP/s")
        ax.set_title("Prefill attention, hq 16 hkv 4 d 256 causal")
        ax.legend(fontsize=8)
    if launch:
        ax = axes[2]
        def launched(r: object) -> bool:
            label = r.get("label", "") if isinstance(r, dict) else ""
            return bool(isinstance(r, dict) and r.get("ratio_to_floor_in_process")) and not any(
                word in label for word in ("no launch", "n=0", "graph"))

        rows = [r for r in launch.get("results", {}).values() if launched(r)]
        labels = [r["label"].replace("kernelgen ", "kg ")[:48] for r in rows]
        ax.barh(range(len(rows)), [r["ratio_to_floor_in_process"] for r in rows],
                color=["tab:blue" if r["label"].startswith("kernelgen") else "tab:gray" for r in rows])
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.axvline(1.25, color="tab:red", ls=":", label="1.25x target")
        ax.invert_yaxis()
        ax.set_xlabel("host cost per launch / in-process C++ <<<>>> floor")
        ax.set_title("Launch cost (same 11-argument kernel)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RES / "benchmarks.png", dpi=110)


def linear_chart(fp8: dict) -> None:
    """results/linear.png: the FP8 chain's speed-up over cuBLAS on the bf16 weights at every row count,
    and at one row the weight bytes' rate as a fraction of copy bandwidth beside the read floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = fp8.get("linear", [])
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(15, 5))
    for sh in shapes:
        pts = [(r["rows"], r["kernels"]["chain"]["vs_cublas_bf16"]) for r in rows
               if r["shape"] == sh and r["kernels"].get("chain", {}).get("vs_cublas_bf16")]
        if pts:
            ax0.plot([m for m, _ in pts], [v for _, v in pts], marker="o", label=sh)
    ax0.axhline(1.0, color="gray", ls="--", label="cuBLAS bf16")
    ax0.set_xscale("log", base=2)
    ax0.set_xlabel("rows M")
    ax0.set_ylabel("cuBLAS bf16 time / FP8 chain time")
    ax0.set_title(f"FP8 chain against cuBLAS on the bf16 weights, {fp8.get('device', '?')}")
    ax0.legend(fontsize=8)
    one = [r for r in rows if r["rows"] == 1 and r["kernels"].get("chain")]
    x = range(len(one))
    ax1.bar([i - 0.2 for i in x], [100 * r["kernels"]["chain"]["weight_fraction_of_copy"] for r in one], 0.4,
            label="FP8 chain")
    floor = [100 * r["n"] * r["k"] / r["read_floor_ms"] / 1e9 / fp8["copy_tb_s"] if r.get("read_floor_ms") else 0
             for r in one]
    ax1.bar([i + 0.2 for i in x], floor, 0.4, label="read floor (one launch of a plain streaming read)")
    ax1.axhline(85, color="tab:red", ls=":", label="85% of copy")
    ax1.set_xticks(list(x), [r["shape"] for r in one])
    ax1.set_ylabel("% of copy bandwidth on the weight bytes, 1 row")
    ax1.set_title("FP8 GEMVs at one row, single cold launches")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RES / "linear.png", dpi=110)


def many_rows_ncu_md(d: dict) -> list[str]:
    """The many-row GEMMs beside cuBLAS under Nsight Compute (one launch each): what each executes."""
    cases = d["cases"]
    lines = ["### Why fp8_gemm_tma trails cuBLAS at 256 rows", "",
             f"Device: {d.get('device', '?')}. Nsight Compute, one launch of each ({d['how']}): {d['note']}. "
             "Duration with the clocks left alone; warp instructions executed (all warps; '-' where the "
             "per-instruction profile did not complete); the rate at which each SM sub-partition issued them; "
             "the largest opcode families; the warps' sampled states (long_sb: a memory result; barrier: a CTA "
             "or cluster barrier; wait: a fixed-latency dependency). Grid: CTAs along x, y, z, K split along z "
             "when its third figure is above 1.", "",
             "| case | kernel | grid (cluster) | us | warp instructions | issued a cycle | largest families "
             "| warp states |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, c in cases.items():
        n = c.get("instructions")
        fams = ", ".join(f"{o['op']} {100 * o['share']:.0f}%" for o in c.get("opcodes", [])[:4]) or "-"
        states = ", ".join(f"{x['reason']} {100 * x['share']:.0f}%" for x in c.get("stalls", [])[:3]) or "-"
        grid = " x ".join(str(g) for g in c["grid"])
        lines.append(f"| {name} | {c['kernel']} | {grid} ({c.get('cluster_size', 1)}) | {c['duration_us']:.1f} | "
                     f"{f'{n / 1e6:.2f} M' if n else '-'} | {c['issued_per_scheduler']:.2f} | {fams} | {states} |")
    f, b, cb = (cases.get(f"{k}_o_256") for k in ("fp8_tma", "dense_tma", "cublas"))
    if f and b and cb and all(c.get("instructions") for c in (f, b, cb)):
        fo = {o["op"]: o["count"] for o in f["opcodes"]}
        bo = {o["op"]: o["count"] for o in b["opcodes"]}
        grown = sorted(fo, key=lambda op: fo[op] - bo.get(op, 0), reverse=True)[:5]
        more = ", ".join(f"{op} +{(fo[op] - bo.get(op, 0)) / 1e6:.2f} M" for op in grown)
        split = b["grid"][2] > 1 and cb["grid"][2] == 1
        lines += ["", f"Reading (o): over the same tiles and K split as dense_gemm_tma (bf16 weights, nothing to "
                  f"convert), fp8_gemm_tma executes {(f['instructions'] - b['instructions']) / 1e6:.2f} M more warp "
                  f"instructions ({f['instructions'] / b['instructions']:.2f}x; most added: {more}: the E4M3 -> "
                  "bf16 conversion of each weight fragment and its shared-memory reads) and takes "
                  f"{f['duration_us']:.1f} us against {b['duration_us']:.1f}; dense_gemm_tma in turn takes "
                  f"{b['duration_us']:.1f} us against cuBLAS's {cb['duration_us']:.1f}"
                  + (", whose tiles run the whole of K where ours split it in two and sum the halves over "
                     "distributed shared memory" if split else "")
                  + f". cuBLAS executes {cb['instructions'] / 1e6:.2f} M. A weight fragment is converted once for "
                  "the tile's x rows, so at 128-row tiles the conversion costs twice as much a product as at the "
                  "256-row tiles the 2048-row cases use (the many-row table above)."]
    return lines + [""]


# The sections of RESULTS.md in order: the JSON files of which at least one must be there (else the
# section is left out; the first names its notes), the files its renderer takes, the renderer.
def _one(name: str, render: Callable[[dict], list[str]]) -> tuple[tuple[str, ...], tuple[str, ...], Callable]:
    return (name,), (name,), render


SECTIONS: list[tuple[tuple[str, ...], tuple[str, ...], Callable[..., list[str]]]] = [
    _one("launch_cost.json", launch_md),
    _one("bench_memory_bound.json", memory_md),
    _one("bench_attn_prefill.json", attention_md),
    _one("bench_attn_dflash.json", attn_dflash_md),
    _one("bench_attn_dflash_ablation.json", attn_ablation_md),
    _one("ncu_attn_dflash_mix.json", attn_mix_md),
    _one("bench_rope_cache.json", rope_cache_md),
    _one("bench_dflash2.json", dflash2_md),
    _one("bench_topk16_ablation.json", topk_ablation_md),
    (("bench_fp8_linear.json", "bench_dense_linear.json"), ("bench_fp8_linear.json", "bench_dense_linear.json"),
     linear_md),
    _one("ncu_many_rows.json", many_rows_ncu_md),
    _one("bench_fp8_gemv_ablation.json", fp8_ablation_md),
    _one("bench_w4a16_gemv_ablation.json", w4a16_ablation_md),
    _one("bench_load_pattern.json", load_pattern_md),
    _one("bench_pdl_chains.json", pdl_chains_md),
    (("bench_drafter_step.json",), ("bench_drafter_step.json", "bench_drafter_step_sm48.json"), drafter_md),
    (("bench_attn_prefill_sm48.json",), ("bench_attn_prefill.json", "bench_attn_prefill_sm48.json"),
     sm48_attention_md),
    _one("build_loop.json", build_md),
]
# Text written by hand for a section (other runs, what a table means) lives in NOTES/<json stem>.md
# and follows that section's tables; RESULTS.md itself is rewritten whole.
NOTES = HERE / "notes"


def notes(json_name: str) -> list[str]:
    p = NOTES / (Path(json_name).stem + ".md")
    return [p.read_text().rstrip("\n"), ""] if p.is_file() else []


def main() -> None:
    loaded = {n: load(n) for _, files, _ in SECTIONS for n in files}  # each file read once
    lines = ["# Benchmark results", "", "Generated by benchmarks/report.py from the JSON files in results/ and the "
             "notes in notes/; GPU numbers come from the benchmark scripts that scripts/gpu_check.sh --bench runs; "
             "each table comes from one run of its script.", "",
             "![chart](results/benchmarks.png)", ""]
    for present, files, render in SECTIONS:
        if any(loaded[n] is not None for n in present):
            lines += render(*(loaded[n] for n in files)) + notes(present[0])
    known = {Path(present[0]).stem for present, _, _ in SECTIONS}
    for p in sorted(NOTES.glob("*.md")):
        if p.stem not in known:
            print(f"report.py: {p.relative_to(HERE)} names no section (one of {', '.join(sorted(known))}); left out")
    (HERE / "RESULTS.md").write_text("\n".join(lines))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("report.py: RESULTS.md written; the charts need matplotlib (pip install matplotlib), left as they were")
        return
    chart(loaded["bench_attn_prefill.json"], loaded["bench_memory_bound.json"], loaded["launch_cost.json"])
    if loaded["bench_fp8_linear.json"]:
        linear_chart(loaded["bench_fp8_linear.json"])


if __name__ == "__main__":
    main()
