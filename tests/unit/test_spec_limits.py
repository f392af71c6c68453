"""The spec language's limits that generation would otherwise pass on to the build or the import:
a chain's or dispatcher's union of arguments, struct bytes per launcher, CUDA's kernel parameter
space, the kernels a chain tries once its instantiated kernels are expanded; each refused at load
time, naming what is over and by how much."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen import loader
from kernelgen.errors import SourceLoc, SpecError
from kernelgen.loader import load_catalog
from kernelgen.model import Arg
from kernelgen.types import ELEMS, SCALARS
from tests.unit.test_structs_setup_spec import TARGETS

RUNTIME = Path(loader.__file__).parent / "runtime" / "src" / "py_launcher.cpp"

HEAD = """\
module: lim
summary: Limits.
sources: [kernels/lim.cu]
structs:
  big: {cpp: lim::Big, fields: {data: "u64[512]"}}
kernels:
"""


def kernel(name: str, args: str, extra: str = "") -> str:
    return (f"  {name}:\n    summary: A kernel.\n    args: {{{args}}}\n    grid: [1, 1, 1]\n    block: [1, 1, 1]\n"
            f"{extra}    examples: [{{}}]\n")


def pointers(prefix: str, n: int) -> str:
    return ", ".join(f"{prefix}{i}: {{type: f32*, size: 1}}" for i in range(n))


def project(tmp_path: Path, spec: str) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "lim.cu").write_text("// lim\n")
    (tmp_path / "specs" / "targets.yaml").write_text(TARGETS)
    (tmp_path / "specs" / "lim.yaml").write_text(spec)
    return tmp_path


def refused(tmp_path: Path, spec: str) -> str:
    with pytest.raises(SpecError) as info:
        load_catalog(project(tmp_path, spec))
    return str(info.value)


def test_the_loader_limits_are_the_runtime_ones() -> None:
    text = RUNTIME.read_text()
    assert f"constexpr int kMaxArgs = {loader.MAX_LAUNCHER_ARGS};" in text
    assert f"constexpr int kMaxStructBytes = {loader.MAX_LAUNCHER_STRUCT_BYTES};" in text


# ---------------------------------------------------------------- a chain's union of arguments

def test_a_chain_whose_union_of_arguments_is_over_the_launcher_limit_is_refused(tmp_path: Path) -> None:
    spec = HEAD + kernel("a", pointers("p", 40)) + kernel("b", "p0: {type: f32*, size: 1}, " + pointers("q", 39))
    spec += "fallbacks:\n  any: [a, b]\n"
    err = refused(tmp_path, spec)
    assert "fallbacks.any: the chain 'any' takes the union of its members' arguments, 79 arguments; a launcher " \
           "takes at most 64" in err, err


def test_a_chain_whose_members_share_their_arguments_is_accepted(tmp_path: Path) -> None:
    spec = HEAD + kernel("a", pointers("p", 40)) + kernel("b", pointers("p", 40))
    spec += "fallbacks:\n  any: [a, b]\n"
    (m,) = load_catalog(project(tmp_path, spec)).modules
    assert [f.name for f in m.fallbacks] == ["any"]


# ---------------------------------------------------------------- struct bytes per launcher

def test_a_kernel_whose_struct_arguments_are_over_the_launcher_limit_is_refused(tmp_path: Path) -> None:
    err = refused(tmp_path, HEAD + kernel("k", "s1: big, s2: big, s3: big"))
    assert "kernels.k.args: struct arguments of 12288 bytes; a launcher takes at most 8192" in err, err


def test_a_chain_whose_union_of_struct_arguments_is_over_the_launcher_limit_is_refused(tmp_path: Path) -> None:
    spec = HEAD + kernel("a", "s1: big, s2: big") + kernel("b", "s3: big") + "fallbacks:\n  any: [a, b]\n"
    err = refused(tmp_path, spec)
    assert "fallbacks.any: the chain 'any' takes the union of its members' arguments, struct arguments of 12288 " \
           "bytes; a launcher takes at most 8192" in err, err


def test_two_struct_arguments_at_the_launcher_limit_are_accepted(tmp_path: Path) -> None:
    (m,) = load_catalog(project(tmp_path, HEAD + kernel("k", "s1: big, s2: big"))).modules
    assert [a.name for a in m.kernels[0].args] == ["s1", "s2"]


# ---------------------------------------------------------------- CUDA's parameter space

def test_a_kernel_over_the_parameter_space_is_refused_naming_it_and_the_total(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader, "MAX_PARAM_BYTES", 4096)  # the older toolkits' limit
    err = refused(tmp_path, HEAD + kernel("k", "n: u8, s: big"))
    assert "kernels.k.args: kernel 'k' takes 4104 bytes of parameters (its args); CUDA takes at most 4096" in err, err


def test_parameter_bytes_follow_cudas_layout() -> None:
    loc = SourceLoc("m.yaml", 1)
    u8 = Arg("a", loc, scalar=SCALARS["u8"])
    f16 = Arg("b", loc, scalar=SCALARS["f16"])
    ptr = Arg("p", loc, elem=ELEMS["f32"], const=True)
    host = Arg("h", loc, scalar=SCALARS["u64"], host=True)
    assert loader.param_bytes([u8, f16], 0) == 4
    assert loader.param_bytes([u8, ptr, f16], 0) == 18  # a pointer: 8 bytes aligned to 8
    assert loader.param_bytes([u8, host], 0) == 1  # host arguments are no parameters
    assert loader.param_bytes([u8], 2) == 64 + 128 + 128  # tensor maps: 128 bytes aligned to 64
    assert loader.MAX_PARAM_BYTES == 32764


# ---------------------------------------------------------------- chains of instantiated kernels

def _instantiated(name: str, n: int) -> str:
    values = ", ".join(str(i) for i in range(n))
    return (f"  {name}:\n    summary: A kernel.\n    symbol: {name}_kernel<{{V}}>\n    instantiate: {{V: [{values}]}}\n"
            f"    args: {{out: {{type: f32*, size: 1}}}}\n    grid: [1, 1, 1]\n    block: [1, 1, 1]\n"
            f"    examples: [{{}}]\n")


def test_a_chain_trying_too_many_kernels_once_expanded_is_refused(tmp_path: Path) -> None:
    spec = HEAD + _instantiated("a", 40) + _instantiated("b", 25) + "fallbacks:\n  any: [a, b]\n"
    err = refused(tmp_path, spec)
    assert f"fallbacks.any: the chain tries 65 kernels once its instantiated kernels stand for their instances; " \
           f"the limit is {loader.MAX_CHAIN_LAUNCHES}" in err, err


def test_a_chain_at_the_expanded_limit_is_accepted(tmp_path: Path) -> None:
    spec = HEAD + _instantiated("a", 40) + _instantiated("b", 24) + "fallbacks:\n  any: [a, b]\n"
    (m,) = load_catalog(project(tmp_path, spec)).modules
    assert len(m.fallbacks[0].members) == loader.MAX_CHAIN_LAUNCHES == 64


# ---------------------------------------------------------------- name lengths

def test_an_instance_name_too_long_says_its_length_the_limit_and_how_to_shorten_it(tmp_path: Path) -> None:
    name = "k" * 60
    spec = HEAD + (f"  {name}:\n    summary: A kernel.\n    symbol: kern<{{A}}, {{B}}>\n"
                   "    instantiate: {A: [fp8_e4m3], B: [fp8_e5m2]}\n"
                   "    args: {x: 'const {A}*', y: 'const {B}*', out: {type: f32*, size: 1}}\n"
                   "    grid: [1, 1, 1]\n    block: [1, 1, 1]\n    examples: [{}]\n")
    err = refused(tmp_path, spec)
    assert f"instance name '{name}_fp8_e4m3_fp8_e5m2' is 78 characters long; the limit is 64 (give the kernel an " \
           "'instance_name': a shorter pattern with every axis in it; or give the kernel a shorter name)" in err, err


def test_a_kernel_name_too_long_says_its_length(tmp_path: Path) -> None:
    err = refused(tmp_path, HEAD + kernel("k" * 65, "out: {type: f32*, size: 1}"))
    assert "kernel name '" + "k" * 65 + "' is 65 characters long; the limit is 64 (use a shorter kernel name)" in err, err


def test_a_name_of_invalid_characters_is_still_refused_as_such(tmp_path: Path) -> None:
    err = refused(tmp_path, HEAD + kernel("k-1", "out: {type: f32*, size: 1}"))
    assert "'k-1' is not a valid kernel name" in err, err
