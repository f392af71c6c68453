"""The drafter attention's FP8 kernels in 64-key tiles, built beside the installed ones.

The FP8 kernels of attn_dflash take their keys per tile from DFLASH_FP8_TILE_KEYS (32 unless a
build sets it): 64-key tiles convert each thread's own copied pieces of the cache, tile t's V and
tile t + 1's K while tile t's softmax runs, and issue QK^T as wgmma m64n64k16 (dflash_attn.cuh).
This test builds attn_dflash for a target of its own, ``hopper_fp8w`` (hopper's entry with the
build define DFLASH_FP8_TILE_KEYS=64), in a temporary project, and runs test_attn_dflash's FP8
checks on it: every case against the f32 reference, each member bitwise repeatable, split against
unsplit (the same bits where one cluster covers the keys, with chunks of whole 64-key tiles), the
chain's member, the split counters left zero.

Needs a compute capability 9.0 GPU and nvcc; the build takes about 20 s on 16 cores.
"""

from __future__ import annotations

import pytest

from tests.gpu import guards_build

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):  # pragma: no cover
    pytest.skip("the hopper build of the 64-key FP8 tiles needs a compute capability 9.0 GPU",
                allow_module_level=True)

from tests.gpu import test_attn_dflash as base  # noqa: E402

TARGET = "hopper_fp8w"
TILE = 64


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    folder = guards_build.build_variant(
        tmp_path_factory, ("attn_dflash",), ("attention", "common"), "dflash_fp8w", TARGET, "hopper",
        {"build": {"defines": {"DFLASH_FP8_TILE_KEYS": TILE}}})
    return guards_build.load(folder, "attn_dflash")


def test_build_is_its_own(wide):
    assert wide.TARGET == TARGET
    assert base.attn_dflash.TARGET != TARGET


@pytest.mark.parametrize("case", base.CASES, ids=base.case_id)
def test_direct(wide, case):
    base.check_direct(case, True, mod=wide, tile=TILE)
