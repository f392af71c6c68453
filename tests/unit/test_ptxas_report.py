"""What `kernelgen build` reports from ptxas after a build that succeeds (whose compiler output
it otherwise hides): serialized warpgroup MMAs and register spills, per kernel, once each. The
lines are ptxas's own (CUDA 13.0, sm_90a)."""

from __future__ import annotations

from kernelgen.build import demangle, ptxas_report

SERIALIZED = ("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized "
              "due to insufficient register resources for the function "
              "'_Z26dflash_fp8_gemm_tma_kernelPK13__nv_bfloat16PK13__nv_fp8_e4m3PKfPS_jjj14CUtensorMap_stS8_'")
SPILL = ("ptxas warning : Registers are spilled to local memory in function "
         "'_Z42dflash_fp8_gemm_n128_row_scaled_m16_kernelPK13__nv_bfloat16PK13__nv_fp8_e4m3PKfPS_jjj', "
         "4 bytes spill stores, 4 bytes spill loads")


def test_serialized_mmas_and_spills_are_reported_per_kernel_once() -> None:
    lines = ["[12/83] Building CUDA object kg_hopper/CMakeFiles/kg_obj_fp8_linear.dir/src/fp8_linear.cu.o",
             SERIALIZED, SPILL, "[13/83] Linking CUDA shared library x.so", SERIALIZED]
    assert ptxas_report(lines) == [
        "dflash_fp8_gemm_tma_kernel: wgmma.mma_async instructions are serialized due to insufficient register "
        "resources (C7512)",
        "dflash_fp8_gemm_n128_row_scaled_m16_kernel: Registers are spilled to local memory, 4 bytes spill stores, "
        "4 bytes spill loads",
    ]


def test_other_output_is_not_reported() -> None:
    assert ptxas_report(["[1/2] Building CUDA object a.o", "ptxas info    : Used 168 registers, used 1 barriers",
                         "kernels/x.cu(3): warning #177-D: variable \"v\" was declared but never referenced"]) == []


def test_demangle_takes_the_kernel_name() -> None:
    assert demangle("_Z26dflash_fp8_gemm_tma_kernelPK13__nv_bfloat16") == "dflash_fp8_gemm_tma_kernel"
    assert demangle("_ZN2ns6kernelILi4EEEvPf") == "ns::kernel<...>"
    assert demangle("_ZN11gemv_stream4GemvINS_9Nvfp4RowsELi1ELNS_4WorkE0ELi1ELi2EE6launchEPK13__nv_bfloat16") == \
        "gemv_stream::Gemv<...>::launch"
    assert demangle("_Z21dflash2_topk16_kernelIfEvPKT_") == "dflash2_topk16_kernel<...>"
    assert demangle("plain_c_name") == "plain_c_name"


def test_source_warnings_keep_the_projects_own_files(tmp_path) -> None:
    """nvcc's and the host compiler's warnings on the project's kernel sources and headers are
    reported relative to the project; generated files, build folders and headers outside the
    project (the toolkit, a third-party include folder, one kept under third_party/) are not; repeats
    are dropped."""
    from kernelgen.build import source_warnings

    (tmp_path / "kernels").mkdir()
    lines = [
        "[1/3] Building CUDA object CMakeFiles/m.dir/src/rownorm.cu.o",
        f'{tmp_path}/kernels/rownorm.cu(3): warning #177-D: variable "t" was declared but never referenced',
        "      int t = 3;",
        'Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"',
        f'{tmp_path}/kernels/rownorm.cu(3): warning #177-D: variable "t" was declared but never referenced',
        f"{tmp_path}/kernels/common/util.cuh:12:7: warning: unused variable 'k' [-Wunused-variable]",
        f"{tmp_path}/generated/hopper/src/rownorm.cu(60): warning #550-D: variable set but never used",
        f"{tmp_path}/build/hopper/x.cpp:1:1: warning: from the build folder",
        "/usr/local/cuda/include/cuda_fp16.hpp(12): warning #20-D: toolkit",
        "/opt/cutlass/include/cute/tensor.hpp:9:3: warning: third party [-Wshadow]",
        f"{tmp_path}/third_party/cutlass/include/cute/tensor.hpp(9): warning #20-D: vendored in the project",
        f"{tmp_path}/kernels/rownorm.cu(9): error: not a warning",
    ]
    assert source_warnings(lines, tmp_path) == [
        'kernels/rownorm.cu:3: variable "t" was declared but never referenced [#177-D]',
        "kernels/common/util.cuh:12: unused variable 'k' [-Wunused-variable]",
    ]
