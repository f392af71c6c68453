"""What the built kernels compiled to, without a GPU: each catalog kernel's registers, stack,
static SASS instructions (in all and by opcode family) and loops, read with cuobjdump from the
build's object of each module (``kernelgen build``'s build/<target>/.../src/<module>.cu.o, as the
build's compile_commands.json names it).

``kernelgen sass`` prints them, writes them as JSON and compares against such a JSON, so that a
change to a kernel can be judged by the code it makes before it is run.
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kernelgen.errors import KernelgenError

# An instruction line: /*0130*/, an optional predicate (@P0, @!PT, @!UP1), the opcode up to its
# first dot (INSTR) or with its modifiers (MNEMONIC: F2FP.F16.E4M3.UNPACK_B).
INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
MNEMONIC = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
_FUNCTION = re.compile(r"Function\s*:\s*(\S+)")
# A branch's target: BRA 0x5910, @!P1 BRA P2, 0x5910, BRA.U !UP0, 0x40 (its address in hex).
_ADDRESS = re.compile(r"/\*([0-9a-f]{4,})\*/")
_BRANCH = re.compile(r"\bBRA(?:\.[A-Z0-9_]+)*\s+(?:!?U?P[T0-9]+\s*,\s*)?0x([0-9a-f]+)")
_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+?):\s*$")
_RES_VALUES = re.compile(r"(REG|STACK|LOCAL|SHARED):(\d+)")


def find_binary(name: str) -> Path | None:
    """``name`` (cuobjdump, nvdisasm, ...) from the CUDA toolkit kernelgen builds with, the PATH,
    or a PyPI wheel of the toolkit (nvidia/cu13/bin)."""
    candidates: list[Path] = []
    try:
        from kernelgen.toolkit import find_toolkit

        candidates.append(find_toolkit(echo=lambda line: print(line, file=sys.stderr)).nvcc.parent / name)
    except Exception:  # no toolkit: the wheels may still hold the tool
        pass
    if found := shutil.which(name):
        candidates.append(Path(found))
    candidates += [Path(p) / "nvidia" / "cu13" / "bin" / name for p in sys.path if p.endswith("site-packages")]
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


Tool = tuple[Path, dict[str, str]]


def cuobjdump_tool() -> Tool | None:
    """cuobjdump and the environment that lets it find nvdisasm, or None without them."""
    tool, disasm = find_binary("cuobjdump"), find_binary("nvdisasm")
    if tool is None or disasm is None:
        return None
    return tool, {**os.environ, "NVDISASM_PATH": str(disasm.parent)}


def run_tool(tool: Tool, *args: str) -> str:
    """The tool's output for these arguments; a KernelgenError with its message when it fails."""
    exe, env = tool
    res = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=600)
    if res.returncode != 0:
        raise KernelgenError(f"{exe.name} {' '.join(args)} failed: {res.stderr.strip()[-1000:]}")
    return res.stdout


def parse_sass(text: str, instr: re.Pattern[str] = INSTR) -> dict[str, collections.Counter[str]]:
    """{mangled function: Counter(opcode family -> instructions)} from ``cuobjdump -sass``: the
    mnemonic up to its first dot (IMAD.SHL.U32 counts as IMAD; with ``instr=MNEMONIC``, the whole
    mnemonic); NOPs (mostly the padding after a function's end) are left out."""
    counts: dict[str, collections.Counter[str]] = {}
    current = None
    for line in text.splitlines():
        if m := _FUNCTION.search(line):
            current = counts.setdefault(m.group(1), collections.Counter())
        elif current is not None and (m := instr.search(line)) and m.group(1) != "NOP":
            current[m.group(1)] += 1
    return counts


def parse_loops(text: str) -> dict[str, list[tuple[int, int, int]]]:
    """{mangled function: its loops, largest first} from ``cuobjdump -sass``: each backward branch
    (to an address before its own) closes a loop from its target to itself, given as
    (instructions, first address, branch address), NOPs not counted; nested loops each appear."""
    listing: dict[str, list[tuple[int, bool, int | None]]] = {}  # (address, counted, branch target)
    current = None
    for line in text.splitlines():
        if m := _FUNCTION.search(line):
            current = listing.setdefault(m.group(1), [])
        elif current is not None and (ins := INSTR.search(line)):
            addr = int(_ADDRESS.search(line).group(1), 16)
            br = _BRANCH.search(line)
            current.append((addr, ins.group(1) != "NOP", int(br.group(1), 16) if br else None))
    out: dict[str, list[tuple[int, int, int]]] = {}
    for fn, lines in listing.items():
        spans = {(target, addr) for addr, _, target in lines if target is not None and target < addr}
        loops = [(sum(1 for a, counted, _ in lines if counted and lo <= a <= hi), lo, hi) for lo, hi in spans]
        out[fn] = sorted(loops, key=lambda x: (-x[0], x[1]))
    return out


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """{mangled function: {REG, STACK, LOCAL, SHARED}} from ``cuobjdump -res-usage``."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        if m := _RES_FUNCTION.match(line):
            current = out.setdefault(m.group(1), {})
        elif current is not None and (vals := _RES_VALUES.findall(line)):
            current.update({k: int(v) for k, v in vals})
            current = None
    return out


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled names (cu++filt or c++filt; names stay as they are without one)."""
    tool = find_binary("cu++filt") or find_binary("c++filt")
    if tool is None or not names:
        return {n: n for n in names}
    res = subprocess.run([str(tool)], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=60)
    lines = res.stdout.splitlines() if res.returncode == 0 else []
    return dict(zip(names, lines)) if len(lines) == len(names) else {n: n for n in names}


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside <...> and (...)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _norm_arg(arg: str) -> str:
    arg = re.sub(r"^\((?:unsigned )?(?:int|long|char|short|bool)\)", "", arg.replace(" ", ""))
    return re.sub(r"^(-?\d+)[uUlL]*$", r"\1", arg)


def name_and_args(signature: str) -> tuple[str, tuple[str, ...]]:
    """A function's name and template arguments from a demangled signature or a spec's symbol:
    'void f<float, 0>(float*, int)' -> ('f', ('float', '0'))."""
    depth, head = 0, signature
    for i, ch in enumerate(signature):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            head = signature[:i]
            break
    head = _split_top(head, " ")[-1] if head.strip() else head
    if "<" in head and head.endswith(">"):
        name, _, rest = head.partition("<")
        return name, tuple(_norm_arg(a) for a in _split_top(rest[:-1], ","))
    return head, ()


def matches(symbol: str, signature: str) -> bool:
    """Whether a spec's kernel symbol names this function: the same name, and the symbol's
    template arguments leading the function's (the rest are defaults the symbol leaves out)."""
    sname, sargs = name_and_args(symbol)
    fname, fargs = name_and_args(signature)
    return sname == fname and fargs[: len(sargs)] == sargs


@dataclass
class KernelCode:
    """One compiled kernel function."""

    function: str  # demangled
    registers: int = 0
    stack: int = 0
    local: int = 0
    opcodes: collections.Counter[str] = field(default_factory=collections.Counter)
    loops: list[tuple[int, int, int]] = field(default_factory=list)  # (instructions, first, last address)

    @property
    def instructions(self) -> int:
        return sum(self.opcodes.values())

    def to_json(self) -> dict:
        return {"function": self.function, "registers": self.registers, "stack": self.stack, "local": self.local,
                "instructions": self.instructions, "opcodes": dict(self.opcodes.most_common()),
                "loops": [list(loop) for loop in self.loops]}


def module_objects(build_dir: Path, target: str) -> dict[str, Path]:
    """The build's object of each module for ``target``, as the build's own record names it: the
    output of each compile of ``generated/<target>/src/<module>.cu`` in
    ``build/<target>/compile_commands.json`` (CMake writes it at every configure, the ones ninja
    runs included), so that objects an earlier configuration left in the tree are never read.
    {module: object}; empty when the target has not been configured."""
    try:
        commands = json.loads((build_dir / target / "compile_commands.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, Path] = {}
    for entry in commands:
        source = Path(entry.get("file", ""))
        if source.suffix != ".cu" or source.parent.name != "src" or source.parent.parent.name != target \
                or source.parent.parent.parent.name != "generated" or "output" not in entry:
            continue
        found[source.stem] = Path(entry.get("directory", build_dir / target)) / entry["output"]
    return found


def read_object(tool: Tool, obj: Path) -> dict[str, KernelCode]:
    """{demangled function: its code} for every kernel function of one object (one cuobjdump
    run: its resource lines, then the SASS)."""
    text = run_tool(tool, "-res-usage", "-sass", str(obj))
    code, res, loops = parse_sass(text), parse_res_usage(text), parse_loops(text)
    names = demangle(sorted(set(code) | set(res)))
    out = {}
    for mangled, pretty in names.items():
        r = res.get(mangled, {})
        out[pretty] = KernelCode(pretty, r.get("REG", 0), r.get("STACK", 0), r.get("LOCAL", 0),
                                 code.get(mangled, collections.Counter()), loops.get(mangled, []))
    return out


def kernel_symbols(kernel) -> list[tuple[str, str]]:
    """(label suffix, symbol) of each function a spec kernel launches (one, or one per variant)."""
    if kernel.variants is not None:
        return [(f"[{kernel.variants.on}={value}]", sym) for value, sym in kernel.variants.symbols]
    return [("", kernel.symbol)]


def collect(catalog, build_dir: Path, target: str, names: list[str] | None) -> dict[str, KernelCode]:
    """{module.kernel[variant]: code} for the catalog's kernels (or those named: MODULE or
    MODULE.KERNEL, or a chain) built for ``target``."""
    tool = cuobjdump_tool()
    if tool is None:
        raise KernelgenError("kernelgen sass needs cuobjdump and nvdisasm: the CUDA toolkit's, or pip install "
                             "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    objects = module_objects(build_dir, target)
    wanted = []
    for module, kernels in select(catalog, names):
        ks = [k for k in kernels if target in k.targets]
        if not ks:
            continue
        obj = objects.get(module.name)
        if obj is None or not obj.is_file():
            where = f"no {obj}" if obj else f"no compile of it in {build_dir / target / 'compile_commands.json'}"
            raise KernelgenError(f"module {module.name} is not built for {target} ({where}); "
                                 f"run: kernelgen build --target {target}")
        wanted.append((module, ks, obj))
    # cuobjdump a module at a time, several at once
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        read = list(pool.map(lambda w: read_object(tool, w[2]), wanted))
    out: dict[str, KernelCode] = {}
    for (module, ks, obj), functions in zip(wanted, read):
        for k in ks:
            for suffix, symbol in kernel_symbols(k):
                found = [f for f in functions if matches(symbol, f)]
                label = f"{module.name}.{k.name}{suffix}"
                if not found:
                    raise KernelgenError(f"{label}: no function {symbol} in {obj}")
                for i, f in enumerate(found):
                    out[label if len(found) == 1 else f"{label}#{i}"] = functions[f]
    return out


def select(catalog, names: list[str] | None) -> list[tuple[object, list]]:
    """[(module, its kernels asked for)]: every kernel, or per name a module's kernels, a kernel, or
    a chain's or dispatcher's members (names as ``kernelgen plan`` takes them)."""
    if not names:
        return [(m, list(m.kernels)) for m in catalog.modules]
    from kernelgen.errors import did_you_mean
    from kernelgen.plan_cli import find, kernel_of

    picked: dict[str, tuple[object, list]] = {}
    modules = {m.name: m for m in catalog.modules}

    def add(module, kernel) -> None:
        entry = picked.setdefault(module.name, (module, []))
        if kernel not in entry[1]:
            entry[1].append(kernel)

    for name in names:
        if name in modules:
            for k in modules[name].kernels:
                add(modules[name], k)
            continue
        try:
            m, _, members = find(catalog, name)
        except KernelgenError:
            close = did_you_mean(name, list(modules))
            if close.startswith("did you mean"):
                raise KernelgenError(f"no module or kernel '{name}' ({close})") from None
            raise
        if members is None:
            short = name.split(".", 1)[1] if "." in name else name
            add(m, next(k for k in m.kernels if k.name == short))
        else:
            for ref in members:
                add(modules[ref.module], kernel_of(catalog, ref))
    return list(picked.values())


def report(code: dict[str, KernelCode], ops: int = 0, against: dict | None = None, loops: int = 0) -> list[str]:
    """One line a kernel (registers, stack, instructions; with ``against``, a previous JSON's
    figures and the change), then with ``ops`` its largest opcode families (or, with ``against``,
    those that changed most), then with ``loops`` its largest loops (instructions and addresses;
    with ``against``, beside the previous JSON's largest ones, in order of size)."""
    width = max((len(k) for k in code), default=10)
    lines = []
    for label, c in code.items():
        before = (against or {}).get(label)
        line = f"{label:<{width}}  {c.registers:4d} regs  stack {c.stack:4d}  {c.instructions:6d} instructions"
        if before:
            d = c.instructions - before["instructions"]
            pct = 100.0 * d / before["instructions"] if before["instructions"] else 0.0
            line += (f"  (was {before['registers']} regs, stack {before['stack']}, {before['instructions']} "
                     f"instructions: {d:+d}, {pct:+.1f}%)")
        elif against is not None:
            line += "  (new)"
        lines.append(line)
        if ops:
            if before:
                old = collections.Counter(before.get("opcodes", {}))
                delta = {op: c.opcodes.get(op, 0) - old.get(op, 0) for op in set(c.opcodes) | set(old)}
                changed = sorted((op for op in delta if delta[op]), key=lambda op: (-abs(delta[op]), op))[:ops]
                if changed:
                    lines.append("    " + "  ".join(f"{op} {delta[op]:+d}" for op in changed))
            else:
                lines.append("    " + "  ".join(f"{op} {n}" for op, n in c.opcodes.most_common(ops)))
        if loops:
            now = ", ".join(f"{n} ({lo:#x}-{hi:#x})" for n, lo, hi in c.loops[:loops]) or "none"
            line = f"    loops: {now}"
            if before and "loops" in before:
                was = [n for n, _, _ in before["loops"][:loops]]
                line += f"  (was {', '.join(map(str, was)) or 'none'})"
            lines.append(line)
    return lines


# The figures report() reads of each kernel of a --json file (function, local, opcodes and loops
# are optional; other keys are left alone).
_JSON_FIGURES = ("registers", "stack", "instructions")


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def json_problem(data: object) -> str | None:
    """What makes ``data`` (a parsed JSON file) other than what :func:`to_json` writes, naming
    where (``hopper: scale.scale_f32: registers``); None when :func:`report` can compare with
    it: {target: {kernel: {registers, stack, instructions, and optionally function, local,
    opcodes: {family: count}, loops: [[instructions, first, last], ...]}}}."""

    def kind(value: object) -> str:
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:37] + "..."

    if not isinstance(data, dict):
        return f"not an object of targets (got {kind(data)})"
    for target, kernels in data.items():
        if not isinstance(kernels, dict):
            return f"{target}: not an object of kernels (got {kind(kernels)})"
        for label, figures in kernels.items():
            where = f"{target}: {label}"
            if not isinstance(figures, dict):
                return f"{where}: not an object of figures (got {kind(figures)})"
            for key in _JSON_FIGURES:
                if key not in figures:
                    return f"{where}: no '{key}' (each kernel has {', '.join(_JSON_FIGURES)})"
                if not _is_count(figures[key]):
                    return f"{where}: {key}: not a count (got {kind(figures[key])})"
            if "function" in figures and not isinstance(figures["function"], str):
                return f"{where}: function: not a string (got {kind(figures['function'])})"
            if "local" in figures and not _is_count(figures["local"]):
                return f"{where}: local: not a count (got {kind(figures['local'])})"
            opcodes = figures.get("opcodes", {})
            if not isinstance(opcodes, dict):
                return f"{where}: opcodes: not an object of opcode families (got {kind(opcodes)})"
            for op, n in opcodes.items():
                if not _is_count(n):
                    return f"{where}: opcodes: {op}: not a count (got {kind(n)})"
            loops = figures.get("loops", [])
            if not isinstance(loops, list):
                return f"{where}: loops: not a list (got {kind(loops)})"
            for i, loop in enumerate(loops):
                if not (isinstance(loop, list) and len(loop) == 3 and all(_is_count(x) for x in loop)):
                    return f"{where}: loops[{i}]: not [instructions, first address, last address] (got {kind(loop)})"
    return None


def to_json(per_target: dict[str, dict[str, KernelCode]]) -> str:
    return json.dumps({t: {k: c.to_json() for k, c in code.items()} for t, code in per_target.items()},
                      indent=1) + "\n"
