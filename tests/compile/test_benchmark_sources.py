"""The benchmark programs that include kernel sources still compile without a GPU, so that a change
of the interfaces they use shows here rather than on the GPU machine:

* the FP8 GEMV ablation (benchmarks/fp8_gemv_ablation.cu) instantiates fp8_gemv_rt.cu's Gemv with
  each Work value beside the shipped kernels;
* the drafter attention ablation (benchmarks/attn_dflash_ablation.cu) instantiates dflash_attn.cuh's
  attn_cta with each of its Work values, for BF16 and FP8 caches;
* the GEMV load-pattern study (benchmarks/load_pattern.cu) uses the shared PTX helpers.

Compiled once each for sm_90a (the ablations' target) with the project's toolkit: the PTX for
the entry points, the cubin for the SASS below.

An ablation times a kernel with part of its work left out, and what is left must really run:
ptxas removes MMAs whose results nothing reads, and the conversions that only feed them (the
attention ablation's no_partials variant once lost its products and softmax that way, and its
table showed their time as the partial states'). So each ablation is also compiled to SASS, and
its variants' tensor-core instructions (and, where kept, the FP8 / NVFP4 conversions: the GEMVs'
bf16x2 multiplies, the attention's E4M3 -> f16 conversions) are counted against the shipped
kernel's."""

from __future__ import annotations

import collections
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from kernelgen.sass import MNEMONIC, parse_sass
from tests.compile.sass import Tool, compile_cubin, opcode_counts, sass

pytestmark = pytest.mark.build

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A benchmark source's cubin (its PTX beside it), compiled once for the module's tests."""
    done: dict[str, Path] = {}

    def get(source: str) -> Path:
        if source not in done:
            done[source] = compile_cubin(BENCH / source, tmp_path_factory.mktemp(Path(source).stem))
        return done[source]

    return get


def ptx_entries(cubin: Path) -> set[str]:
    return set(re.findall(r"\.entry\s+(\w+)", cubin.with_suffix(".ptx").read_text()))


def test_fp8_gemv_ablation_compiles(built: Callable[[str], Path]) -> None:
    entries = ptx_entries(built("fp8_gemv_ablation.cu"))
    # the shipped kernels and an ablation kernel per (rows tile, Work) that the program times
    for name in ("dflash_fp8_gemv_rt2_kernel", "dflash_fp8_gemv_rt2_16_kernel"):
        assert any(name in e for e in entries), sorted(entries)
    ablations = [e for e in entries if "ablation_kernel" in e]
    assert len(ablations) == 6, sorted(entries)  # 2 row tiles x (loads, convert, mma)


def test_attn_dflash_ablation_compiles(built: Callable[[str], Path]) -> None:
    entries = ptx_entries(built("attn_dflash_ablation.cu"))
    assert any("dflash_attn_bf16_split_kernel" in e for e in entries), sorted(entries)
    ablations = [e for e in entries if "ablation_kernel" in e]
    assert len(ablations) == 10, sorted(entries)  # 2 caches x (full, no_fold, no_partials, loads, reads)


def test_load_pattern_compiles(built: Callable[[str], Path]) -> None:
    entries = ptx_entries(built("load_pattern.cu"))
    # 3 copy shapes x (bf16, fp8) layouts, plus the streaming-read floor's two kernels
    assert len([e for e in entries if "pattern_kernel" in e]) == 6, sorted(entries)


def _conversions(c: collections.Counter[str]) -> int:
    """bf16x2 multiplies (HMUL2, or HFMA2 with a -0 addend): one per converted pair of weights or
    cache values in these kernels."""
    return c["HMUL2"] + c["HFMA2"]


def _one(counts: dict[str, collections.Counter[str]], pattern: str) -> collections.Counter[str]:
    found = [c for name, c in counts.items() if re.search(pattern, name)]
    assert len(found) == 1, (pattern, sorted(counts))
    return found[0]


# The attention's FP8 tiles convert to f16 with one instruction a pair of bytes.
E4M3_TO_F16 = "F2FP.F16.E4M3.UNPACK_B"


def test_attn_dflash_ablation_keeps_its_work(cuobjdump: Tool, built: Callable[[str], Path]) -> None:
    text = sass(cuobjdump, built("attn_dflash_ablation.cu"))  # one listing, counted two ways
    counts, whole = parse_sass(text), parse_sass(text, MNEMONIC)
    for fp8 in (0, 1):
        # Work: 0 full, 1 no_fold, 2 no_partials, 3 loads, 4 reads
        v = {w: _one(counts, rf"ablation_kernelILb{fp8}ELN11dflash_attn4WorkE{w}E") for w in range(5)}
        shipped = _one(counts, "dflash_attn_fp8_split_kernel" if fp8 else "dflash_attn_bf16_split_kernel")
        mma = {w: v[w]["HGMMA"] for w in v}
        assert mma[0] == shipped["HGMMA"] > 0, (fp8, mma, shipped["HGMMA"])
        assert mma[1] == mma[0] and mma[2] == mma[0], f"a variant that keeps the products lost some: {mma}"
        assert mma[3] == 0 and mma[4] == 0, f"loads and reads leave the products out: {mma}"
        vw = {w: _one(whole, rf"ablation_kernelILb{fp8}ELN11dflash_attn4WorkE{w}E") for w in range(5)}
        shipped_w = _one(whole, "dflash_attn_fp8_split_kernel" if fp8 else "dflash_attn_bf16_split_kernel")
        conv = {w: vw[w][E4M3_TO_F16] for w in vw}
        if fp8:  # every variant but reads converts the FP8 tiles
            assert conv[0] == shipped_w[E4M3_TO_F16] > 0 and len({conv[w] for w in range(4)}) == 1, conv
            assert conv[4] == 0, conv
        else:
            assert not any(conv.values()), conv


@pytest.mark.parametrize("source, shipped", [
    ("fp8_gemv_ablation.cu", [r"^_Z\d+dflash_fp8_gemv_rt2_kernel", r"^_Z\d+dflash_fp8_gemv_rt2_16_kernel"]),
    ("w4a16_gemv_ablation.cu", [r"^_Z\d+w4a16_gemv_rt1_kernel"]),
])
def test_gemv_ablations_keep_their_work(cuobjdump: Tool, built: Callable[[str], Path], source: str,
                                        shipped: list[str]) -> None:
    """gemv_stream's Work: 1 loads, 2 convert (no products), 3 mma (no conversions), one kernel per
    row tile MT. Over the row tiles, the mma variants hold as many MMAs as the shipped kernels (one
    kernel per row tile, or one holding both), the convert variants as many conversions."""
    counts = opcode_counts(cuobjdump, built(source))
    variants: dict[int, list[collections.Counter[str]]] = collections.defaultdict(list)
    for name, c in counts.items():
        if m := re.search(r"ablation_kernelILi(\d)ELN11gemv_stream4WorkE(\d)E", name):
            variants[int(m.group(2))].append(c)
    assert sorted(variants) == [1, 2, 3] and all(len(v) == 2 for v in variants.values()), sorted(counts)
    ref = [_one(counts, p) for p in shipped]
    ref_mma, ref_conv = sum(c["HMMA"] for c in ref), sum(_conversions(c) for c in ref)
    assert ref_mma > 0 and ref_conv > 0, (ref_mma, ref_conv)
    total = {w: (sum(c["HMMA"] for c in cs), sum(_conversions(c) for c in cs)) for w, cs in variants.items()}
    assert total[1] == (0, 0), f"loads: {total[1]}"
    assert total[2] == (0, ref_conv), f"convert: {total[2]}, the shipped kernels' conversions {ref_conv}"
    assert total[3] == (ref_mma, 0), f"mma: {total[3]}, the shipped kernels' MMAs {ref_mma}"
