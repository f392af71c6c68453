"""The name-collision corpus and spec projects that place names from it in every role.

The corpus is read from what the generator emits (every identifier in the rendered files of
the fixture project and of the catalog), so it follows the templates as they change, plus
the reserved words of each output language.
"""

from __future__ import annotations

import functools
import keyword
import re
import shutil
from pathlib import Path

from kernelgen import loader
from kernelgen.emit import render_catalog
from kernelgen.emit.rust import _NOT_RAW, _RUST_KEYWORDS
from kernelgen.loader import load_catalog
from kernelgen.macro_names import MACRO_NAMES
from tests.conftest import FIXTURE, REPO

# Every role a spec gives a name.
KINDS = ("module", "kernel", "argument", "host_argument", "constant", "chain", "instance_name", "axis")

DEFAULTS = {
    "module": "probe_mod",
    "kernel": "probe_k",
    "argument": "probe_n",
    "host_argument": "probe_h",
    "constant": "PROBE_THREADS",
    "chain": "probe_chain",
    "instance_name": "probe_inst",
    "axis": "PROBE_T",
}

TARGETS = """\
hopper:
  arch: sm_90a
  compute_capability: "9.0"
  max_threads_per_block: 1024
  max_block_dims: [1024, 1024, 64]
  max_shared_mem_per_block_optin: 232448
"""

KERNEL_SOURCE = """\
#pragma once
#include <cstdint>
static __global__ void probe_kernel(float* p0, uint32_t p1) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p1) p0[i] = 1.0f;
}
template <typename T>
__global__ void probe_t_kernel(T* p0, uint32_t p1) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p1) p0[i] = T(1.0f);
}
"""

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.lru_cache(maxsize=1)
def emitted_identifiers() -> frozenset[str]:
    """Every identifier in the generated files of the fixture project and of the catalog."""
    words: set[str] = set()
    for root in (FIXTURE, REPO):
        for text in render_catalog(load_catalog(root)).values():
            words.update(_WORD.findall(text))
    return frozenset(words)


def reserved_words() -> frozenset[str]:
    """Reserved words of C++ and C, Python and Rust, and the macros of included headers that
    the generated code spells."""
    py = set(keyword.kwlist) | set(keyword.softkwlist)
    return frozenset(loader.CPP_KEYWORDS | py | _RUST_KEYWORDS | _NOT_RAW)


@functools.lru_cache(maxsize=1)
def corpus() -> tuple[str, ...]:
    return tuple(sorted(emitted_identifiers() | reserved_words() | {"EOF", "INT64_MAX", "out", "p", "err", "x"}))


def spec_text(names: dict[str, str], *, extra_args: tuple[str, ...] = ()) -> str:
    """A module spec using ``names[kind]`` for each role (the defaults elsewhere)."""
    n = {**DEFAULTS, **names}
    more = "".join(f"      {a}: u32\n" for a in extra_args)
    return f"""\
module: {n['module']}
summary: Names from the collision corpus in every role.
sources: [kernels/probe.cu]
constants:
  {n['constant']}: 128
kernels:
  {n['kernel']}:
    symbol: probe_kernel
    summary: One thread per element.
    args:
      buf: {{type: f32*, size: {n['argument']}}}
      {n['argument']}: u32
    host_args:
      {n['host_argument']}: u32
{more}    grid: [div_ceil({n['argument']}, {n['constant']}), 1, 1]
    block: [{n['constant']}, 1, 1]
    skip_if: [{n['argument']} == 0]
    applies_if: [{n['host_argument']} == 1]
    examples:
      - {{{n['argument']}: 1000, {n['host_argument']}: 1}}
  probe_second:
    symbol: probe_kernel
    summary: The same kernel again, for the chain.
    args:
      buf: {{type: f32*, size: {n['argument']}}}
      {n['argument']}: u32
    host_args:
      {n['host_argument']}: u32
    grid: [div_ceil({n['argument']}, {n['constant']}), 1, 1]
    block: [{n['constant']}, 1, 1]
    skip_if: [{n['argument']} == 0]
    examples:
      - {{{n['argument']}: 1000, {n['host_argument']}: 1}}
  probe_typed:
    symbol: probe_t_kernel<{{{n['axis']}}}>
    summary: One instance per element type.
    instantiate:
      {n['axis']}: [f32, bf16]
    instance_name: {n['instance_name']}_{{{n['axis']}}}
    args:
      buf: {{type: "{{{n['axis']}}}*", size: {n['argument']}}}
      {n['argument']}: u32
    grid: [div_ceil({n['argument']}, 128), 1, 1]
    block: [128, 1, 1]
    skip_if: [{n['argument']} == 0]
    examples:
      - {{{n['argument']}: 1000}}
fallbacks:
  {n['chain']}: [{n['kernel']}, probe_second]
"""


def write_project(root: Path, names: dict[str, str]) -> Path:
    """A project holding one module spec that uses ``names``; returns the spec's path."""
    if root.exists():
        shutil.rmtree(root)
    (root / "specs").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "kernels" / "probe.cu").write_text(KERNEL_SOURCE)
    module = names.get("module", DEFAULTS["module"])
    spec = root / "specs" / f"{module}.yaml"
    spec.write_text(spec_text(names))
    return spec


# Files a module must not be named after: per-target generated files and runtime headers.
# (and "targets" and "project": specs/targets.yaml and specs/project.yaml are the target
# registry and the project file, not modules)
TARGET_FILE_STEMS = frozenset({"types", "plan_codes", "abi", "runtime", "runtime_tma", "python", "torch_fast", "lib", "targets",
                              "project", "target_table"})


# Plain YAML words that are not strings (or that YAML 1.1 reads as booleans): a spec must quote them.
YAML_WORDS = frozenset("y Y yes Yes YES n N no No NO on On ON off Off OFF true True TRUE false False FALSE "
                       "null Null NULL".split())


def expected_refusal(name: str, kind: str) -> bool:
    """Whether kernelgen must refuse ``name`` in role ``kind`` of :func:`spec_text`'s spec
    (else it generates, and the generated code compiles)."""
    if kind == "instance_name":  # the names that reach generated code are the instances'
        return any(expected_refusal(f"{name}_{e}", "kernel") for e in ("f32", "bf16"))
    pattern = loader._MODULE if kind == "module" else loader._IDENT
    if name in YAML_WORDS - {"y", "Y", "n", "N"} or not pattern.fullmatch(name):
        return True
    if name in loader.RESERVED or name in MACRO_NAMES:
        return True
    if name.startswith("_") or "__" in name or name[:3].lower() == "kg_" or name.endswith("_t"):
        return True
    if kind == "module":
        return name in loader.PACKAGE_NAMES or name in TARGET_FILE_STEMS or name == "hopper"
    instances = {f"{DEFAULTS['instance_name']}_{e}" for e in ("f32", "bf16")}
    launchers = {DEFAULTS["kernel"], DEFAULTS["chain"], "probe_second", "probe_typed"} | instances
    if kind in ("kernel", "chain"):
        taken = (launchers | _functions(launchers) | {DEFAULTS["constant"]} | set(loader.MODULE_ATTRIBUTES))
        taken -= {DEFAULTS[kind], *_functions({DEFAULTS[kind]})}
        return name in taken or bool(_functions({name}) & taken)
    # arguments and axes share the kernel's names with each other and with the constants
    taken = {"buf", DEFAULTS["argument"], DEFAULTS["host_argument"], DEFAULTS["constant"], DEFAULTS["axis"]}
    if kind == "constant":
        return name in taken - {DEFAULTS["constant"]} or name in launchers | _functions(launchers) \
            or name in loader.MODULE_ATTRIBUTES
    taken.discard(DEFAULTS[kind])
    return name in taken


_BATCH_HEAD = """\
module: {module}
summary: Names from the collision corpus, many at once.
sources: [kernels/probe.cu]
constants:
  PROBE_THREADS: 128
{constants}kernels:
"""

_KERNEL = """\
  {name}:
    symbol: {symbol}
    summary: One thread per element.
    args:
      buf: {{type: f32*, size: probe_n}}
      probe_n: u32
{more_args}{host}    grid: [div_ceil(probe_n, PROBE_THREADS), 1, 1]
    block: [PROBE_THREADS, 1, 1]
    skip_if: [probe_n == 0]
    examples:
      - {{probe_n: 1000{example}}}
"""

_TYPED = """\
  {name}:
    symbol: probe_t_kernel<{{{axis}}}>
    summary: One instance per element type.
    instantiate:
      {axis}: [f32, bf16]
    instance_name: {instance}_{{{axis}}}
    args:
      buf: {{type: "{{{axis}}}*", size: probe_n}}
      probe_n: u32
    grid: [div_ceil(probe_n, 128), 1, 1]
    block: [128, 1, 1]
    skip_if: [probe_n == 0]
    examples:
      - {{probe_n: 1000}}
"""


def kernel_source(nargs: int) -> str:
    """probe_kernel (float*, uint32_t), probe_t_kernel<T> (T*, uint32_t) and probe_wide_kernel
    (float* and ``nargs`` uint32_t)."""
    params = ", ".join(["float* p0"] + [f"uint32_t p{i + 1}" for i in range(nargs)])
    return KERNEL_SOURCE + f"static __global__ void probe_wide_kernel({params}) {{ (void)p0; }}\n"


def batch_modules(kind: str, names: list[str], module: str = "probe_mod") -> dict[str, str]:
    """Spec files (name -> text) placing every name of ``names`` in role ``kind`` at once."""
    if kind == "module":
        one = _KERNEL.format(name="probe_k", symbol="probe_kernel", more_args="", host="", example="")
        return {m: _BATCH_HEAD.format(module=m, constants="") + one for m in names}
    constants = "".join(f"  {n}: 128\n" for n in names) if kind == "constant" else ""
    text = _BATCH_HEAD.format(module=module, constants=constants)
    if kind in ("argument", "host_argument"):
        more = "".join(f"      {n}: u32\n" for n in names) if kind == "argument" else ""
        host = ("    host_args:\n" + "".join(f"      {n}: u32\n" for n in names)) if kind == "host_argument" else ""
        example = "".join(f", {n}: 1" for n in names)
        symbol = "probe_wide_kernel" if kind == "argument" else "probe_kernel"
        text += _KERNEL.format(name="probe_k", symbol=symbol, more_args=more, host=host, example=example)
        return {module: text}
    if kind == "kernel":
        for n in names:
            text += _KERNEL.format(name=n, symbol="probe_kernel", more_args="", host="", example="")
        return {module: text}
    if kind in ("instance_name", "axis"):
        for i, n in enumerate(names):
            axis, instance = (n, f"probe_inst{i}") if kind == "axis" else ("PROBE_T", n)
            text += _TYPED.format(name=f"probe_typed{i}", axis=axis, instance=instance)
        return {module: text}
    text += _KERNEL.format(name="probe_k", symbol="probe_kernel", more_args="", host="", example="")
    text += _KERNEL.format(name="probe_second", symbol="probe_kernel", more_args="", host="", example="")
    if kind == "chain":
        text += "fallbacks:\n" + "".join(f"  {n}: [probe_k, probe_second]\n" for n in names)
    return {module: text}


def write_batch(root: Path, modules: dict[str, str], nargs: int = 0) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "specs").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "specs" / "targets.yaml").write_text(TARGETS)
    (root / "kernels" / "probe.cu").write_text(kernel_source(nargs))
    for name, text in modules.items():
        (root / "specs" / f"{name}.yaml").write_text(text)


def _functions(launchers: set[str]) -> set[str]:
    """The names of the launchers' generated companions: ``plan_<name>`` and ``sizes_<name>``."""
    return {f"{p}{n}" for n in launchers for p in FUNCTION_PREFIXES}


FUNCTION_PREFIXES = ("plan_", "sizes_")


def batches(kind: str, names: list[str], size: int) -> list[list[str]]:
    """Groups of accepted names that can share one spec: no name is another's ``plan_`` or
    ``sizes_`` function (launchers and instances), another's ``_c`` header (modules) or a
    ``<name>_f32``/``_bf16`` instance of another (instance names)."""
    def depth(n: str) -> int:
        d = 0
        while n.startswith(FUNCTION_PREFIXES):
            n, d = n[n.index("_") + 1:], d + 1
        return d

    def key(n: str) -> int:
        if kind == "module":
            d = 0
            while n.endswith("_c"):
                n, d = n[:-2], d + 1
            return d
        if kind in ("kernel", "chain"):
            return depth(n)
        if kind == "instance_name":
            return 2 * depth(n) + int(n.endswith(("_f32", "_bf16")))
        return 0

    groups: dict[int, list[str]] = {}
    for n in names:
        groups.setdefault(key(n), []).append(n)
    out = []
    for _, g in sorted(groups.items()):
        out += [g[i:i + size] for i in range(0, len(g), size)]
    return out


def random_names(rng, pool: tuple[str, ...] | None = None) -> dict[str, str]:
    """One name per role, each drawn from the corpus (or kept at its default), for
    :func:`spec_text`."""
    pool = pool or corpus()
    return {kind: rng.choice(pool) for kind in KINDS if rng.random() < 0.6}


def sample_modules(per_kind: int = 20, modules: int = 4) -> dict[str, str]:
    """A buildable sample: per role, a module holding ``per_kind`` accepted names that the
    templates themselves emit (the names most likely to collide with generated code)."""
    emitted = emitted_identifiers()
    # identifiers the templates spell themselves (outside their {{ }} and {% %} tags) come first
    fixed: set[str] = set()
    for path in (REPO / "src" / "kernelgen" / "templates").rglob("*.j2"):
        fixed.update(_WORD.findall(re.sub(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", " ", path.read_text(), flags=re.S)))
    must = ["out", "p", "err", "x", "holds", "sizes", "kernel", "ran", "member", "ready", "o", "v", "Outcome"]
    ranked = must + sorted((fixed & emitted) - set(must)) + sorted(emitted - fixed - set(must))
    out: dict[str, str] = {}
    for kind in KINDS:
        accepted = [n for n in ranked if not expected_refusal(n, kind)]
        size = modules if kind == "module" else per_kind
        group = batches(kind, accepted[: size * 3], size)[0]
        if kind == "module":
            out.update(batch_modules(kind, group))
        else:
            out.update(batch_modules(kind, group, module=f"probe_{kind}"))
    return out
