"""The launch geometry a CUDA source's own host code gives a kernel, for ``kernelgen draft``.

A source that launches its kernels (``k<<<grid, block, smem, stream>>>(args)``,
``cudaLaunchKernelEx(&cfg, k, args...)`` with ``cfg``'s ``gridDim``, ``blockDim`` and
``dynamicSmemBytes`` set before it (and a ``cudaLaunchAttributeClusterDimension`` among its
``attrs``: the launch-time cluster), or ``cudaLaunchKernel(k, grid, block, args, smem, stream)``
and ``cudaLaunchCooperativeKernel`` with ``void* args[] = {&p, &n};`` declared before it) already
says how the grid, the block and the dynamic shared memory follow from the arguments, and under
which condition it launches which instance. This module reads such a launch and writes its
geometry and its condition as spec expressions over the kernel's arguments, instead of the
draft's guess:

- ``dim3`` and integer variables the launching function declares before the launch (``dim3
  grid(div, rows);``, ``dim3 grid(a, b), block(16, 16);``, ``dim3 block = {16, 16, 1};``, ``auto
  grid = dim3(a, b);``, ``const int threads = 256;``, ``int blocks = (n + threads - 1) /
  threads;``, the last declaration before it; a ``dim3``'s components assigned after it,
  ``grid.y = rows;``, and read, ``block.x``) are put in;
- a name the launch passes to the kernel as an integer argument (``k<<<..>>>(out, in, n)``, also
  through a cast) becomes that argument's spec name, and so does an expression it passes (``n /
  4`` as ``n4``: ``(n / 4 + 127) / 128`` -> ``div_ceil(n4, 128)``, where the operators beside it
  leave it whole); a field of a name it passes as a struct argument becomes that argument's field
  (``params.rows`` -> ``p.rows``), and so does a name the launching function puts into a member of
  such a struct (``Params p{x, n};``, ``p.n = n;``); a name or number it gives an integer template
  parameter that is an axis becomes the axis (``k<WARP_SIZE><<<rows, WARP_SIZE>>>``), a constant
  of the sources (``#define``, ``constexpr``; qualified too, ``cfg::kThreads``, by its last name)
  its value, an integer member of a class or class template instance (``Kernel_traits::kNThreads``)
  its value (kernelgen.class_members), and what the launching code queries of the device
  (``cudaDeviceGetAttribute``, ``cudaDeviceProp``'s members, the occupancy) the spec's
  ``device.*`` names and ``kernel.blocks_per_sm``;
- an integer (or bool) parameter of the launching function that the kernel does not take, and an
  integer variable whose value the spec cannot compute (``input.numel() / d``) or which is set
  again before the launch (``nth *= 2``), become host arguments (``host_args``: the caller gives
  them);
- the source's function-like macros are expanded where the configuration or a variable uses
  them (``CEIL_DIV(n, 256)``), where a launch is inside an invocation's arguments (a dispatch
  macro: ``BOOL_SWITCH(c, kEven, [&] { k<kEven><<<...>>>(...); })``, whose branches' ``constexpr
  static bool kEven = true;`` give the template argument its value) and where a macro's body
  launches (``LAUNCH(8);``); a launch inside one of PyTorch's dispatch macros stands for each
  type it gives ``scalar_t``;
- a launch inside a function template whose template arguments are that function's stands for
  each set of values the source gives the function (explicit instantiations, calls, also through
  the function templates that call it), and so does one whose template arguments are left to
  deduction from arguments typed by them (``ln<<<...>>>(y, x)`` with ``T* y``); a ``constexpr`` of
  the launching code given as a template argument is its value, evaluated per instance
  (``constexpr uint32_t vec_size = 16 / sizeof(T);``); a launch through a variable naming the
  kernel (``auto kernel = &k<T, true>;``, also for ``cudaLaunchKernel((void*)kernel, ...)``) is a
  launch of ``k``;
- C++'s integer operators are written as the spec's (``/`` as ``//``, ``(x + d - 1) / d`` as
  ``div_ceil(x, d)``, ``std::min`` as ``min``, ``sizeof`` of a known type as its bytes, casts
  dropped, products of numbers folded, ``c ? a : b`` as ``a if c else b``, a call of a one-line
  integer function of the sources expanded, a library's ``ceil_div`` as ``div_ceil``), and in the
  condition of the ``if`` / ``else`` / ``switch`` around the launch its comparisons and ``&&``,
  ``||``, ``!`` too (``and``, ``or``, ``not``; an integer tested as a truth value compared with 0,
  also in ``c ? a : b``); inside a ``case 7:`` of ``switch (v)`` (or under ``v == 7``), a variable
  ``v`` whose value the spec cannot compute otherwise is 7, and shifts of integers are folded;
  anything else (a member call such as ``x.size(0)``, ``<<``, a float) in the grid or the block
  leaves the draft's guess in place, in the shared memory a 0 marked ``check``, in the condition
  a ``check`` comment.

What is read is text, as the rest of the draft reads it: comments removed, no preprocessor
conditionals evaluated, the launching function found as the outermost braces around the launch
that follow a parameter list.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kernelgen.class_members import ClassTable, local_aliases, scan, type_size
from kernelgen.kernel_source import Macros, closing, expand_macros, function_pointer, macros_of, split_top
from kernelgen.model import DEVICE_NAMES
from kernelgen.types import CPP_TYPES, SCALARS

_IDENT = re.compile(r"[A-Za-z_]\w*")
# integer types a launching function's parameters and variables are declared with
_INT_WORDS = {"int", "unsigned", "signed", "long", "short", "size_t", "ssize_t", "ptrdiff_t", "int8_t", "int16_t",
              "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "index_t", "auto"}
_QUALIFIERS = {"const", "constexpr", "static", "register", "volatile", "std"}
_CAST_TYPES = r"(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:long\s+long|long|int|short|size_t|u?int(?:8|16|32|64)_t|" \
              r"std::size_t|std::u?int(?:8|16|32|64)_t|int64_t|unsigned)"
_CASTS = re.compile(rf"static_cast\s*<\s*{_CAST_TYPES}\s*>|\(\s*{_CAST_TYPES}\s*\)|(?<![\w:.]){_CAST_TYPES}\s*(?=\()")


@dataclass
class LaunchSite:
    """One launch of a kernel: its configuration's and arguments' texts as written, and what the
    launching function declares before it that they may use."""

    line: int
    template_args: list[str] | None  # k<...><<<: its template arguments as written, None without
    config: list[str]  # grid, block[, shared memory[, stream]], function-like macros expanded
    call_args: list[str]
    written: list[str] = field(default_factory=list)  # the configuration as written
    locals: dict[str, str] = field(default_factory=dict)  # integer variables: name -> initializer
    local_types: dict[str, str] = field(default_factory=dict)  # integer variables: name -> C++ type
    modified: set[str] = field(default_factory=set)  # integer variables assigned after their declaration
    dims: dict[str, list[str]] = field(default_factory=dict)  # dim3 variables: name -> components
    host_params: dict[str, str] = field(default_factory=dict)  # integer parameters: name -> C++ type
    param_types: dict[str, str] = field(default_factory=dict)  # every parameter: name -> C++ type as written
    guard: str | None = None  # the condition under which the launching function reaches it (C++), if any
    cooperative: bool = False  # launched by cudaLaunchCooperativeKernel
    # the cluster dimensions of a cudaLaunchKernelEx's cudaLaunchAttributeClusterDimension, as written
    cluster: list[str] | None = None
    # inside a PyTorch dispatch macro (AT_DISPATCH_FLOATING_TYPES(...), AT_DISPATCH_CASE(...)): its
    # name and the C++ types it gives scalar_t (put into the template arguments by dispatched())
    dispatch: tuple[str, tuple[str, ...]] | None = None
    # the launching function template's integer parameters that the launch passes whole as the
    # kernel's template arguments (k<ROWS, W><<<n / ROWS, ...>>>): position -> name, kept by name
    # in the configuration and variables (an axis's, or the argument's value where it is none)
    passed_params: dict[int, str] = field(default_factory=dict)
    # the sources' one-line integer functions (helper_functions), which its expressions may call
    functions: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    # class-type variables of the launching function: name -> {member: value} from its braced
    # initializer (positional items by index "0", "1", ...; designated ones by name) and from
    # assignments to its members after it (p.n = n;; "~n" where one changes it: p.n += 1)
    aggregates: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Geometry:
    """A launch's geometry as spec expressions: grid and block (three each), the dynamic shared
    memory (None: zero, or ``smem_text`` where the spec cannot say it), and the host arguments they
    use (name, spec type; ``computed``: how the launching function computes those it does)."""

    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    shared_mem: str | None
    host_args: list[tuple[str, str]]
    line: int
    computed: dict[str, str] = field(default_factory=dict)  # host arguments the launching function computes
    smem_text: str | None = None  # the launch's shared memory where the spec cannot say it (as written)
    condition: str | None = None  # the condition the launching function launches it under, as the spec's
    # the cluster the launch asks for (cudaLaunchAttributeClusterDimension): spec expressions, or its
    # text as written where the spec cannot say it
    cluster: tuple[str, str, str] | None = None
    cluster_text: str | None = None


def launch_sites(text: str, name: str, macros: Macros | None = None) -> list[LaunchSite]:
    """The launches of the kernel called ``name`` (its last name, qualified or not, with template
    arguments or not) in ``text``, as :func:`launches` reads them."""
    return launches(text, macros).get(name, [])


def launches(text: str, macros: Macros | None = None, classes: ClassTable | None = None,
             functions: dict[str, tuple[list[str], str]] | None = None) -> dict[str, list[LaunchSite]]:
    """Every launch in ``text`` (comment-free, literals blanked), by the kernel's last name;
    ``macros``: those of the source and its headers (default: those ``text`` defines), whose
    function-like ones are expanded in a launch's configuration and variables; ``classes``: the
    class types of the source and its headers (default: those of ``text``), whose integer members
    a launch names (``Kernel_traits::kNThreads``, the traits a function template is given) are
    put in as their values; ``functions``: the one-line integer functions of the source and its
    headers (default: those of ``text``; :func:`helper_functions`), whose calls a launch's
    expressions may make (``ceil_div(n, 256)``)."""
    # (where, kernel, site, how its configuration or arguments are given: ("config", the
    # cudaLaunchConfig_t variable), ("array", the argument array), or None: written in the launch)
    found: list[tuple[int, str, LaunchSite, tuple[str, str] | None]] = []
    every = macros or macros_of(text)
    text = _expand_launching_macros(text, every)
    callee_rx = re.compile(r"(?<![\w:])((?:[A-Za-z_]\w*\s*::\s*)*)([A-Za-z_]\w*)\s*$")
    for m in re.finditer(r"<<<", text):
        # the kernel's name, and its template arguments: the brackets matched backwards from <<<
        # (if (n <= 256) k<T, 128><<<...: k, not n)
        head = text[max(0, m.start() - 300):m.start()].rstrip()
        targs_text = None
        if head.endswith(">"):
            i = _opening(head, "<>")
            if i is None or any(c in head[i:] for c in ";{}"):
                continue
            targs_text, head = head[i:], head[:i]
        callee = callee_rx.search(head)
        end = text.find(">>>", m.end())
        if callee is None or end < 0:
            continue
        kernel_name = callee.group(2)
        if targs_text is None:  # auto kernel = &k<T, true>; kernel<<<...>>>(...): the kernel it names
            kernel_name, targs_text = _kernel_alias(text, m.start(), kernel_name) or (kernel_name, None)
        config = split_top(text[m.end():end])
        paren = re.compile(r"\s*\(").match(text, end + 3)
        if paren is None or len(config) < 2:
            continue
        close = closing(text, paren.end())
        if close is None:
            continue
        targs = split_top(targs_text[1:-1]) if targs_text else None
        found.append((m.start(), kernel_name, LaunchSite(text.count("\n", 0, m.start()) + 1, targs, config,
                                                         split_top(text[paren.end():close])), None))
    for m in re.finditer(r"\bcudaLaunchKernelEx(?:C)?\s*\(", text):
        close = closing(text, m.end())
        args = split_top(text[m.end():close]) if close is not None else []
        kernel = _aliased(text, m.start(), _kernel_ref(args[1])) if len(args) >= 2 else None
        cfg = re.fullmatch(r"&\s*([A-Za-z_]\w*)", args[0].strip()) if args else None
        if kernel is None or cfg is None:
            continue
        found.append((m.start(), kernel[0], LaunchSite(text.count("\n", 0, m.start()) + 1, kernel[1], [], args[2:]),
                      ("config", cfg.group(1))))
    # cudaLaunchKernel(k, grid, block, args, smem, stream): the arguments through an array of
    # their addresses that the launching function declares (void* args[] = {&p, &n};)
    for m in re.finditer(r"\bcudaLaunch(?:Cooperative)?Kernel\s*(?:<[^;{}()]*>)?\s*\(", text):
        close = closing(text, m.end())
        args = split_top(text[m.end():close]) if close is not None else []
        kernel = _aliased(text, m.start(), _kernel_ref(args[0])) if len(args) >= 4 else None
        array = re.fullmatch(r"\(?\s*(?:\(\s*void\s*\*\s*\*\s*\))?\s*([A-Za-z_]\w*)\s*\)?", args[3].strip()) \
            if kernel else None
        if kernel is None or array is None:
            continue
        config = [args[1], args[2], args[4] if len(args) > 4 else "0"]
        site = LaunchSite(text.count("\n", 0, m.start()) + 1, kernel[1], config, [],
                          cooperative="Cooperative" in m.group(0))
        found.append((m.start(), kernel[0], site, ("array", array.group(1))))
    found.sort(key=lambda f: f[0])
    # the source's function-like macros, expanded where a launch's configuration or a variable uses
    # them (CEIL_DIV(n, 256)); object-like ones stay names (constants, or a template argument's)
    macros = ({}, every[1])
    # the braces open at each launch, in one pass over the text
    braces = [(m.start(), m.group(0)) for m in re.finditer(r"[{}]", text)]
    classes = classes if classes is not None else ClassTable(text)
    functions = functions if functions is not None else helper_functions(text)
    out: dict[str, list[LaunchSite]] = {}
    # per function template that launches (by the end of its parameter list): the values the
    # source gives its template parameters, found once for all of its launches
    instances: dict[int, tuple[list[str], list[dict[str, str]]] | None] = {}
    stack: list[int] = []
    b = 0
    spans = _dispatch_spans(text)
    for pos, kernel_name, site, via in found:
        while b < len(braces) and braces[b][0] < pos:
            if braces[b][1] == "{":
                stack.append(braces[b][0])
            elif stack:
                stack.pop()
            b += 1
        site.written = list(site.config)
        site.config = [_device_members(_expanded(c, macros)) for c in site.config]
        body = _function_body(text, stack)
        if body is not None:
            head_end, body_start = body
            site.param_types = _params(text, head_end)
            site.host_params = _int_params(site.param_types)
            _read_variables(text[body_start:pos], site, macros)
            # a template argument that names a constexpr of the launching code (a dispatch macro's
            # constexpr static bool IsEven = true;, the last declaration before the launch): its value
            consts = {m.group(1): m.group(2) if re.fullmatch(r"\w+", m.group(2)) else f"({m.group(2)})"
                      for m in _CONSTEXPR_LOCAL.finditer(text, body_start, pos)}
            if consts and site.template_args:
                site.template_args = [put_names(a, consts) for a in site.template_args]
            site.guard = _guard(text, pos, body_start, [x for x in stack if x >= body_start])
            _read_aggregates(text[body_start:pos], site)
        if via is not None and via[0] == "array":
            site.call_args = _address_array(text[body[1] if body else 0:pos], via[1])
            if site.call_args is None:
                continue
        elif via is not None:
            site.written = _launch_config(text[body[1] if body else 0:pos], via[1])
            site.config = [_expanded(c, macros) for c in site.written]
            site.cluster = _launch_cluster(text[body[1] if body else 0:pos], via[1])
            if not site.config:
                continue
        if body is not None and body[0] not in instances:
            host = _host_template(text, body[0])
            instances[body[0]] = (host[1], _bindings(text, host, body[0])) if host is not None else None
        given = instances.get(body[0]) if body is not None else None
        made = [site]
        if given is not None and _uses_params(site, given[0]):
            made = _instantiated(site, given[1])
        aliases = local_aliases(text[body[1]:pos]) if body is not None else {}
        made = [replace(d, functions=functions) for s in made for d in _dispatched(s, pos, spans)]
        out.setdefault(kernel_name, []).extend(_evaluated(_with_members(s, classes, aliases), classes) for s in made)
    return out


# PyTorch's dispatch macros: the scalar types each dispatches (c10::ScalarType names), and how many
# further scalar types its leading arguments add (AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16,
# x.scalar_type(), "name", [&] { ... }))
_FLOATING = ("Double", "Float")
_INTEGRAL = ("Byte", "Char", "Short", "Int", "Long")
_AT_DISPATCH = {
    "AT_DISPATCH_FLOATING_TYPES": (_FLOATING, 0),
    "AT_DISPATCH_FLOATING_TYPES_AND_HALF": ((*_FLOATING, "Half"), 0),
    "AT_DISPATCH_REDUCED_FLOATING_TYPES": (("Half", "BFloat16"), 0),
    "AT_DISPATCH_INTEGRAL_TYPES": (_INTEGRAL, 0),
    "AT_DISPATCH_ALL_TYPES": ((*_INTEGRAL, *_FLOATING), 0),
    **{f"AT_DISPATCH_FLOATING_TYPES_AND{s}": (_FLOATING, n) for s, n in (("", 1), ("2", 2), ("3", 3))},
    **{f"AT_DISPATCH_INTEGRAL_TYPES_AND{s}": (_INTEGRAL, n) for s, n in (("", 1), ("2", 2), ("3", 3))},
    **{f"AT_DISPATCH_ALL_TYPES_AND{s}": ((*_INTEGRAL, *_FLOATING), n) for s, n in (("", 1), ("2", 2), ("3", 3))},
}
# the C++ type a kernel template is given for each scalar type (c10's Half and BFloat16 as CUDA's
# own 16-bit types, which the launchers spell)
_SCALAR_CPP = {"Double": "double", "Float": "float", "Half": "__half", "BFloat16": "__nv_bfloat16",
               "Byte": "uint8_t", "Char": "int8_t", "Short": "int16_t", "Int": "int32_t", "Long": "int64_t",
               "Bool": "bool"}


def _scalar_type(text: str) -> str | None:
    """The c10::ScalarType an argument names (``at::ScalarType::Half``, ``at::kHalf``, ``kBFloat16``)."""
    last = re.sub(r"\s+", "", text).rsplit("::", 1)[-1]
    name = last[1:] if re.fullmatch(r"k[A-Z]\w*", last) else last
    return name if name in _SCALAR_CPP else None


def _dispatch_spans(text: str) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """The calls of PyTorch's dispatch macros in ``text``: (where the arguments start and end, the
    macro's name, the scalar types it dispatches); ``AT_DISPATCH_CASE(type, ...)`` the one type."""
    out = []
    for m in re.finditer(r"\b(AT_DISPATCH_\w+)\s*\(", text):
        end = closing(text, m.end())
        if end is None:
            continue
        if m.group(1) == "AT_DISPATCH_CASE":
            args = split_top(text[m.end():end])
            one = _scalar_type(args[0]) if args else None
            if one is not None:
                out.append((m.end(), end, m.group(1), (one,)))
            continue
        known = _AT_DISPATCH.get(m.group(1))
        if known is None:
            continue
        extra = [_scalar_type(a) for a in split_top(text[m.end():end])[:known[1]]]
        if all(extra):
            out.append((m.end(), end, m.group(1), (*known[0], *(e for e in extra if e))))
    return out


def _dispatched(site: LaunchSite, pos: int, spans: list[tuple[int, int, str, tuple[str, ...]]]) -> list[LaunchSite]:
    """``site`` (a launch at ``pos``) with the innermost dispatch macro call around it, if any, as
    its ``dispatch``, once for each type it dispatches where its template arguments use
    ``scalar_t`` (see :func:`dispatched`)."""
    around = [s for s in spans if s[0] <= pos < s[1]]
    if not around:
        return [site]
    _, _, macro, types = max(around, key=lambda s: s[0])
    return dispatched(replace(site, dispatch=(macro, tuple(_SCALAR_CPP[ty] for ty in types))))


def dispatched(site: LaunchSite) -> list[LaunchSite]:
    """``site`` once for each C++ type its dispatch macro gives ``scalar_t``, put into its template
    arguments; ``site`` alone where it is in none or they do not use ``scalar_t``."""
    if site.dispatch is None or not any(re.search(r"\bscalar_t\b", a) for a in site.template_args or ()):
        return [site]
    return [replace(site, template_args=[put_names(a, {"scalar_t": ty}) for a in site.template_args or ()])
            for ty in site.dispatch[1]]


_CONSTEXPR_LOCAL = re.compile(r"\bconstexpr\s+(?:static\s+)?(?:const\s+)?(?:bool|int|unsigned|auto|size_t|"
                              r"u?int(?:8|16|32|64)_t)\s+([A-Za-z_]\w*)\s*=\s*(true|false|\d+|[^;{}]+?)\s*;")


def _expand_launching_macros(text: str, macros: Macros) -> str:
    """``text`` with each invocation of a function-like macro whose arguments hold a launch
    (``BOOL_SWITCH(cond, IsEven, [&] { k<IsEven><<<...>>>(...); })``: the branches the macro
    writes, each with its constexpr) or whose body does (``LAUNCH(8);`` with ``#define LAUNCH(w)
    k<T, w><<<grid, block>>>(...)``: a launch where it is invoked) expanded in place, on one line
    followed by the line breaks it spanned, so that the lines after it keep their numbers; the
    definitions of the latter are blanked (a launch in a ``#define`` is none)."""
    functions = macros[1]
    if not functions or "<<<" not in text:
        return text
    launching = {n for n, (_, body) in functions.items() if "<<<" in body}
    if launching:
        text = _DEFINE.sub(lambda d: "\n" * d.group(0).count("\n") if d.group(1) in launching else d.group(0), text)
    out, pos = [], 0
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        if m.start() < pos or m.group(1) not in functions:
            continue
        end = closing(text, m.end())
        if end is None or ("<<<" not in text[m.end():end] and m.group(1) not in launching):
            continue
        expanded, failed = expand_macros(text[m.start():end + 1], ({}, functions))
        if failed:
            continue
        out += [text[pos:m.start()], " ".join(expanded.split("\n")), "\n" * text.count("\n", m.start(), end + 1)]
        pos = end + 1
    return "".join(out) + text[pos:]


# a #define directive (its continuation lines too): the macro's name
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:[^\n\\]|\\.|\\\n)*", re.M)


def _angle_close(text: str, start: int) -> int | None:
    """Where the ``>`` closing the ``<`` just before ``start`` is (None past a ``;``, ``{`` or ``}``)."""
    depth = 1
    for i in range(start, len(text)):
        c = text[i]
        if c in ";{}":
            return None
        depth += {"<": 1, ">": -1}.get(c, 0)
        if depth == 0:
            return i
    return None


def _host_template(text: str, head_end: int) -> tuple[str, list[str], dict[str, str]] | None:
    """The name, template parameters and their defaults of the function template whose parameter
    list ends at ``head_end``, or None where it is not a template."""
    opening = _opening(text[:head_end])
    name = re.search(r"([A-Za-z_]\w*)\s*$", text[:opening or 0])
    if opening is None or name is None:
        return None
    start = max(text.rfind(c, 0, name.start()) for c in ";{}") + 1
    head = re.match(r"\s*template\s*<", text[start:name.start()])
    end = _angle_close(text, start + head.end()) if head else None
    if head is None or end is None:
        return None
    names, defaults = [], {}
    for p in split_top(text[start + head.end():end]):
        decl, eq, default = p.partition("=")
        fn = function_pointer(decl)  # scalar_t (*ACT_FN)(const scalar_t&)
        word = [fn] if fn else re.findall(r"[A-Za-z_]\w*", decl)[-1:]
        if word:
            names.append(word[0])
            if eq:
                defaults[word[0]] = " ".join(default.split())
    return name.group(1), names, defaults


def _enclosing_head(text: str, pos: int) -> int | None:
    """The end of the parameter list of the function around ``pos``; None outside one."""
    stack: list[int] = []
    for m in re.finditer(r"[{}]", text[:pos]):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            stack.pop()
    body = _function_body(text, stack)
    return body[0] if body is not None else None


def _enclosing_params(text: str, pos: int) -> dict[str, str]:
    """The parameters (name -> C++ type as written) of the function around ``pos``; none outside one."""
    head_end = _enclosing_head(text, pos)
    return _params(text, head_end) if head_end is not None else {}


def _through_caller(text: str, binding: dict[str, str], at: int, depth: int) -> list[dict[str, str]]:
    """``binding``, the template arguments of a call at ``at``, with the template parameters of the
    function template the call is in put into them, once per set of values the source gives those
    (``run<Traits<128, T>>(p)`` in ``template <typename T> void run_128(...)``, instantiated for
    half: ``Traits<128, half>``); ``binding`` alone where its values use none or get none."""
    head_end = _enclosing_head(text, at) if depth < 3 else None
    outer = _host_template(text, head_end) if head_end is not None else None
    if outer is None or not any(re.search(rf"\b{p}\b", v) for p in outer[1] for v in binding.values()):
        return [binding]
    given = _bindings(text, outer, head_end, depth + 1)  # type: ignore[arg-type]
    return [{k: put_names(v, g) for k, v in binding.items()} for g in given] or [binding]


def put_names(text: str, binding: dict[str, str]) -> str:
    """``text`` with the names of ``binding`` replaced by their values."""
    return re.sub(r"\b[A-Za-z_]\w*\b", lambda w: binding.get(w.group(0), w.group(0)), text)


def _bindings(text: str, host: tuple[str, list[str], dict[str, str]], head_end: int,
              depth: int = 0) -> list[dict[str, str]]:
    """The sets of values the source gives the template parameters of the function template
    ``host`` (whose parameter list ends at ``head_end``): its explicit instantiations and calls
    with template arguments (``template void launch<float>(...);``, ``launch<half, 4>(...)``) and
    calls that leave them to deduction from what they pass (``launch(xh, n)`` with ``const half*
    xh``), the defaults for the others, where all of its parameters get one."""
    name, params, defaults = host
    own = _params(text, head_end)
    bindings: list[dict[str, str]] = []

    def deduce(binding: dict[str, str], call_args: list[str], caller: dict[str, str]) -> None:
        for p in params:
            if p in binding:
                continue
            for (_, written), arg in zip(own.items(), call_args):
                if re.fullmatch(rf"(?:const\s+)?{p}(?:\s*\*)?(?:\s*(?:const|__restrict__|__restrict))*\s*&?", written):
                    found = arg_type(caller, arg)
                    if found is not None:
                        binding[p] = found
                        break

    definition = _opening(text[:head_end])
    for m in re.finditer(rf"(?<![\w:.]){name}\s*(<)?", text):
        if text.find("(", m.end()) == definition:
            continue  # the definition itself
        binding: dict[str, str] = {}
        at = m.end()
        if m.group(1):
            end = _angle_close(text, m.end())
            if end is None:
                continue
            binding = dict(zip(params, (" ".join(a.split()) for a in split_top(text[m.end():end]))))
            at = end + 1
        call = re.compile(r"\s*\(").match(text, at)
        close = closing(text, call.end()) if call else None
        if close is None:
            continue
        if len(binding) < len(params):
            deduce(binding, split_top(text[call.end():close]), _enclosing_params(text, m.start()))
            binding.update({p: d for p, d in defaults.items() if p not in binding})
        if len(binding) == len(params):
            bindings.extend(b for b in _through_caller(text, binding, m.start(), depth) if b not in bindings)
    return bindings


def _with_members(site: LaunchSite, classes: ClassTable, aliases: dict[str, str]) -> LaunchSite:
    """``site`` with the integer members of class types it names put in as their values, and the
    launching function's own type aliases (``aliases``) in its template arguments as their types
    (``using Traits = Fwd_traits<64>; k<Traits><<<...``: ``k<Fwd_traits<64>>``, which the launchers
    can name)."""
    if not classes.classes and not aliases:
        return site

    def put(text: str) -> str:
        return classes.put(text, aliases)
    targs = [put(put_names(a, aliases)) for a in site.template_args] if site.template_args is not None else None
    return replace(site, template_args=targs,
                   config=[put(c) for c in site.config], locals={k: put(v) for k, v in site.locals.items()},
                   dims={k: [put(x) for x in v] for k, v in site.dims.items()})


def _uses_params(site: LaunchSite, params: list[str]) -> bool:
    """Whether ``site``'s template arguments, or the types of the launching function's parameters
    it passes (those its deduced template arguments follow: ``T* y`` passed as ``y``), name one of
    ``params`` (the launching function template's)."""
    texts = [*(site.template_args or ()), *(site.param_types.get(a.strip(), "") for a in site.call_args)]
    return any(re.search(rf"\b{p}\b", t) for p in params for t in texts)


def _evaluated(site: LaunchSite, classes: ClassTable) -> LaunchSite:
    """``site`` with the template arguments that are integer expressions of constants (a
    ``constexpr`` of the launching function template put in: ``(16 / sizeof(half))``) as their
    values, where ``classes`` computes them."""
    def value(arg: str) -> str:
        if re.fullmatch(r"\s*[\w:]*\s*", arg) or (found := classes.evaluate(arg)) is None:
            return arg
        return str(found)
    return replace(site, template_args=[value(a) for a in site.template_args]) if site.template_args else site


def _instantiated(site: LaunchSite, bindings: list[dict[str, str]]) -> list[LaunchSite]:
    """``site`` (a launch whose template arguments use the template parameters of the function
    template that makes it) once for each of ``bindings``, the values the source gives those
    parameters (:func:`_bindings`), put into its template arguments, configuration, the
    variables it uses and the types of the parameters it passes (whose types give the template
    arguments it leaves to deduction); ``site`` alone where there are none."""
    out = []
    def kept(value: str) -> bool:  # an integer or an element type: an axis's value
        return bool(re.fullmatch(r"-?\d+", value)) or " ".join(value.split()) in CPP_TYPES

    for b in bindings:
        # a parameter passed whole as an integer or element-type template argument keeps its name
        # (the axis's; sizeof(T) the type axis's)
        whole = {i: a.strip() for i, a in enumerate(site.template_args or ()) if kept(b.get(a.strip(), ""))}
        c = {k: v for k, v in b.items() if k not in whole.values()}
        targs = [put_names(a, b) for a in site.template_args] if site.template_args is not None else None
        out.append(replace(site, template_args=targs,
                           param_types={k: put_names(v, b) for k, v in site.param_types.items()},
                           config=[put_names(x, c) for x in site.config],
                           written=[put_names(x, b) for x in site.written],
                           locals={k: put_names(v, c) for k, v in site.locals.items()},
                           dims={k: [put_names(x, c) for x in v] for k, v in site.dims.items()}, passed_params=whole))
    return out or [site]


def _guard(text: str, pos: int, body_start: int, stack: list[int]) -> str | None:
    """The condition under which the statement at ``pos`` runs in the function whose body starts at
    ``body_start`` (``stack``: the braces open at ``pos`` within it, outermost first), from the
    ``if`` / ``else`` / ``switch`` around it (C++ text, the enclosing ones' joined with ``&&``);
    None where none is read."""
    parts: list[str] = []
    stmt = max(body_start - 1, *(text.rfind(c, body_start, pos) for c in ";{}")) + 1
    head = text[stmt:pos].lstrip()
    start = pos - len(text[stmt:pos].lstrip())  # where the statement's text begins
    labels = _labels(head)
    if re.match(r"if\s*\(", head):  # if (c) k<<<...>>>(...);
        close = closing(text, start + head.index("(") + 1)
        if close is not None and close < pos:
            parts.append(text[start + head.index("(") + 1:close])
    elif re.match(r"else\b", head):  # if (c) ...; else [if (d)] k<<<...>>>(...);
        parts += _else(text, start, body_start, head)
    # the enclosing blocks, innermost first, up to the function's body
    for brace in reversed(stack):
        before = text[:brace].rstrip()
        opening = _opening(before) if before.endswith(")") else None
        word = re.search(r"(\w+)\s*$", before[:opening]) if opening is not None else None
        if word and word.group(1) == "if":
            chain = re.search(r"\belse\s*$", before[:word.start()])
            parts.append(before[opening + 1:-1] if chain is None else
                         " && ".join([before[opening + 1:-1], *(f"!({c})" for c in _chain(text, chain.start(),
                                                                                       body_start))]))
        elif word and word.group(1) == "switch":
            on = before[opening + 1:-1].strip()
            end = closing(text, brace + 1, "{}") or pos
            here = labels or _labels_before(text[brace + 1:pos])
            if here:
                if None in here:  # default: none of the cases
                    every = [v for v in _labels(text[brace + 1:end], anywhere=True) if v is not None]
                    parts.append(f"!({' || '.join(f'{on} == {v}' for v in every)})" if every else "true")
                else:
                    parts.append(" || ".join(f"{on} == {v}" for v in here))
            labels = []
        elif re.search(r"\belse\s*$", before):
            parts += [f"!({c})" for c in _chain(text, re.search(r"\belse\s*$", before).start(), body_start)]
        else:
            labels = []
    out = [p.strip() for p in parts if p.strip() and p.strip() != "true"]
    return " && ".join(f"({p})" if len(out) > 1 and "||" in p else p for p in out) or None


# A switch's label: case V: (its value) or default:.
_LABEL = re.compile(r"(?:^|(?<=[;{}:]))\s*(?:case\s+([^:;]+?)|default)\s*:(?!:)")


def _labels(text: str, anywhere: bool = False) -> list[str | None]:
    """The ``case`` values (None for ``default``) that begin ``text`` (or, with ``anywhere``, all of
    them in it)."""
    out: list[str | None] = []
    pos = 0
    for m in _LABEL.finditer(text):
        if not anywhere and m.start() != pos:
            break
        out.append(m.group(1).strip() if m.group(1) else None)
        pos = m.end()
    return out


def _labels_before(text: str) -> list[str | None]:
    """The labels of the last run of ``case`` / ``default`` labels in ``text`` (a switch body up
    to a statement)."""
    runs: list[list[str | None]] = []
    last = -1
    for m in _LABEL.finditer(text):
        if m.start() != last:
            runs.append([])
        runs[-1].append(m.group(1).strip() if m.group(1) else None)
        last = m.end()
    return runs[-1] if runs else []


def _else(text: str, start: int, body_start: int, head: str) -> list[str]:
    """The conditions of a statement ``else [if (d)] ...`` at ``start``: d and the chain's earlier
    conditions negated."""
    out = [f"!({c})" for c in _chain(text, start, body_start)]
    m = re.match(r"else\s+if\s*\(", head)
    if m:
        close = closing(text, start + m.end())
        if close is not None:
            out.insert(0, text[start + m.end():close])
    return out


def _chain(text: str, at: int, body_start: int) -> list[str]:
    """The conditions of the ``if`` / ``else if`` chain whose last statement or block ends just
    before ``at`` (where an ``else`` stands), earliest first; none where it is not read."""
    before = text[body_start:at].rstrip()
    if before.endswith("}"):
        head = before[:_opening(before, "{}") or 0].rstrip()
        if not head.endswith(")"):
            return []
        opening = _opening(head)
        word = re.search(r"\bif\s*$", head[:opening]) if opening is not None else None
        if word is None or opening is None:
            return []
        cond, begin = head[opening + 1:-1], word.start()
    else:  # a statement: its if
        stmt = max(-1, *(before.rfind(c, 0, len(before) - 1) for c in ";{}")) + 1
        m = re.match(r"\s*(?:else\s+)?if\s*\(", before[stmt:])
        if m is None:
            return []
        close = closing(before, stmt + m.end())
        if close is None:
            return []
        cond, begin = before[stmt + m.end():close], stmt + m.end() - len(m.group(0).lstrip())
        if m.group(0).lstrip().startswith("else"):  # else if (c) ...;: the chain goes on before it
            return [*_chain(text, body_start + begin, body_start), cond]
    earlier = re.search(r"\belse\s*$", before[:begin])
    return ([*_chain(text, body_start + earlier.start(), body_start), cond] if earlier else [cond])


def _opening(text: str, pair: str = "()") -> int | None:
    """Where the ``pair[0]`` matching the ``pair[1]`` that ends ``text`` is."""
    depth = 0
    step = {pair[1]: 1, pair[0]: -1}
    for i in range(len(text) - 1, -1, -1):
        depth += step.get(text[i], 0)
        if depth == 0:
            return i
    return None


def _kernel_ref(text: str) -> tuple[str, list[str] | None] | None:
    """The kernel a launch API call names (``k``, ``&ns::k<T, 4>``, ``(void*)k``,
    ``reinterpret_cast<const void*>(&k)``): its last name and template arguments, or None."""
    text = text.strip()
    cast = re.fullmatch(r"(?:reinterpret_cast|static_cast)\s*<\s*(?:const\s+)?void\s*\*\s*>\s*\((.*)\)", text, re.S)
    text = cast.group(1).strip() if cast else re.sub(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*", "", text)
    m = re.fullmatch(r"\(?\s*&?\s*(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*)\s*(<.*>)?\s*\)?", text, re.S)
    if m is None:
        return None
    return m.group(1), split_top(m.group(2)[1:-1]) if m.group(2) else None


def _kernel_alias(text: str, pos: int, name: str) -> tuple[str, str | None] | None:
    """The kernel that a variable ``name`` declared before ``pos`` names (``auto kernel =
    &ns::k<T, true>;``): its last name and its template arguments' text with the brackets (None
    without); None where ``name`` is not so declared."""
    alias = ([None] + list(re.finditer(rf"\bauto\s*\*?\s*(?:const\s+)?{name}\s*=\s*&?\s*"
                                       rf"(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*)\s*(<[^;{{}}]*>)?\s*;",
                                       text[max(0, pos - 3000):pos])))[-1]
    return (alias.group(1), alias.group(2)) if alias is not None else None


def _aliased(text: str, pos: int, kernel: tuple[str, list[str] | None] | None) -> tuple[str, list[str] | None] | None:
    """``kernel`` (what a launch API call at ``pos`` names, :func:`_kernel_ref`) as the kernel it
    names where it is a variable naming one (:func:`_kernel_alias`)."""
    alias = _kernel_alias(text, pos, kernel[0]) if kernel is not None and kernel[1] is None else None
    if alias is None:
        return kernel
    return alias[0], split_top(alias[1][1:-1]) if alias[1] else None


def _address_array(body: str, array: str) -> list[str] | None:
    """The arguments array ``array`` of ``body`` (the launching function up to the launch) points to
    (``void* args[] = {&p, (void*)&n};`` -> ``["p", "n"]``), or None where it is not so declared."""
    decl = ([None] + list(re.finditer(rf"\bvoid\s*\*\s*{array}\s*\[[^\]]*\]\s*=\s*\{{", body)))[-1]
    end = closing(body, decl.end(), "{}") if decl is not None else None
    if decl is None or end is None:
        return None
    out = []
    for item in split_top(body[decl.end():end]):
        item = re.sub(r"^(?:\(\s*void\s*\*\s*\)|(?:reinterpret_cast|const_cast|static_cast)\s*<[^<>]*>)\s*", "",
                      item.strip())
        address = re.fullmatch(r"\(?\s*&\s*([A-Za-z_][\w.]*)\s*\)?", item)
        out.append(address.group(1) if address else item)
    return out


def _launch_config(body: str, cfg: str) -> list[str]:
    """Grid, block and shared memory of ``cudaLaunchConfig_t`` variable ``cfg`` as ``body`` (the
    launching function up to the launch) sets them: its members assigned (the last assignment), or
    its declaration's designated initializers; none without a grid and a block."""
    fields = {}
    decl = None
    for d in re.finditer(rf"\bcudaLaunchConfig_t\s+{cfg}\s*=?\s*\{{", body):
        decl = d
    if decl is not None:
        end = closing(body, decl.end(), "{}")
        for item in split_top(body[decl.end():end] if end is not None else ""):
            m = re.fullmatch(r"\.\s*(\w+)\s*=\s*(.+)", item.strip(), re.S)
            if m:
                fields[m.group(1)] = m.group(2).strip()
    for m in re.finditer(rf"(?<![\w.]){cfg}\s*\.\s*(gridDim|blockDim|dynamicSmemBytes)\s*=\s*([^;]+);", body):
        fields[m.group(1)] = m.group(2).strip()
    if "gridDim" not in fields or "blockDim" not in fields:
        return []
    return [fields["gridDim"], fields["blockDim"], fields.get("dynamicSmemBytes", "0")]


def _known_values(guard: str | None, variables: dict[str, str]) -> dict[str, str]:
    """The launching function's ``variables`` whose value the condition a launch is under fixes (C++
    ``guard``: ``log2_elements == 7``, a ``case 7:`` of ``switch (log2_elements)``, among ``&&``):
    name -> the integer."""
    if guard is None:
        return {}
    top = guard
    while re.search(r"\([^()]*\)", top):  # (what is outside every parenthesis)
        top = re.sub(r"\([^()]*\)", "", top)
    if "||" in top:
        return {}
    out = {}
    for part in guard.split("&&"):
        m = re.fullmatch(r"\s*\(?\s*([A-Za-z_]\w*)\s*==\s*(\d+)[uUlL]*\s*\)?\s*", part)
        if m and m.group(1) in variables:
            out[m.group(1)] = m.group(2)
    return out


def _launch_cluster(body: str, cfg: str) -> list[str] | None:
    """The cluster dimensions (x, y, z as written) that ``cudaLaunchConfig_t`` variable ``cfg``'s
    attributes ask for in ``body`` (the launching function up to the launch): ``cfg.attrs =
    attrs;`` (or ``&attr``) with ``attrs[i].id = cudaLaunchAttributeClusterDimension;`` and
    ``attrs[i].val.clusterDim.x = 2;``; None where it has no such attribute."""
    given = re.search(rf"(?<![\w.]){cfg}\s*\.\s*attrs\s*=\s*&?\s*([A-Za-z_]\w*)\s*;", body) or \
        re.search(rf"\bcudaLaunchConfig_t\s+{cfg}\s*=?\s*\{{[^;]*?\.\s*attrs\s*=\s*&?\s*([A-Za-z_]\w*)", body)
    if given is None:
        return None
    element = rf"(?<![\w.]){given.group(1)}\s*(\[\s*\d+\s*\])?\s*\."
    which = re.search(rf"{element}\s*id\s*=\s*cudaLaunchAttributeClusterDimension\b", body)
    if which is None:
        return None
    index = re.escape(re.sub(r"\s+", "", which.group(1) or ""))
    dims = {}
    for m in re.finditer(element + r"\s*val\s*\.\s*clusterDim\s*\.\s*([xyz])\s*=\s*([^;]+);", body):
        if re.fullmatch(index, re.sub(r"\s+", "", m.group(1) or "")):
            dims[m.group(2)] = m.group(3).strip()
    return [dims.get(axis, "1") for axis in "xyz"]


def geometry(site: LaunchSite, params: list[tuple[str, str | None]], constants: dict[str, int],
             taken: set[str], axes: dict[int, str] | None = None,
             type_axes: dict[int, str] | None = None, members: dict[str, list[str]] | None = None,
             literals: bool = True) -> Geometry | None:
    """``site``'s geometry over the kernel's parameters ``params`` (per parameter in order: its
    spec name and spec type), or None where the grid or the block is not
    written in what the spec can say. ``constants``: the sources' integer constants; ``taken``: the
    names a host argument may not take (the kernel's arguments, its axes); ``axes``: the integer
    axes by template parameter position: a name or number the launch gives such a parameter
    (``k<WARP_SIZE><<<rows, WARP_SIZE>>>``) is the axis where the configuration uses it;
    ``type_axes``: the type axes so, for ``sizeof`` (``sizeof(scalar_t)`` -> ``sizeof(scalar)``);
    ``members``: the members of the struct arguments in declaration order, by the argument's spec
    name, so that a name the launching function puts into a member of a struct it passes (``Params
    p{x, n};``, ``p.n = n;``) is that argument's field (``p.n``). With ``literals`` False, an
    integer literal the launch gives an axis (``k<4><<<n / 4, 256>>>``) stays a number in the
    geometry: the same number elsewhere in it need not be that parameter."""
    bound: dict[str, str] = {}
    for i, a in (axes or {}).items():
        if site.template_args is not None and i < len(site.template_args) and i not in site.passed_params:
            arg = " ".join(site.template_args[i].split())
            if literals or not arg.isdigit():
                bound[arg] = a
    # the launching function's parameters passed whole as template arguments: the axis, else the value
    for i, pname in site.passed_params.items():
        value = " ".join((site.template_args or [])[i].split()) if i < len(site.template_args or []) else None
        if value is None:
            continue
        if value in CPP_TYPES:  # an element type: its sizeof
            size = type_size(value)
            bound[f"sizeof({pname})"] = f"sizeof({type_axes[i]})" if i in (type_axes or {}) else str(size)
        else:
            bound[pname] = (axes or {}).get(i) or value
    bound.update({f"sizeof({' '.join(site.template_args[i].split())})": f"sizeof({a})"
                  for i, a in (type_axes or {}).items()
                  if site.template_args is not None and i < len(site.template_args)})
    if len(site.call_args) != len(params):
        return None
    passed: dict[str, str] = {}
    passed_exprs: dict[str, list[str]] = {}  # expressions passed to integer arguments, by placeholder
    structs: dict[str, str] = {}  # names passed as a struct argument: its spec name
    for text, (spec, ty) in zip(site.call_args, params):
        if ty is not None and ty not in SCALARS and not ty.endswith("*") and _IDENT.fullmatch(text.strip()):
            structs.setdefault(text.strip(), spec)
        bare = _uncast(text.strip())
        if ty is None or ty not in SCALARS or not SCALARS[ty].is_integer:
            continue
        if _IDENT.fullmatch(bare):
            passed.setdefault(bare, spec)
        elif (toks := _tokens(bare)) and len(toks) > 1 and toks not in passed_exprs.values():
            placeholder = f"__passed{len(passed_exprs)}"
            passed_exprs[placeholder] = toks
            passed[placeholder] = spec
    for var, spec in structs.items():  # names put into the members of a struct the kernel is passed
        order = (members or {}).get(spec, [])
        items = site.aggregates.get(var, {})
        changed = {k[1:] for k in items if k.startswith("~")}
        for key, value in items.items():
            member = order[int(key)] if key.isdigit() and int(key) < len(order) else key
            bare = _uncast(value)
            if member in order and member not in changed and _IDENT.fullmatch(bare):
                passed.setdefault(bare, f"{spec}.{member}")
    host: dict[str, str] = {}
    computed: dict[str, str] = {}

    def name(word: str, first: bool = False, variable: bool = False) -> str | None:
        """``word``'s spec spelling; with ``first``, only where it is what the kernel is passed
        (before the launching function's variables are put in); with ``variable``, a variable of
        the launching function whose value the spec cannot compute, as a host argument."""
        if word in bound:
            return bound[word]
        if word in DEVICE_NAMES:  # what the launching code queries of the device (see _read_variables)
            return word
        if "::" in word:  # cfg::kThreads, Traits::kWarps: a constant of the sources by its last name
            last = word.rsplit("::", 1)[1]
            return None if first or word.startswith("std::") or last not in constants else str(constants[last])
        if "." in word:  # a field of what the kernel is passed as a struct argument: p.rows
            head, _, rest = word.partition(".")
            return f"{structs[head]}.{rest}" if head in structs else None
        if word.isdigit():
            return word
        if word in passed:
            return passed[word]
        if first:
            return None
        if variable:
            if word not in site.local_types or word in taken:
                return None
            host[word] = site.local_types[word]
            computed[word] = f"{site.locals[word]}, then set again" if word in site.modified else site.locals[word]
            return word
        if word in constants:
            return str(constants[word])
        ty = site.host_params.get(word)
        if ty is not None and word not in taken:
            host[word] = ty
            return word
        return None

    def dims(text: str) -> list[str] | None:
        text = text.strip()
        if _IDENT.fullmatch(text) and text in site.dims:
            parts = list(site.dims[text])
        else:
            call = re.fullmatch(r"dim3\s*[({](.*)[)}]", text, re.S)
            parts = split_top(call.group(1)) if call else [text]
        if not 1 <= len(parts) <= 3:
            return None
        out = []
        for p in parts:
            e = _spec_expr(p, scope)
            if e is None:
                return None
            out.append(e)
        return out + ["1"] * (3 - len(parts))  # (not an axis that happens to be 1)

    # the condition as written; the configuration where the condition fixes a variable whose value the
    # spec cannot compute otherwise (switch (v) { case 7: ... with v set in a loop: v is 7)
    guard_scope = _Scope(site.locals, name, site.modified, site.dims, passed_exprs, site.functions)
    before = dict(host), dict(computed)
    known = {k: v for k, v in _known_values(site.guard, site.locals).items()
             if k in site.modified or _spec_expr(site.locals[k], guard_scope) is None}
    host, computed = before
    scope = replace(guard_scope, variables={**site.locals, **known}, modified=site.modified - set(known))
    grid, block = dims(site.config[0]), dims(site.config[1])
    if grid is None or block is None or any(d in b for b in block for d in DEVICE_NAMES):
        return None  # (the spec's block takes no device names)
    smem: str | None = None
    smem_unread = False
    if len(site.config) > 2:
        before = dict(host), dict(computed)
        smem = _spec_expr(site.config[2], scope)
        if smem is not None and "kernel.blocks_per_sm" in smem:  # (the occupancy depends on it)
            smem = None
        smem_unread = smem is None
        if smem_unread:  # the host arguments named on the way stay out
            host, computed = before
        if smem == "0":
            smem = None
    condition = None
    if site.guard is not None:  # the names it adds are host arguments only where it is written
        before = dict(host), dict(computed)
        condition = _spec_expr(site.guard, guard_scope, condition=True)
        condition = _truthy(condition) if condition is not None else None
        if condition is None:
            host, computed = before
    cluster = None
    if site.cluster is not None:  # the names it adds are host arguments only where it is written
        before = dict(host), dict(computed)
        cluster = dims(f"dim3({', '.join(site.cluster)})")
        if cluster is None:
            host, computed = before
    types = [(n, CPP_TYPES.get(" ".join(t.split()), "i64")) for n, t in host.items()]
    return Geometry((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), smem,
                    [(n, t if t in SCALARS and SCALARS[t].is_integer else "i64") for n, t in types], site.line,
                    computed, (site.written or site.config)[2].strip() if smem_unread else None, condition,
                    (cluster[0], cluster[1], cluster[2]) if cluster else None,
                    ", ".join(site.cluster) if site.cluster is not None and cluster is None else None)


# ---------------------------------------------------------------------------------------------


def _function_body(text: str, stack: list[int]) -> tuple[int, int] | None:
    """For a launch inside the braces ``stack`` (their offsets, outermost first): the end of the
    launching function's parameter list and the start of its body (just past its ``{``), or None."""
    for brace in stack:  # outermost first: the function, not a loop or an if inside it
        head = text[:brace].rstrip()
        head = re.sub(r"(?:\s*\b(?:const|noexcept|override|final))+$", "", head)
        opening = _opening(head) if head.endswith(")") else None
        if opening is not None and not re.search(r"\b(?:if|for|while|switch|catch)\s*$", head[:opening]):
            return len(head), brace + 1
    return None


def _params(text: str, head_end: int) -> dict[str, str]:
    """The parameters (name -> C++ type as written) of the function whose parameter list ends at
    ``head_end`` (its ``)``)."""
    i = _opening(text[:head_end])
    out = {}
    for p in split_top(text[(i or 0) + 1:head_end - 1]):
        p = p.split("=")[0].strip()
        m = re.fullmatch(r"(.*?[\s*&])([A-Za-z_]\w*)", p, re.S)
        if m and m.group(1).strip() and "(" not in p:
            out[m.group(2)] = " ".join(m.group(1).split())
    return out


def _int_params(params: dict[str, str]) -> dict[str, str]:
    """The integer (and bool) ones of ``params`` (name -> C++ type), qualifiers dropped."""
    out = {}
    for name, written in params.items():
        words = re.findall(r"[A-Za-z_]\w*", written)
        if any(c in written for c in "*&<[("):
            continue
        ty = [w for w in words if w not in _QUALIFIERS]
        if ty and (all(w in _INT_WORDS and w != "auto" for w in ty) or ty == ["bool"]):
            out[name] = " ".join(ty)
    return out


def arg_type(param_types: dict[str, str], text: str) -> str | None:
    """The C++ type (``const`` and pointers and references dropped) of what a call passes as
    ``text``: a parameter of the calling function (``param_types``, as :class:`LaunchSite` holds
    them), a cast (``(const float*)a``,
    ``reinterpret_cast<float4*>(x)``) or a tensor's ``data_ptr<float>()``; None where not so read."""
    text = text.strip()
    m = re.fullmatch(r"(?:static_cast|reinterpret_cast|const_cast)\s*<\s*([^<>]+?)\s*>\s*\(.*\)", text, re.S) or \
        re.fullmatch(r"\(\s*((?:const\s+)?[A-Za-z_][\w:\s]*\*[\s*]*)\)\s*.+", text, re.S) or \
        re.fullmatch(r".*\.\s*(?:template\s+)?(?:data_ptr|data|mutable_data_ptr|const_data_ptr)\s*<\s*([^<>]+?)\s*>"
                     r"\s*\(\s*\)", text, re.S)
    written = m.group(1) if m else param_types.get(text)
    if written is None:
        return None
    base = re.sub(r"[*&]|\b(?:const|volatile|__restrict__|__restrict)\b", " ", written)
    return " ".join(base.split()) or None


# A declaration of dim3 variables (dim3 grid(a, b), block(256);), or of one by auto (auto grid = dim3(a, b);).
_DIM3 = re.compile(r"(?:^|(?<=[;{}]))\s*(?:const\s+|static\s+)*(dim3|auto)\s+(?=[A-Za-z_])")
# One declarator of it: grid, grid(a, b), grid{a, b}, grid = dim3(a, b), grid = {a, b}.
_DIM3_ITEM = re.compile(r"([A-Za-z_]\w*)\s*(?:(=\s*)?(dim3\s*)?[({](.*)[)}])?", re.S)


def _statement_end(text: str, start: int) -> int | None:
    """Where the statement going on at ``start`` ends: its ``;`` outside brackets (None where a
    bracket closes first, or there is none)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif c == ";" and depth == 0:
            return i
    return None


def _dim3_declarations(body: str) -> list[tuple[str, list[str], int]]:
    """The ``dim3`` variables ``body`` declares, in order: name, components as written (``dim3
    grid;``: one, 1) and where the declaration ends; each declarator of a declaration (``dim3
    grid(a, b), block(16, 16);``, ``dim3 block = {16, 16, 1};``, ``dim3 block{16, 16};``), and
    ``auto grid = dim3(a, b);``."""
    out = []
    for m in _DIM3.finditer(body):
        end = _statement_end(body, m.end())
        if end is None:
            continue
        for item in split_top(body[m.end():end]):
            d = _DIM3_ITEM.fullmatch(item.strip())
            if d is None or (m.group(1) == "auto" and not d.group(3)) or (d.group(3) and not d.group(2)):
                break  # (auto n = 4;, dim3 grid = other;: not read)
            out.append((d.group(1), split_top(d.group(4)) if d.group(4) is not None else ["1"], end))
    return out


def _expanded(text: str, macros: Macros) -> str:
    """``text`` with the function-like ``macros`` it invokes expanded (as written where one cannot be)."""
    return expand_macros(text, macros)[0] if macros[1] and "(" in text else text


def _read_variables(body: str, site: LaunchSite, macros: Macros = ({}, {})) -> None:
    """The ``dim3`` and integer variables ``body`` declares (the last declaration of each name)."""
    declared: dict[str, int] = {}  # where each dim3's last declaration ends
    for name, parts, end in _dim3_declarations(body):
        site.dims[name], declared[name] = [_expanded(d, macros) for d in parts], end
    # components assigned after the declaration (grid.x = ...; the last assignment); one changed
    # otherwise (grid.x *= 2, ++grid.y) leaves the variable unread
    # (grid = dim3(a, b); the components given again)
    for dim, at in declared.items():
        for m in re.finditer(rf"(?<![\w.]){dim}\s*(?:\.\s*([xyz])\s*)?((?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)\s*"
                             rf"([^;]*);|(?:\+\+|--)\s*{dim}\s*\.", body[at:]):
            whole = m.group(2) == "=" and m.group(1) is None and re.fullmatch(
                r"(?:dim3\s*)?([({])(.*)[)}]", (m.group(3) or "").strip(), re.S)
            if m.group(2) != "=" or (m.group(1) is None and not whole):
                site.dims.pop(dim, None)
                break
            if whole:
                site.dims[dim] = [_expanded(d, macros) for d in split_top(whole.group(2))]
                continue
            parts = site.dims[dim] + ["1"] * (3 - len(site.dims[dim]))
            parts["xyz".index(m.group(1))] = _expanded(m.group(3).strip(), macros)
            site.dims[dim] = parts
    for m in re.finditer(r"(?:^|(?<=[;{}(]))\s*((?:(?:const|constexpr|static)\s+)*)((?:[A-Za-z_][\w:]*\s+)+?)"
                         r"([A-Za-z_]\w*)\s*=\s*([^;{}]+);", body):
        words = [w.removeprefix("std::") for w in m.group(2).split()]
        if words and all(w in _INT_WORDS for w in words) and not re.match(r"dim3\s*[({]", m.group(4).strip()):
            site.locals[m.group(3)] = _expanded(m.group(4).strip(), macros)
            site.local_types[m.group(3)] = "int64_t" if words == ["auto"] else " ".join(words)
            # assigned again before the launch (nth *= 2 in a loop): its value is not the initializer's
            again = re.compile(rf"(?<![\w.]){m.group(3)}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--)\s*{m.group(3)}\b|"
                               rf"(?<![\w.]){m.group(3)}\s*(?:\+\+|--)")
            if again.search(body, m.end()):
                site.modified.add(m.group(3))
            else:
                site.modified.discard(m.group(3))
    # the device's values the launching code queries: cudaDeviceGetAttribute(&sms,
    # cudaDevAttrMultiProcessorCount, dev), prop.multiProcessorCount (the spec's device names), and
    # cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, ...) (kernel.blocks_per_sm)
    for m in _DEVICE_QUERY.finditer(body):
        var = m.group(1) or m.group(3)
        name = _DEVICE_ATTRS.get(m.group(2)) if m.group(2) else "kernel.blocks_per_sm"
        if name is not None:
            site.locals[var] = name
            site.local_types.setdefault(var, "int")
            site.modified.discard(var)
    for k, v in list(site.locals.items()):
        site.locals[k] = _device_members(v)
    for k, parts in site.dims.items():
        site.dims[k] = [_device_members(x) for x in parts]


# the device attributes the spec names (cudaDeviceGetAttribute's, and cudaDeviceProp's members)
_DEVICE_ATTRS = {"cudaDevAttrMultiProcessorCount": "device.sm_count",
                 "cudaDevAttrMaxSharedMemoryPerBlockOptin": "device.max_shared_mem_optin",
                 "cudaDevAttrMaxSharedMemoryPerMultiprocessor": "device.max_shared_mem_per_sm",
                 "cudaDevAttrMaxThreadsPerMultiProcessor": "device.max_threads_per_sm",
                 "cudaDevAttrMaxThreadsPerBlock": "device.max_threads_per_block"}
_PROP_MEMBERS = {"multiProcessorCount": "device.sm_count", "sharedMemPerBlockOptin": "device.max_shared_mem_optin",
                 "sharedMemPerMultiprocessor": "device.max_shared_mem_per_sm",
                 "maxThreadsPerMultiProcessor": "device.max_threads_per_sm",
                 "maxThreadsPerBlock": "device.max_threads_per_block"}
_DEVICE_QUERY = re.compile(r"\b(?:cudaDeviceGetAttribute\s*\(\s*&\s*([A-Za-z_]\w*)\s*,\s*(\w+)|"
                           r"cudaOccupancyMaxActiveBlocksPerMultiprocessor\s*\(\s*&\s*([A-Za-z_]\w*))")
# prop.multiProcessorCount, props->multiProcessorCount, at::cuda::getCurrentDeviceProperties()->...
_PROP_READ = re.compile(r"(?<![\w.])(?:[A-Za-z_][\w:]*\s*(?:\(\s*\))?\s*(?:\.|->)\s*)+(" +
                        "|".join(_PROP_MEMBERS) + r")\b")


def _device_members(text: str) -> str:
    """``text`` with reads of cudaDeviceProp's members the spec names as those names."""
    return _PROP_READ.sub(lambda m: _PROP_MEMBERS[m.group(1)], text)


_AGGREGATE = re.compile(r"(?:^|(?<=[;{}]))\s*(?:const\s+)?(?:struct\s+)?([A-Za-z_][\w:]*)\s+([A-Za-z_]\w*)\s*"
                        r"(=\s*)?(\{|;)")


def _read_aggregates(body: str, site: LaunchSite) -> None:
    """The class-type variables ``body`` declares with a braced initializer or none (``Params
    p{x, n};``, ``Params p = {.n = n};``, ``Params p;``) and the members it assigns after that."""
    for m in _AGGREGATE.finditer(body):
        if m.group(1) in _INT_WORDS | _QUALIFIERS | {"dim3", "return", "else", "case", "goto", "using", "typedef"}:
            continue
        items: dict[str, str] = {}
        end = m.end()
        if m.group(4) == "{":
            close = closing(body, m.end(), "{}")
            if close is None:
                continue
            for i, item in enumerate(split_top(body[m.end():close])):
                named = re.fullmatch(r"\.\s*([A-Za-z_]\w*)\s*=\s*(.+)", item.strip(), re.S)
                if named:
                    items[named.group(1)] = named.group(2).strip()
                elif item.strip():
                    items[str(i)] = item.strip()
            end = close
        elif m.group(3):  # Params p = ...; without braces: not an aggregate read here
            continue
        for a in re.finditer(rf"(?<![\w.]){m.group(2)}\s*\.\s*([A-Za-z_]\w*)\s*((?:[-+*/%&|^]|<<|>>)?=(?!=)|"
                             rf"\+\+|--)\s*([^;]*);", body[end:]):
            # p.n += 1: the member no longer holds a value put in (marked, "~n")
            items[a.group(1) if a.group(2) == "=" else f"~{a.group(1)}"] = a.group(3).strip()
        site.aggregates[m.group(2)] = items


def _drop_casts(text: str) -> str:
    """``text`` without its integer casts: ``(int)n``, ``static_cast<int64_t>(n)``, ``int(n)``
    (the parentheses of the last two kept)."""
    return _CASTS.sub("", text)


def _uncast(text: str) -> str:
    """``text`` without an integer cast around it (``(int)n``, ``static_cast<int64_t>(n)`` -> ``n``)."""
    return _outer(_drop_casts(text).strip()).strip()


def _sizeof(m: re.Match[str]) -> str:
    """``sizeof(T)`` as T's bytes where T is a type the registry (or a library's, ``cutlass::half_t``)
    is, else as written."""
    size = type_size(" ".join(m.group(1).split()))
    return str(size) if size is not None else m.group(0)


_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*|([A-Za-z_][\w:]*(?:\s*\.\s*[A-Za-z_]\w*)*)|"
                    r"(<<|>>|&&|\|\||==|!=|<=|>=|[-+*/%(),<>!]))")
# a condition's operators as the spec writes them
_LOGIC = {"&&": "and", "||": "or", "!": "not", "==": "==", "!=": "!=", "<=": "<=", ">=": ">=", "<": "<", ">": ">"}


@dataclass
class _Scope:
    """What a launch's expressions may use: ``variables``, the launching function's integer
    variables (put in, parenthesized; not those in ``modified``, assigned again after their
    declaration); ``dims``, its ``dim3`` variables (``block.x`` is the first component);
    ``name(word)``, a name's spec spelling (None where it has none); ``passed``, expressions the
    launch passes to integer arguments of the kernel, as token lists by the placeholder name that
    stands for them (``n / 4`` passed as ``n4``: ``(n / 4 + 127) / 128`` -> ``div_ceil(n4, 128)``);
    ``functions``, the sources' one-line integer functions, whose calls are expanded."""

    variables: dict[str, str]
    name: Callable[..., str | None]
    modified: set[str] = field(default_factory=set)
    dims: dict[str, list[str]] = field(default_factory=dict)
    passed: dict[str, list[str]] = field(default_factory=dict)
    functions: dict[str, tuple[list[str], str]] = field(default_factory=dict)  # see helper_functions()


def _spec_expr(text: str, scope: _Scope, depth: int = 0, condition: bool = False) -> str | None:
    """C++ integer expression ``text`` as a spec expression, or None where it is not one the spec
    can say (see :class:`_Scope` for the names it may use); with ``condition``, a C++ condition
    (comparisons, ``&&``, ``||``, ``!``) as a spec condition."""
    if depth > 8:
        return None
    variables, name, modified = scope.variables, scope.name, scope.modified
    text = text.strip()
    tern = _ternary(text)  # c ? a : b (the loosest operator): the spec's a if c else b
    if tern is not None:
        c, a, b = (_spec_expr(x, scope, depth + 1, condition=i == 0 or condition) for i, x in enumerate(tern))
        c = _truthy(c) if c is not None else None  # (big ? 512 : 128: big != 0)
        decided = _decided(c) if c is not None else None
        chosen = a if decided else b
        if decided is not None and chosen is not None:  # (128 < 32 ? 128 : 32, a case's value put in: 32)
            return _atom(chosen)
        return f"({a} if {c} else {b})" if a is not None and b is not None and c is not None else None
    # the sizes of types first (sizeof(float) -> 4), then casts: (int)x, static_cast<int>(x), int(x)
    text = re.sub(r"\bsizeof\s*\(\s*([A-Za-z_][\w:\s]*?)\s*\)", _sizeof, text)
    text = _MIN_MAX_TYPE.sub(r"\1", text)  # std::min<uint32_t>(a, b): min(a, b)
    text = _stand_for_passed(_drop_casts(text), scope.passed)
    if "<<" in text or ">>" in text:
        text = _fold_shifts(text, scope)
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip():
                return None
            break
        pos = m.end()
        num, word, op = m.groups()
        word = re.sub(r"\s+", "", word) if word else word
        if num is not None:  # (a number a launch gives an axis is that axis, but not in a condition)
            out.append((None if condition else name(str(int(num, 0)))) or str(int(num, 0)))
        elif op is not None:
            if op in ("<<", ">>") or (op in _LOGIC and not condition):
                return None
            if op == "(" and (close := closing(text, pos)) is not None and _ternary(text[pos:close]) is not None:
                inner = _spec_expr(text[pos:close], scope, depth + 1, condition)  # (c ? a : b) * 2
                if inner is None:
                    return None
                out.append(inner)
                pos = close + 1
                continue
            out.append("//" if op == "/" else _LOGIC.get(op, op))
        else:
            assert word is not None
            bare = word.removeprefix("std::")
            if bare in ("min", "max") and text[pos:].lstrip().startswith("("):
                out.append(bare)
                continue
            if word == "sizeof":
                of = re.match(r"\s*\(\s*([A-Za-z_][\w:]*)\s*\)", text[pos:])
                spelled = name(f"sizeof({of.group(1)})") if of else None
                if spelled is None:
                    return None
                out.append(spelled)
                pos += of.end()  # type: ignore[union-attr]
                continue
            if text[pos:].lstrip().startswith("("):  # a call: of a one-line helper, or a library's ceil-div
                opened = text.index("(", pos) + 1
                close = closing(text, opened)
                args = split_top(text[opened:close]) if close is not None else []
                called = _call(word, args, scope, depth)
                if called is None:
                    return None
                out.append(called)
                pos = close + 1  # type: ignore[operator]
                continue
            spelled = name(word, True)
            if spelled is not None:
                out.append(spelled)
                continue
            head, _, member = word.partition(".")
            if head in scope.dims and member in ("x", "y", "z"):  # block.x: the dim3's component
                parts = scope.dims[head] + ["1"] * 3
                inner = _spec_expr(parts["xyz".index(member)], scope, depth + 1)
                if inner is None:
                    return None
                out.append(_atom(inner))
                continue
            if word in variables or word in modified:
                inner = None if word in modified else _spec_expr(
                    variables[word], _Scope({k: v for k, v in variables.items() if k != word}, name, modified,
                                            scope.dims, scope.passed, scope.functions), depth + 1)
                if inner is None:  # (input.numel() / d; set in a loop): the caller gives it
                    inner = name(word, variable=True)
                if inner is None:
                    return None
                out.append(_atom(inner))
                continue
            spelled = name(word)
            if spelled is None:
                return None
            out.append(spelled)
    return _tidy(_join(out)) or None


# std::min / std::max with an explicit template argument: the name, and where the argument begins
_MIN_MAX_TYPE = re.compile(r"\b((?:std\s*::\s*)?(?:min|max))\s*<[^<>()]*>(?=\s*\()")
# ceil-divisions of CUDA's and libraries' headers, as the spec's div_ceil
_CEIL_DIVS = {"cuda::ceil_div", "at::ceil_div", "c10::ceil_div", "cutlass::ceil_div", "cute::ceil_div",
              "thrust::ceil_div"}


def _call(word: str, args: list[str], scope: _Scope, depth: int) -> str | None:
    """A call in a launch's expression as a spec expression: a one-line integer function of the
    sources with its arguments put in, or a library's ceil-division as ``div_ceil``; None else."""
    found = scope.functions.get(word) or scope.functions.get(word.rsplit("::", 1)[-1])
    if found is not None and len(found[0]) == len(args):
        inner = _spec_expr(put_names(found[1], {p: f"({a})" for p, a in zip(found[0], args)}), scope, depth + 1)
        return _atom(inner) if inner is not None else None
    if word.removeprefix("::") in _CEIL_DIVS and len(args) == 2:
        a, b = (_spec_expr(x, scope, depth + 1) for x in args)
        return f"div_ceil({a}, {b})" if a is not None and b is not None else None
    return None


# A function whose body is one return of an expression (integer helpers: ceil_div, round_up):
# its name, parameters and returned expression.
_ONE_LINE = re.compile(r"\b(?:u?int(?:32|64)?_t|int|unsigned(?:\s+int)?|long(?:\s+long)?|size_t|auto|index_t)\s+"
                       r"([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{\s*return\s+([^;{}]+);\s*\}")


def helper_functions(text: str) -> dict[str, tuple[list[str], str]]:
    """The functions of comment-free ``text`` whose body is one ``return`` of an expression, with
    integer parameters (``constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }``): name
    -> (parameter names, the expression), for launches' expressions to expand their calls."""
    out: dict[str, tuple[list[str], str]] = {}
    for m in _ONE_LINE.finditer(text):
        params = [re.findall(r"[A-Za-z_]\w*", p)[-1:] for p in split_top(m.group(2))]
        if all(params) and all(not re.search(r"[*&\[]", p) for p in split_top(m.group(2))):
            out.setdefault(m.group(1), ([p[0] for p in params], " ".join(m.group(3).split())))
    return out


def _decided(condition: str) -> bool | None:
    """The truth of a spec condition that compares two integers (``128 < 32``), None for others."""
    m = re.fullmatch(r"\s*(\d+)\s*(<=|>=|==|!=|<|>)\s*(\d+)\s*", condition)
    if m is None:
        return None
    a, b = int(m.group(1)), int(m.group(3))
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b, "!=": a != b}[m.group(2)]


def _fold_shifts(text: str, scope: _Scope) -> str:
    """``text`` with each shift of integers (``1 << 7``, also of a variable of ``scope`` whose value
    is one: ``1 << log2_elements`` where a ``case 7:`` fixes it) as its value; the spec has no shifts."""
    literal = {k: v.strip() for k, v in scope.variables.items()
               if k not in scope.modified and re.fullmatch(r"\d+", v.strip())}

    def fold(m: re.Match[str]) -> str:
        a, b = (literal.get(x, x) for x in (m.group(1), m.group(3)))
        if not (a.isdigit() and b.isdigit()):
            return m.group(0)
        return str(int(a) << int(b) if m.group(2) == "<<" else int(a) >> int(b))
    return re.sub(r"(?<![\w.])([A-Za-z_]\w*|\d+)\s*(<<|>>)\s*([A-Za-z_]\w*|\d+)(?![\w.(])", fold, text)


def _ternary(text: str) -> tuple[str, str, str] | None:
    """``text``'s condition and branches where it is ``c ? a : b`` outside brackets (``a`` and ``b``
    may hold further ``?:``); None else."""
    depth, q, nested = 0, -1, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == "?":
            if q < 0:
                q = i
            else:
                nested += 1
        elif depth == 0 and ch == ":" and q >= 0 and text[i - 1:i] != ":" and text[i + 1:i + 2] != ":":
            if nested == 0:
                return text[:q], text[q + 1:i], text[i + 1:]
            nested -= 1
    return None


def _atom(text: str) -> str:
    """``text`` parenthesized unless it is a name, a number or parenthesized already."""
    atom = re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|\d+", text) or (
        text.startswith("(") and closing(text, 1) == len(text) - 1)
    return text if atom else f"({text})"


# binding strength of C++'s binary operators the spec writes (higher binds tighter)
_PRECEDENCE = {"*": 3, "/": 3, "%": 3, "+": 2, "-": 2}


def _tokens(text: str) -> list[str] | None:
    """``text``'s tokens as :func:`_spec_expr` reads them (numbers, names, arithmetic operators and
    brackets), or None where it has others."""
    found = scan(_TOKEN, text)
    if found is None or any(m.group(3) is not None and m.group(3) not in "-+*/%()," for m in found):
        return None
    return [re.sub(r"\s+", "", m.group(0)) for m in found]


def _loosest(tokens: list[str]) -> int:
    """The binding strength of the loosest binary operator outside brackets in ``tokens`` (4: none)."""
    depth, loosest, prev = 0, 4, None
    for t in tokens:
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
        elif depth == 0 and t in _PRECEDENCE and prev not in (None, "(", ",", *_PRECEDENCE):
            loosest = min(loosest, _PRECEDENCE[t])
        prev = t
    return loosest


def _stand_for_passed(text: str, passed: dict[str, list[str]]) -> str:
    """``text`` with each whole occurrence of an expression of ``passed`` replaced by the name that
    stands for it: where the operators beside it bind no tighter than its own loosest one (on the
    left, strictly looser), so that the replaced text computes the same (``m * n / 4`` keeps ``n /
    4``)."""
    if not passed:
        return text
    toks = _tokens(text)
    if toks is None:
        return text
    for placeholder, expr in passed.items():
        own = _loosest(expr)
        i = 0
        while i + len(expr) <= len(toks):
            left = toks[i - 1] if i else None
            right = toks[i + len(expr)] if i + len(expr) < len(toks) else None
            if toks[i:i + len(expr)] == expr and (left in (None, "(", ",") or _PRECEDENCE.get(left, 4) < own) \
                    and (right in (None, ")", ",") or _PRECEDENCE.get(right, 4) <= own):
                toks[i:i + len(expr)] = [placeholder]
            i += 1
    return " ".join(toks)


def _truthy(condition: str) -> str | None:
    """A spec condition in which an integer that C++ tests as a truth value (``if (wide)``, ``!n``,
    ``n && m``) is compared with 0 (``wide != 0``), as the spec's integers are no truth values;
    None where it is not one condition."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError:
        return None

    wrapped = []

    def test(node: ast.expr) -> ast.expr:
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(node.op, [test(v) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            if not isinstance(node.operand, (ast.BoolOp, ast.UnaryOp, ast.Compare)):  # !wide: wide == 0
                wrapped.append(node)
                return ast.Compare(node.operand, [ast.Eq()], [ast.Constant(0)])
            return ast.UnaryOp(node.op, test(node.operand))
        if isinstance(node, ast.Compare):
            return node
        wrapped.append(node)
        return ast.Compare(node, [ast.NotEq()], [ast.Constant(0)])

    tested = test(tree.body)
    return ast.unparse(tested) if wrapped else condition  # (as written where nothing needs it)


def _join(tokens: list[str]) -> str:
    """Tokens as text: operators spaced, none inside parentheses or before a call's ``(``."""
    text = ""
    for t in tokens:
        if t == ")" or t == "," or not text or text.endswith("(") or (t == "(" and text[-1:].isalnum()
                                                                        and text.split()[-1] in ("min", "max")):
            text += t
        else:
            text += " " + t
    return text.replace(",", ", ").replace(",  ", ", ")


def _outer(text: str) -> str:
    """``text`` without parentheses around the whole of it."""
    while text.startswith("(") and closing(text, 1) == len(text) - 1:
        text = text[1:-1]
    return text


def _tidy(text: str) -> str:
    """``text`` with its parentheses around the whole dropped and ``(x + d - 1) // d`` (or ``(x +
    255) // 256``) written as ``div_ceil(x, d)``."""
    def ceil(m: re.Match[str]) -> str:
        x, add, d = m.group(1), m.group(2), m.group(3)
        if add == f"{d} - 1" or (add.isdigit() and d.isdigit() and int(add) + 1 == int(d)):
            return f"div_ceil({x}, {d})"
        return m.group(0)
    atom = re.compile(r"(?<![\w)])\(\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|\d+|\w+\([^()]*\))\s*\)")
    while atom.search(text):  # (n) -> n, as a macro's expansion writes its arguments
        text = atom.sub(r"\1", text)
    # products of numbers folded (4 * 32 -> 128) where nothing divides by the first
    product = re.compile(r"(?<![\w/%*] )(?<![\w.])(\d+) \* (\d+)(?![\w.])")
    while product.search(text):
        text = product.sub(lambda m: str(int(m.group(1)) * int(m.group(2))), text, count=1)
        text = atom.sub(r"\1", text)
    text = re.sub(r"\(([^()]+?) \+ ([^()+]+?)\) // (\w+)", ceil, _outer(text))
    return _outer(text)
