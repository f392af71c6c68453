"""Realistic mistakes in a small project's specs: each is one error naming file:line, the field and
what to do, and the JSON Schema accepts what the loader accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelgen import loader, schema
from kernelgen.errors import SpecError
from kernelgen.loader import load_catalog, load_targets
from kernelgen.yamlio import YMap, YNode, YSeq, load

TARGETS = (Path(__file__).resolve().parents[1] / "fixtures" / "project" / "specs" / "targets.yaml").read_text()

SOURCE = """\
#pragma once
#include <cstdint>
__global__ void add_kernel(const float* x, float* out, uint32_t n) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += x[i];
}
__global__ void tick_kernel() {}
"""

SPEC = """\
module: m
summary: Adds.
sources: [kernels/m.cu]
kernels:
  add:
    symbol: add_kernel
    summary: out += x
    args: {x: const f32*, out: f32*, n: u32}
    grid: ["div_ceil(n, 256)", 1, 1]
    block: [256, 1, 1]
    examples: [{n: 1000}]
"""


def project(root: Path, spec: str = SPEC, source: str = SOURCE, targets: str = TARGETS) -> Path:
    (root / "specs").mkdir(parents=True, exist_ok=True)
    (root / "kernels").mkdir(exist_ok=True)
    (root / "specs" / "targets.yaml").write_text(targets)
    (root / "specs" / "m.yaml").write_text(spec)
    (root / "kernels" / "m.cu").write_text(source)
    return root


def sub(old: str, new: str, text: str = SPEC) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def refused(root: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_catalog(root)
    return str(info.value)


def test_the_base_spec_loads(tmp_path: Path) -> None:
    (m,) = load_catalog(project(tmp_path)).modules
    assert m.kernels[0].symbol == "add_kernel"


# ---------------------------------------------------------------- the JSON Schema agrees with the loader

def _plain(n: YNode) -> object:
    if isinstance(n, YMap):
        return {str(k.value): _plain(v) for k, v in n.items}
    if isinstance(n, YSeq):
        return [_plain(i) for i in n.items]
    return n.value


def _jsonable(v: object) -> object:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def _schema_errors(text: str) -> list[str]:
    """The JSON Schema's errors for ``text`` as an editor's YAML parser reads it and as kernelgen
    reads it (expressions split at commas rejoined)."""
    jsonschema = pytest.importorskip("jsonschema")
    v = jsonschema.Draft202012Validator(schema.json_schema("module"))
    docs = [_jsonable(yaml.safe_load(text)), _plain(load("m.yaml", text.encode()))]
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for d in docs for e in v.iter_errors(d)]


ACCEPTED = [
    ("kernel without parameters", sub("    symbol: add_kernel\n", "    symbol: tick_kernel\n").replace(
        "    args: {x: const f32*, out: f32*, n: u32}\n", "    args: {}\n    host_args: {n: u32}\n")),
    ("let in flow style", sub("    block: [256, 1, 1]\n",
                              "    block: [256, 1, 1]\n    let: {t: div_ceil(n, 256), u: max(t, 1, n)}\n")),
    ("constants in flow style", sub("kernels:\n", "constants: {A: 4, B: max(A, 2), C: min(1, 2, B)}\nkernels:\n")),
    ("kernel in flow style", sub(
        SPEC[SPEC.index("  add:"):],
        "  add: {symbol: add_kernel, summary: out += x, args: {x: const f32*, out: f32*, n: u32}, "
        "grid: [div_ceil(n, 256), 1, 1], block: [256, 1, 1], shared_mem: max(n, 4), examples: [{n: 1000}]}\n")),
    ("argument long form in flow style", sub("x: const f32*", "x: {type: const f32*, size: max(n, 4)}")),
]


@pytest.mark.parametrize("case,text", ACCEPTED, ids=[c for c, _ in ACCEPTED])
def test_what_the_loader_accepts_the_schema_accepts(tmp_path: Path, case: str, text: str) -> None:
    load_catalog(project(tmp_path, text))
    assert not _schema_errors(text), case


REFUSED = [
    ("empty defines", SPEC + "build: {defines: {}}\n", 12, "build.defines: the mapping is empty"),
    ("empty nvcc flags", SPEC + "build: {nvcc_flags: []}\n", 12,
     "build.nvcc_flags: the list is empty; expected a list of at least one item (leave 'nvcc_flags' out for none)"),
    ("empty let", sub("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    let: {}\n"), 11,
     "kernels.add.let: the mapping is empty; expected a mapping of names to integer expressions"),
    ("empty tensor maps", sub("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    tensor_maps: {}\n"), 11,
     "kernels.add.tensor_maps: the mapping is empty"),
    ("empty variant symbols", sub("    symbol: add_kernel\n", "    variants: {arg: n, symbols: {}}\n"), 6,
     "kernels.add.variants.symbols: the mapping is empty"),
    ("empty module summary", sub("summary: Adds.", "summary: ''"), 2, "summary: the summary is empty"),
    ("blank kernel summary", sub("summary: out += x", "summary: '  '"), 7, "kernels.add.summary: the summary is empty"),
    ("target listed twice", sub("    summary: out += x\n", "    summary: out += x\n    targets: [hopper, hopper]\n"),
     8, "kernels.add.targets[1]: target 'hopper' is listed twice"),
    ("chain listed twice", sub("    symbol: add_kernel\n", "    symbol: add_kernel\n    applies_if: n > 0\n")
     + "  add2:\n    extends: add\nfallbacks:\n  c: [add2, add, add2]\n", 16,
     "fallbacks.c[2]: kernel 'add2' appears twice in the chain (also item 0)"),
]


@pytest.mark.parametrize("case,text,line,fragment", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_the_loader_refuses_the_schema_refuses(tmp_path: Path, case: str, text: str, line: int,
                                                    fragment: str) -> None:
    msg = refused(project(tmp_path, text))
    assert msg.startswith(f"specs/m.yaml:{line}: ") and fragment in msg, msg
    assert "got a mapping" not in msg and "got a list" not in msg, msg
    assert _schema_errors(text), case


# ---------------------------------------------------------------- one located error for each mistake

BAD = [
    ("negative shared memory", sub("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    shared_mem: -4\n"), 11,
     "kernels.add.shared_mem: shared_mem is -4 bytes for examples[0] (n=1000): dynamic shared memory cannot be "
     "negative"),
    ("negative size", sub("x: const f32*", "x: {type: const f32*, size: n - 2000}"), 8,
     "kernels.add.args.x.size: the size of 'x' is -1000 for examples[0] (n=1000): a size cannot be negative"),
    ("argument named like a constant", sub("kernels:\n", "constants: {n: 3}\nkernels:\n"), 9,
     "kernels.add.args: argument 'n' is also a module constant (line 4)"),
    ("host argument named like a constant", sub("kernels:\n", "constants: {h: 3}\nkernels:\n").replace(
        "    grid:", "    host_args: {h: u32}\n    grid:"), 10,
     "kernels.add.host_args: host argument 'h' is also a module constant (line 4)"),
    ("host argument named like an argument", sub("    grid:", "    host_args:\n      n: u32\n    grid:"), 10,
     "host argument 'n' is also an argument (line 8)"),
    ("let named like a pointer argument", sub("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    let: {x: n}\n"),
     11, "kernels.add.let.x: let name 'x' is already an argument's name (line 8)"),
    ("let named like a constant", sub("kernels:\n", "constants: {T: 3}\nkernels:\n").replace(
        "    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    let: {T: n}\n"), 12, "let name 'T' is already a "
     "constant's name (line 4)"),
    ("tensor map named like a let name", sub("    block: [256, 1, 1]\n", "    block: [256, 1, 1]\n    let: {t: n}\n"
                                             "    tensor_maps: {t: {array: x, dims: [n], box: [4]}}\n"), 12,
     "tensor map 't' has the name of a let name (line 11)"),
    ("constant named like a kernel", sub("kernels:\n", "constants:\n  A: 1\n  add: 2\nkernels:\n"), 6,
     "constants.add: constant 'add' has the name of kernel 'add' (line 8)"),
    ("chain in a chain", SPEC + "  add2:\n    extends: add\nfallbacks:\n  c1: [add2, add]\n  c2: [c1, add]\n", 16,
     "fallbacks.c2: 'c1' is a fallback chain (line 15): a chain's members are kernels (list the kernels of 'c1' "
     "instead: add2, add)"),
    ("chain naming itself", SPEC + "  add2:\n    extends: add\nfallbacks:\n  c1: [c1, add]\n", 15,
     "fallbacks.c1: chain 'c1' names itself: a chain's members are kernels"),
    ("misspelt symbol", sub("symbol: add_kernel", "symbol: add_kernl"), 6,
     "kernels.add.symbol: 'add_kernl' is not a __global__ function of kernels/m.cu or the project files it "
     "includes (did you mean 'add_kernel'? it is a __global__ function of the sources)"),
    ("extends without a symbol", SPEC + "  add2:\n    extends: add\n    symbol: null\n", 12,
     "kernels.add2.symbol: the kernel gives no 'symbol', so it launches its own name, 'add2', which is not a "
     "__global__ function of kernels/m.cu"),
    ("extends with args of its own", SPEC + "  add2:\n    extends: add\n    args: {x: const f32*, out: f32*}\n"
     "    grid: [1, 1, 1]\n    examples: [{}]\n", 12,
     "but the spec gives 2 (const f32* x, f32* out) (make the spec's args list the kernel's parameters, in order, "
     "with the same types; this kernel's args replace those of 'add', which it extends, whole (extends does not "
     "merge mappings): list every argument)"),
    ("extends with args that leave an example's name out", SPEC + "  add2:\n    extends: add\n"
     "    args: {x: const f32*, out: f32*}\n    grid: [1, 1, 1]\n", 11,
     "kernels.add2.examples[0]: 'n' is not an integer argument ('n' is in the args of 'add', which this kernel "
     "extends,"),
    ("extends with args that leave a name out", SPEC + "  add2:\n    extends: add\n    args: {x: const f32*}\n", 9,
     "kernels.add2.grid[0]: undefined name 'n' ('n' is in the args of 'add', which this kernel extends, but this "
     "kernel's own args replace those whole (extends does not merge mappings): list every argument, or give this "
     "kernel the entries that use it)"),
    ("yaml list not closed", sub("block: [256, 1, 1]", "block: [256, 1, 1"), 11,
     "YAML syntax error: did not find expected ',' or ']', in the list opened by '[' at line 10, column 12 "
     "(close it with ']')"),
]


@pytest.mark.parametrize("case,text,line,fragment", BAD, ids=[c[0] for c in BAD])
def test_each_mistake_is_one_located_error(tmp_path: Path, case: str, text: str, line: int, fragment: str) -> None:
    msg = refused(project(tmp_path, text))
    assert msg.startswith(f"specs/m.yaml:{line}: ") and fragment in msg, msg


def test_a_symbol_in_an_included_project_header_is_found(tmp_path: Path) -> None:
    root = project(tmp_path, sub("kernels/m.cu", "kernels/top.cu").replace("add_kernel", "more_kernel"))
    (root / "kernels" / "top.cu").write_text('#pragma once\n#include "m.cu"\n#include <cuda_bf16.h>\n'
                                             '#include <kernels/more.cuh>\n')
    (root / "kernels" / "more.cuh").write_text("__global__ void more_kernel(const float* x, float* out, "
                                               "unsigned n);\n")
    (m,) = load_catalog(root).modules
    assert m.kernels[0].symbol == "more_kernel"
    # a misspelling is still an error, with the included header's kernels among the suggestions
    (root / "specs" / "m.yaml").write_text(sub("kernels/m.cu", "kernels/top.cu").replace("add_kernel", "more_kernl"))
    assert "did you mean 'more_kernel'?" in refused(root)


@pytest.mark.parametrize("extra,why", [
    ('#include "vendor/kernels.cuh"\n', 'kernels/m.cu:8 includes "vendor/kernels.cuh", which is not a file of the '
                                       "project"),
    ("#include <cub/cub.cuh>\n", "kernels/m.cu:8 includes <cub/cub.cuh>, which is not a file of the project"),
    ("#define KERNEL(name) __global__ void name()\nKERNEL(add_kernl, 1) {}\n",
     "kernels/m.cu:8 defines macro KERNEL, which may declare __global__ functions"),
])
def test_a_symbol_the_text_cannot_rule_out_is_a_warning_printed_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, why: str) -> None:
    root = project(tmp_path, sub("symbol: add_kernel", "symbol: add_kernl"), SOURCE + extra)
    loader._WARNED.clear()
    load_catalog(root)
    load_catalog(root)
    err = capsys.readouterr().err
    assert err.count("kernelgen: warning:") == 1, err
    assert err.startswith("kernelgen: warning: specs/m.yaml:6: kernels.add.symbol: 'add_kernl' is not a __global__ "
                          "function of kernels/m.cu"), err
    assert f"kernelgen cannot be sure: {why}" in err, err


def test_sources_without_any_kernel_leave_the_symbol_to_the_build(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    load_catalog(project(tmp_path, source="// stub\n#include <cstdint>\n"))
    assert "warning" not in capsys.readouterr().err


# ---------------------------------------------------------------- targets.yaml

HOPPER = TARGETS[TARGETS.index("hopper:"):]


@pytest.mark.parametrize("old,new,line,fragment", [
    ("  max_threads_per_block: 1024\n", "  max_threads_per_block: 2048\n", 4,
     "hopper.max_threads_per_block: 2048 threads per block is more than CUDA allows on any GPU (1024)"),
    ("  max_block_dims: [1024, 1024, 64]\n", "  max_block_dims: [1024, 1024, 128]\n", 5,
     "hopper.max_block_dims[2]: block dimension z of 128 is more than CUDA allows on any GPU (64"),
    ("  max_shared_mem_per_sm: 233472\n", "  max_shared_mem_per_sm: 200000\n", 10,
     "hopper.max_shared_mem_per_sm: max_shared_mem_per_sm (200000) is less than max_shared_mem_per_block_optin "
     "(232448) plus reserved_shared_mem_per_block (1024)"),
    ("  max_threads_per_sm: 2048\n", "  max_threads_per_sm: 1000\n", 8,
     "hopper.max_threads_per_sm: 1000 threads per SM is not a whole number of 32-thread warps"),
    ("  max_threads_per_sm: 2048\n", "  max_threads_per_sm: 512\n", 8,
     "hopper.max_threads_per_sm: max_threads_per_block (1024) is more than max_threads_per_sm (512)"),
    ('  arch: sm_90a\n  compute_capability: "9.0"\n', '  arch: sm_80\n  compute_capability: "8.0"\n', 12,
     "hopper.max_cluster_size: max_cluster_size 8 on compute capability 8.0: thread-block clusters need compute "
     "capability 9.0"),
])
def test_a_target_table_that_no_gpu_has_is_refused_at_its_line(tmp_path: Path, old: str, new: str, line: int,
                                                               fragment: str) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(sub(old, new, HOPPER))
    with pytest.raises(SpecError) as info:
        load_targets(path, tmp_path)
    assert str(info.value).startswith(f"targets.yaml:{line}: ") and fragment in str(info.value), str(info.value)
    jsonschema = pytest.importorskip("jsonschema")
    v = jsonschema.Draft202012Validator(schema.json_schema("targets"))
    if "max_shared_mem_per_sm" not in fragment and "max_threads_per_sm (" not in fragment:  # comparisons: loader only
        assert list(v.iter_errors(_jsonable(yaml.safe_load(path.read_text())))), fragment


def test_two_targets_of_one_compute_capability_load(tmp_path: Path) -> None:
    # a variant build for the same GPU (the mma.sync path's sm_90 beside sm_90a): both load
    path = tmp_path / "targets.yaml"
    path.write_text(HOPPER + HOPPER.replace("hopper:", "hopper_b:").replace("sm_90a", "sm_90"))
    targets = load_targets(path, tmp_path)
    assert [(t.name, t.compute_capability) for t in targets] == [("hopper", (9, 0)), ("hopper_b", (9, 0))]
