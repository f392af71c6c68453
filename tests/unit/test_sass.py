"""kernelgen.sass and `kernelgen sass`: cuobjdump's listings parsed (opcode families, predicates,
resource lines), spec symbols matched to demangled functions (template arguments, defaults left
out, integer suffixes, return types), the report with and without a previous JSON, and the
command's errors. The command over a real build runs in tests/compile/test_sass_cli.py."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from kernelgen import sass
from kernelgen.cli import main

ROOT = Path(__file__).resolve().parents[2]

SASS_TEXT = """
Fatbin elf code:
================
arch = sm_90a
	code for sm_90a
		Function : _Z3fooPf
	.headerflags	@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                     /* 0x00000a00ff017b82 */
                                                                              /* 0x000fe20000000800 */
        /*0010*/                   IMAD.SHL.U32 R2, R0, 0x10, RZ ;           /* 0x0000001000027824 */
        /*0020*/               @!PT LDS RZ, [RZ] ;                           /* 0x00000000ff00f984 */
        /*0030*/               @P0 IMAD R3, R4, R5, RZ ;                     /* 0x0000000504030224 */
        /*0040*/                   EXIT ;                                     /* 0x000000000000794d */
        /*0050*/                   NOP;                                       /* 0x0000000000007918 */
		..........
		Function : _Z3barIfLi0EEvPT_
        /*0000*/                   HGMMA.64x32x16.F32.BF16 R88, R104, gdesc[UR16], RZ ;  /* 0x00 */
        /*0010*/              @!UP1 BRA 0x40 ;                               /* 0x00 */
"""

LOOP_TEXT = """
		Function : _Z4loopPf
        /*0000*/                   MOV R1, c[0x0][0x28] ;                     /* 0x00 */
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;                    /* 0x00 */
        /*0020*/                   FFMA R3, R3, R3, R3 ;                      /* 0x00 */
        /*0030*/                   NOP ;                                      /* 0x00 */
        /*0040*/               @P0 BRA 0x20 ;                                 /* 0x00 */
        /*0050*/                   ISETP.NE.AND P1, PT, R2, 0x4, PT ;         /* 0x00 */
        /*0060*/              @!P1 BRA P2, 0x10 ;                             /* 0x00 */
        /*0070*/                   BRA.U !UP0, 0x90 ;                         /* 0x00 */
        /*0080*/                   EXIT ;                                     /* 0x00 */
        /*0090*/                   BRA 0x90;                                  /* 0x00 */
		Function : _Z6noloopPf
        /*0000*/                   EXIT ;                                     /* 0x00 */
"""

RES_TEXT = """
Resource usage:
 Common:
  GLOBAL:0
 Function _Z3fooPf:
  REG:40 STACK:8 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z3barIfLi0EEvPT_:
  REG:168 STACK:0 SHARED:1024 LOCAL:4 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_sass_listing_by_function_and_family() -> None:
    code = sass.parse_sass(SASS_TEXT)
    assert code["_Z3fooPf"] == collections.Counter({"LDC": 1, "IMAD": 2, "LDS": 1, "EXIT": 1})
    assert code["_Z3barIfLi0EEvPT_"] == collections.Counter({"HGMMA": 1, "BRA": 1})


def test_loops_are_backward_branches() -> None:
    loops = sass.parse_loops(LOOP_TEXT)
    # the outer loop 0x10..0x60 (5 instructions, the NOP not counted) holds the inner 0x20..0x40
    # (2); the forward branch and the branch to itself after EXIT close no loop
    assert loops["_Z4loopPf"] == [(5, 0x10, 0x60), (2, 0x20, 0x40)]
    assert loops["_Z6noloopPf"] == []


def test_resource_lines() -> None:
    res = sass.parse_res_usage(RES_TEXT)
    assert res["_Z3fooPf"] == {"REG": 40, "STACK": 8, "SHARED": 0, "LOCAL": 0}
    assert res["_Z3barIfLi0EEvPT_"]["REG"] == 168 and res["_Z3barIfLi0EEvPT_"]["LOCAL"] == 4


@pytest.mark.parametrize("signature,expect", [
    ("dflash2_conv2_kernel(__nv_bfloat16 const*, unsigned int)", ("dflash2_conv2_kernel", ())),
    ("void dflash2_topk16_kernel<__nv_bfloat16, 0>(__nv_bfloat16*, int*)", ("dflash2_topk16_kernel",
                                                                            ("__nv_bfloat16", "0"))),
    ("void k<128u, (int)4, foo<2> >(float*)", ("k", ("128", "4", "foo<2>"))),
    ("attn_prefill_64_kernel<128>", ("attn_prefill_64_kernel", ("128",))),
    ("ns::inner::kern(float)", ("ns::inner::kern", ())),
])
def test_names_and_template_arguments(signature: str, expect: tuple) -> None:
    assert sass.name_and_args(signature) == expect


def test_symbols_match_their_functions_only() -> None:
    f_bf16 = "void dflash2_topk16_kernel<__nv_bfloat16, 0>(__nv_bfloat16*, int*, float*)"
    f_f32 = "void dflash2_topk16_kernel<float, 0>(float*, int*, float*)"
    assert sass.matches("dflash2_topk16_kernel<__nv_bfloat16>", f_bf16)  # the default argument left out
    assert not sass.matches("dflash2_topk16_kernel<__nv_bfloat16>", f_f32)
    assert sass.matches("dflash2_topk16_kernel<float, 0>", f_f32)
    assert not sass.matches("dflash_attn_bf16_kernel", "dflash_attn_bf16_split_kernel(float*)")
    assert sass.matches("attn_prefill_64_kernel<128>", "void attn_prefill_64_kernel<128u>(float const*)")


def _code(instr: int, regs: int = 64, **ops: int) -> sass.KernelCode:
    c = sass.KernelCode("f()", regs, 0, 0, collections.Counter(ops or {"FFMA": instr}))
    return c


def test_report_and_comparison() -> None:
    now = {"m.a": _code(0, 96, FFMA=60, IMAD=30, LOP3=10), "m.b": _code(5)}
    lines = sass.report(now, ops=2)
    assert lines[0].startswith("m.a") and "96 regs" in lines[0] and "100 instructions" in lines[0]
    assert lines[1].split() == ["FFMA", "60", "IMAD", "30"]
    before = json.loads(sass.to_json({"hopper": {"m.a": _code(0, 80, FFMA=60, IMAD=50, LOP3=10)}}))["hopper"]
    lines = sass.report(now, ops=2, against=before)
    assert "(was 80 regs, stack 0, 120 instructions: -20, -16.7%)" in lines[0]
    assert lines[1].split() == ["IMAD", "-20"]  # only the families that changed
    assert lines[2].startswith("m.b") and lines[2].endswith("(new)")


def test_report_lists_loops() -> None:
    c = _code(100)
    c.loops = [(40, 0x100, 0x370), (12, 0x200, 0x2b0), (3, 0x10, 0x30)]
    lines = sass.report({"m.a": c}, loops=2)
    assert lines[1] == "    loops: 40 (0x100-0x370), 12 (0x200-0x2b0)"
    before = json.loads(sass.to_json({"hopper": {"m.a": _code(100)}}))["hopper"]
    before["m.a"]["loops"] = [[52, 0x100, 0x3d0]]
    lines = sass.report({"m.a": c}, against=before, loops=1)
    assert lines[1] == "    loops: 40 (0x100-0x370)  (was 52)"
    assert sass.report({"m.b": _code(5)}, loops=3)[1] == "    loops: none"


def test_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(ROOT), "sass", "attn_dflsh", "--build-dir", str(tmp_path)]) == 2
    assert "did you mean 'attn_dflash'" in capsys.readouterr().err
    assert main(["--root", str(ROOT), "sass", "--build-dir", str(tmp_path)]) == 2
    assert "no target is built" in capsys.readouterr().err
    assert main(["--root", str(ROOT), "sass", "-t", "hopper", "--build-dir", str(tmp_path)]) == 2
    assert "target hopper is not built" in capsys.readouterr().err
    assert main(["--root", str(ROOT), "sass", "--ops", "-1", "--build-dir", str(tmp_path)]) == 2
    assert "--ops -1" in capsys.readouterr().err
    assert main(["--root", str(ROOT), "sass", "--loops", "-2", "--build-dir", str(tmp_path)]) == 2
    assert "--loops -2" in capsys.readouterr().err
    bad = tmp_path / "before.json"
    bad.write_text("[1, 2]")
    assert main(["--root", str(ROOT), "sass", "--build-dir", str(tmp_path), "--against", str(bad)]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "hopper").mkdir()  # a build folder without the module's object
    if sass.cuobjdump_tool() is not None:
        assert main(["--root", str(ROOT), "sass", "silu_mul", "-t", "hopper", "--build-dir", str(tmp_path)]) == 2
        assert "module silu_mul is not built for hopper" in capsys.readouterr().err


def test_names_select_modules_kernels_and_chains() -> None:
    from kernelgen.loader import load_catalog

    catalog = load_catalog(ROOT)
    picked = {m.name: [k.name for k in ks] for m, ks in sass.select(catalog, ["silu_mul", "prefill_attn_dflash_bf16_split",
                                                                               "fp8_linear.fp8_linear"])}
    assert picked["silu_mul"] == [k.name for k in catalog.module("silu_mul").kernels]
    assert picked["attn_dflash"] == ["prefill_attn_dflash_bf16_split"]
    chain = next(fb for fb in catalog.module("fp8_linear").fallbacks if fb.name == "fp8_linear")
    assert sorted((r.module, r.kernel) for r in chain.members) == sorted(
        (m, k) for m in ("fp8_gemv_rt", "fp8_linear") for k in picked.get(m, []))
