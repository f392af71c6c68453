"""The typed model of specs and targets: frozen dataclasses built only by the loader."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from kernelgen.errors import SourceLoc
from kernelgen.expr import Node
from kernelgen.names import DEFAULT as DEFAULT_NAMING
from kernelgen.names import Naming
from kernelgen.types import ElemType, ScalarType
from kernelgen.wording import count

# Scalar and element types live in the type registry (kernelgen.types).
Scalar = ScalarType
Elem = ElemType


@dataclass(frozen=True)
class StructField:
    """One field of a struct passed by value: a scalar or another struct of the module (nested by
    value), or a fixed array of ``count`` of either."""

    name: str
    scalar: Scalar | None  # None for a nested struct
    count: int  # 0: a plain scalar or struct; n: an array `T[n]`
    offset: int  # in bytes, in the C layout
    loc: SourceLoc
    cpp: str = ""  # the C++ type's member, where its name is not the field's (a reserved word: in, from)
    struct: Struct | None = None  # the nested struct, for a field whose type is a struct of the module

    @property
    def member(self) -> str:
        """The C++ type's data member of the field."""
        return self.cpp or self.name

    @property
    def align(self) -> int:
        """The alignment of one element: a scalar's size, or the nested struct's alignment."""
        return self.struct.align if self.struct is not None else self.scalar.bits // 8

    @property
    def elem_size(self) -> int:
        """The bytes of one element (a scalar, or the nested struct)."""
        return self.struct.size if self.struct is not None else self.scalar.bits // 8

    @property
    def size(self) -> int:
        return self.elem_size * max(self.count, 1)

    @property
    def type_name(self) -> str:
        """The spec's name of one element's type: a scalar type or a struct of the module."""
        return self.struct.name if self.struct is not None else self.scalar.name

    @property
    def spelling(self) -> str:
        return f"{self.type_name}[{self.count}]" if self.count else self.type_name


@dataclass(frozen=True)
class Struct:
    """A struct type passed by value (a module's ``structs:`` entry), with its C layout."""

    name: str  # the spec's name, used as an argument type
    cpp: str  # the kernel's C++ type
    header: str | None  # a source declaring ``cpp`` for the C++ API (None: forward-declared)
    fields: tuple[StructField, ...]
    size: int
    align: int
    loc: SourceLoc
    module: str = ""
    # The header and the project's headers it includes (quoted includes, transitively), as
    # (path from the project root, path under the package's include/): what the package installs.
    files: tuple[tuple[str, str], ...] = ()

    @property
    def stateless(self) -> bool:
        """No fields: a functor whose type is the whole message (``SiluOp``). Launchers pass a
        value-initialised one (``SiluOp{}``); callers pass nothing."""
        return not self.fields

    @property
    def over_aligned(self) -> int:
        """The struct's alignment where its ``align`` makes it more than its fields give, else 0."""
        natural = max((f.align for f in self.fields), default=1)
        return self.align if self.align > natural else 0


@dataclass(frozen=True)
class Arg:
    """One kernel parameter (or host argument when ``host`` is true)."""

    name: str
    loc: SourceLoc
    scalar: Scalar | None = None  # set for scalars
    elem: Elem | None = None  # set for pointers
    const: bool = False
    size: Node | None = None  # element count the kernel touches (pointers)
    contiguous: bool = True
    host: bool = False
    struct: Struct | None = None  # set for structs passed by value
    zero: bool = False  # pointers: zeroed (size elements) on the launch stream before the launch
    to_symbol: str | None = None  # host scalars: copied into this __constant__ variable before the launch
    nullable: bool = False  # a null pointer may be passed (its size is then not checked)
    read_only: bool = False  # a non-const pointer the kernel only reads: read-only arrays accepted
    indirect: bool = False  # a pointer array (elem**): ``elem`` is the pointee, ``const`` the array's
    inner_const: bool = False  # pointer arrays: the pointees are const (const f32* const*)
    device: bool = False  # a device scalar: one element the kernel reads from device memory (``elem``)
    bound: str | None = None  # device scalars: the integer argument bounding the value (documentation)
    # Host integers read from a struct argument's field (``from: p.rows``): that argument, and the
    # fields from the struct down to the scalar (nested structs first). The launchers do not take
    # such an argument; plans do.
    source: str | None = None
    source_fields: tuple[StructField, ...] = ()

    def __post_init__(self) -> None:
        assert [self.scalar, self.elem, self.struct].count(None) == 2, self

    @property
    def is_pointer(self) -> bool:
        return self.elem is not None

    @property
    def is_struct(self) -> bool:
        return self.struct is not None

    @property
    def derived(self) -> bool:
        """A host argument the launchers read from a struct argument's field (``from``)."""
        return self.source is not None

    @property
    def source_text(self) -> str:
        """``p.window.left``: where a derived argument's value comes from ("" for another argument)."""
        return ".".join([self.source, *(f.name for f in self.source_fields)]) if self.source else ""

    @property
    def source_offset(self) -> int:
        """The byte offset of a derived argument's field in its struct argument (C layout)."""
        return sum(f.offset for f in self.source_fields)

    @property
    def implicit(self) -> bool:
        """A stateless struct: passed to the kernel by the launcher, not an argument of it."""
        return self.struct is not None and self.struct.stateless

    @property
    def is_int(self) -> bool:
        return self.scalar is not None and self.scalar.is_integer

    @property
    def reads_only(self) -> bool:
        """The kernel does not write through this pointer (const, or declared read_only)."""
        return self.const or self.read_only

    @property
    def spelling(self) -> str:
        if self.elem is not None:
            if self.device:
                return f"device {self.elem.name}"
            if self.indirect:
                return f"{'const ' if self.inner_const else ''}{self.elem.name}*{' const' if self.const else ''}*"
            return f"{'const ' if self.const else ''}{self.elem.name}*"
        if self.struct is not None:
            return self.struct.name
        assert self.scalar is not None
        return self.scalar.name

    @property
    def cpp_pointer(self) -> str:
        """The C++ type of the kernel's parameter (``const float* const*``)."""
        assert self.elem is not None
        if self.indirect:
            return f"{'const ' if self.inner_const else ''}{self.elem.cpp}*{' const' if self.const else ''}*"
        return f"{'const ' if self.const else ''}{self.elem.cpp}*"

    @property
    def array_elem(self) -> Elem:
        """The element type of the arrays passed for this pointer (``ptr`` for pointer arrays)."""
        from kernelgen.types import ELEMS

        assert self.elem is not None
        return ELEMS["ptr"] if self.indirect else self.elem


@dataclass(frozen=True)
class Clause:
    """One predicate; ``text`` is its canonical form, used as the "not launched" reason."""

    expr: Node
    text: str
    loc: SourceLoc


@dataclass(frozen=True)
class Variants:
    """The kernel symbol chosen by the value of one integer argument."""

    on: str
    symbols: tuple[tuple[int, str], ...]
    loc: SourceLoc


@dataclass(frozen=True)
class Axis:
    """One axis of an ``instantiate:`` matrix: element type names, integers, booleans or qualified
    enumerators (``Act::Relu``), one kind an axis."""

    name: str
    values: tuple[str | int, ...]  # a bool is an int
    is_type: bool
    loc: SourceLoc


@dataclass(frozen=True)
class Launch:
    """A kernel's launch modes (the spec's ``launch:``)."""

    loc: SourceLoc
    cooperative: bool = False
    programmatic_dependent: bool = False
    cluster: tuple[Node, Node, Node] | None = None  # launch-time cluster dimensions
    cluster_text: str | None = None  # how the docs show them: the spec's let names kept, then defined

    @property
    def attributes(self) -> int:
        return int(self.cooperative) + int(self.programmatic_dependent) + int(self.cluster is not None)


@dataclass(frozen=True)
class TensorMap:
    """A TMA descriptor the launcher encodes for a kernel (the spec's ``tensor_maps``)."""

    name: str
    loc: SourceLoc
    array: str  # the pointer argument it describes
    elem_bytes: int  # the array's element size (1, 2, 4 or 8)
    dims: tuple[Node, ...]  # extents, outermost first
    box: tuple[Node, ...]  # the box, outermost first
    swizzle: int = 0  # bytes: 0, 32, 64 or 128


# Names that expressions may use for the device: grid and clauses all of them, shared_mem the
# device.* ones (kernel.blocks_per_sm depends on the shared memory).
DEVICE_NAMES = (
    "device.sm_count", "device.max_shared_mem_optin", "device.max_shared_mem_per_sm",
    "device.max_threads_per_sm", "device.max_threads_per_block", "kernel.blocks_per_sm",
)


@dataclass(frozen=True)
class Kernel:
    name: str
    loc: SourceLoc
    symbol: str
    summary: str
    targets: tuple[str, ...]
    args: tuple[Arg, ...]
    host_args: tuple[Arg, ...]
    grid: tuple[Node, Node, Node]
    block: tuple[Node, Node, Node]
    shared_mem: Node
    skip_if: tuple[Clause, ...]
    applies_if: tuple[Clause, ...]
    requires: tuple[Clause, ...]
    examples: tuple[tuple[tuple[str, int], ...], ...]
    variants: Variants | None = None
    cluster: tuple[int, int, int] | None = None  # compile-time cluster shape (__cluster_dims__)
    cluster_loc: SourceLoc | None = None
    instance_of: str | None = None  # the instantiated kernel (dispatcher) this is one instance of
    axis_values: tuple[tuple[str, str | int], ...] = ()  # this instance's value of each axis
    doc: str = ""  # longer text after the summary (the spec's doc)
    launch: Launch | None = None  # launch modes (cooperative, PDL, launch-time cluster)
    launch_bounds: tuple[int, int] | None = None  # __launch_bounds__(MAX, MIN) read from the sources
    tensor_maps: tuple[TensorMap, ...] = ()  # passed after the args
    lets: tuple[tuple[str, Node], ...] = ()  # the spec's let names and their trees (written out where used)

    @property
    def uses_device(self) -> bool:
        """Whether a plan needs device values: device names in expressions, or a cooperative launch."""
        return bool(self.device_names) or (self.launch is not None and self.launch.cooperative)

    @functools.cached_property
    def device_names(self) -> frozenset[str]:
        """The device names its grid, shared memory and clauses read (computed once: the case search
        asks often)."""
        nodes = [*self.grid, self.shared_mem, *(c.expr for c in self.skip_if + self.requires + self.applies_if)]
        return frozenset(n for node in nodes for n in node.names() if n.startswith(("device.", "kernel.")))

    @property
    def needs_occupancy(self) -> bool:
        return "kernel.blocks_per_sm" in self.device_names or (self.launch is not None and self.launch.cooperative)

    @property
    def all_args(self) -> tuple[Arg, ...]:
        return self.args + self.host_args

    @property
    def int_args(self) -> tuple[Arg, ...]:
        """The integer arguments: what ``plan()`` takes and expressions may name."""
        return tuple(a for a in self.all_args if a.is_int)


@dataclass(frozen=True)
class KernelRef:
    module: str
    kernel: str
    loc: SourceLoc

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.kernel}"


@dataclass(frozen=True)
class Fallback:
    """A chain of kernels tried in order; the first that applies is launched.

    Also the dispatching launcher of an instantiated kernel (``dispatch``): its members are
    the instances in the listed order, and ``type_axes`` names, per type axis, the pointer
    arguments whose element type it sets (the dtypes the launcher picks an instance by)."""

    name: str
    loc: SourceLoc
    members: tuple[KernelRef, ...]
    dispatch: bool = False
    axes: tuple[Axis, ...] = ()
    type_axes: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Build:
    """Build settings of a project, a target or a module (a ``build:`` entry): what they add to the
    compilation of the modules' translation units."""

    loc: SourceLoc | None = None
    include_dirs: tuple[tuple[str, SourceLoc], ...] = ()  # as written: relative to the project root, or absolute
    defines: tuple[tuple[str, str | None, SourceLoc], ...] = ()  # NAME, its value (None: defined, to 1)
    nvcc_flags: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.include_dirs or self.defines or self.nvcc_flags)

    @property
    def define_texts(self) -> list[str]:
        """The macros as the compiler's -D takes them: NAME, or NAME=VALUE."""
        return [n if v is None else f"{n}={v}" for n, v, _ in self.defines]

    @staticmethod
    def merged(*layers: Build) -> Build:
        """One module's settings from the project's, the target's and the module's, in that order:
        include folders most specific first, a later layer's macro value replacing an earlier one's,
        options in layer order."""
        dirs: dict[str, SourceLoc] = {}
        for layer in reversed(layers):
            for d, loc in layer.include_dirs:
                dirs.setdefault(d, loc)
        defines: dict[str, tuple[str | None, SourceLoc]] = {}
        for layer in layers:
            for name, value, loc in layer.defines:
                defines.pop(name, None)
                defines[name] = (value, loc)
        flags = tuple(f for layer in layers for f in layer.nvcc_flags)
        return Build(None, tuple(dirs.items()), tuple((n, v, loc) for n, (v, loc) in defines.items()), flags)


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # spec file, relative to the project root
    loc: SourceLoc
    summary: str
    sources: tuple[str, ...]
    kill_switch: str | None
    constants: tuple[tuple[str, int], ...]
    kernels: tuple[Kernel, ...]
    fallbacks: tuple[Fallback, ...] = ()
    dispatches: tuple[Fallback, ...] = ()  # one per instantiated kernel, in spec order
    doc: str = ""  # longer text after the summary (the spec's doc)
    kill_switch_shared: bool = False  # other modules use the same kill switch on purpose
    kill_switch_loc: SourceLoc | None = None
    structs: tuple[Struct, ...] = ()  # struct types passed by value: spec order, each after those it nests
    build: Build = field(default_factory=Build)  # the module's build settings

    def kernel(self, name: str) -> Kernel | None:
        for k in self.kernels:
            if k.name == name:
                return k
        return None

    def dispatch(self, name: str) -> Fallback | None:
        for d in self.dispatches:
            if d.name == name:
                return d
        return None


def chain_arguments(kernels: Iterable[Kernel]) -> dict[str, Arg]:
    """The arguments of a chain's or dispatcher's launcher: the union of its members' by name (a
    stateless functor, which each member's launcher passes itself, left out), each as the first
    member taking it as a kernel argument gives it (a kernel argument anywhere is positional), else
    as the first member gives it; kernel arguments first, then host arguments, each in first-seen
    order."""
    seen: dict[str, Arg] = {}
    for k in kernels:
        for a in k.all_args:
            if a.implicit:
                continue
            if a.name not in seen or (seen[a.name].host and not a.host):
                seen[a.name] = a
    return {n: a for host in (False, True) for n, a in seen.items() if a.host == host}


def cluster_size_default(compute_capability: tuple[int, int]) -> int:
    """A target's ``max_cluster_size`` where specs/targets.yaml gives none: 8 (the portable
    limit) from compute capability 9.0 on, 1 below it (thread-block clusters need sm_90)."""
    return 8 if compute_capability >= (9, 0) else 1


@dataclass(frozen=True)
class Target:
    name: str
    loc: SourceLoc
    arch: str  # e.g. sm_90a
    compute_capability: tuple[int, int]
    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_shared_mem_per_block_optin: int
    # The device table: what plans use for device.* and kernel.blocks_per_sm without a GPU.
    sm_count: int = 1
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_shared_mem_per_sm: int = 0  # 0: max_shared_mem_per_block_optin + reserved_shared_mem_per_block
    reserved_shared_mem_per_block: int = 1024
    max_cluster_size: int = 8  # the loader's default: cluster_size_default(compute_capability)
    build: Build = field(default_factory=Build)  # the target's build settings
    # The device-table keys specs/targets.yaml leaves out (their defaults apply).
    defaulted: frozenset[str] = field(default=frozenset(), compare=False)

    @property
    def sm_label(self) -> str:
        """The SM count plans without a GPU use, as `kernelgen plan` and `kernelgen list` show it:
        ``132 SMs``, or ``1 SM: no sm_count in specs/targets.yaml`` where the table leaves it out."""
        text = count(self.sm_count, "SM")
        return f"{text}: no sm_count in specs/targets.yaml" if "sm_count" in self.defaulted else text

    @property
    def smem_per_sm(self) -> int:
        return self.max_shared_mem_per_sm or self.max_shared_mem_per_block_optin + self.reserved_shared_mem_per_block

    def device_table(self) -> dict[str, int]:
        """The values of the device names (``device.sm_count`` ...) from this table."""
        return {
            "device.sm_count": self.sm_count,
            "device.max_shared_mem_optin": self.max_shared_mem_per_block_optin,
            "device.max_shared_mem_per_sm": self.smem_per_sm,
            "device.max_threads_per_sm": self.max_threads_per_sm,
            "device.max_threads_per_block": self.max_threads_per_block,
        }

    @property
    def arch_number(self) -> str:
        """The number CMake's CUDA_ARCHITECTURES takes: 90a for sm_90a."""
        return self.arch.removeprefix("sm_")


@dataclass(frozen=True)
class Catalog:
    """Everything loaded from one project: targets and modules, sorted by name."""

    targets: tuple[Target, ...]
    modules: tuple[Module, ...] = field(default=())
    naming: Naming = field(default=DEFAULT_NAMING)  # the project's names (specs/project.yaml)
    build: Build = field(default_factory=Build)  # the project's build settings (specs/project.yaml)

    def module_build(self, m: Module, t: Target) -> Build:
        """Module ``m``'s build settings on target ``t``: the project's, the target's and its own."""
        return Build.merged(self.build, t.build, m.build)

    def module(self, name: str) -> Module | None:
        for m in self.modules:
            if m.name == name:
                return m
        return None

    def target(self, name: str) -> Target | None:
        for t in self.targets:
            if t.name == name:
                return t
        return None
