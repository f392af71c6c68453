"""Strict YAML reading: the only place kernelgen parses YAML.

Documents are composed into node trees with no implicit type resolution and no
constructors, so no tag can build an object. Scalars are then typed here with
deliberately narrow rules (YAML 1.2 core, minus the surprises): decimal integers,
``true``/``false``, ``null``, and strings. Plain scalars that YAML 1.1 would have turned
into something else (``no``, ``on``, ``0x10``, ``1_000``, ``010``, ``1e3``) are errors
that ask for quotes, so a value never silently changes meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from kernelgen.errors import SourceLoc, SpecError

MAX_SPEC_BYTES = 1 << 20

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"

_INT = re.compile(r"-?(0|[1-9][0-9]*)")
# A decimal point, and an exponent only with its sign: YAML 1.1 reads 1e3 and 1.0e3 as strings.
_FLOAT = re.compile(r"-?(0|[1-9][0-9]*)\.[0-9]+([eE][-+][0-9]+)?")
_FLOATISH = re.compile(r"[-+]?[0-9_]*\.?[0-9_]*[eE][-+]?[0-9]+|[-+]?[0-9][0-9_]*\.[0-9_]*|[-+]?\.[0-9].*")
_YAML11_BOOL = re.compile(r"(yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|True|TRUE|False|FALSE)")
_NUMBERISH = re.compile(
    r"[-+]?(0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*(\.[0-9_]*)?([eE][-+]?[0-9]+)?|\.[0-9]+([eE][-+]?[0-9]+)?"
    r"|\.(inf|Inf|INF|nan|NaN|NAN))|[0-9]+(:[0-5]?[0-9])+"
)


class _NoResolveLoader(yaml.SafeLoader):
    """Composes only: every plain scalar keeps the default str tag."""


_NoResolveLoader.yaml_implicit_resolvers = {}

if getattr(yaml, "__with_libyaml__", False):
    # The same composition through libyaml: several times faster on large specs.
    class _CNoResolveLoader(yaml.CSafeLoader):  # type: ignore[misc, name-defined]
        """Composes only, in C: every plain scalar keeps the default str tag."""

    _CNoResolveLoader.yaml_implicit_resolvers = {}
    _LOADER: type = _CNoResolveLoader
else:
    _LOADER = _NoResolveLoader


@dataclass(frozen=True)
class YScalar:
    loc: SourceLoc
    value: str | int | float | bool | None
    quoted: bool


@dataclass(frozen=True)
class YSeq:
    loc: SourceLoc
    items: tuple[YNode, ...]


@dataclass(frozen=True)
class YMap:
    loc: SourceLoc
    items: tuple[tuple[YScalar, YNode], ...]

    def keys(self) -> list[str]:
        return [str(k.value) for k, _ in self.items]


YNode = YScalar | YSeq | YMap


def load(path: str, text_bytes: bytes) -> YNode:
    """Parse one YAML document from ``text_bytes``; ``path`` is used in messages."""
    top = SourceLoc(path)
    if len(text_bytes) > MAX_SPEC_BYTES:
        raise SpecError(top, "", f"file is {len(text_bytes)} bytes; specs are limited to {MAX_SPEC_BYTES}")
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(top, "", f"not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise SpecError(SourceLoc(path, line), "", "NUL character in file")
    try:
        _refuse_anchors_and_tags(path, text)
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = SourceLoc(path, mark.line + 1, mark.column + 1) if mark else top
        problem = exc.problem or exc.context or "invalid YAML"
        opened, hint = _syntax_context(exc)
        raise SpecError(loc, "", f"YAML syntax error: {problem}{opened}", hint) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise SpecError(top, "", f"invalid YAML: {type(exc).__name__}") from None
    if node is None:
        raise SpecError(top, "", "the file is empty")
    return _convert(path, node, set(), "")


# The constructs a syntax error may leave open that a character closes.
_CLOSERS = {"flow sequence": ("list", "[", "]"), "flow mapping": ("mapping", "{", "}")}


def _syntax_context(exc: yaml.MarkedYAMLError) -> tuple[str, str]:
    """Where the construct that a syntax error interrupted opened (the parser's context mark),
    when that is elsewhere than the error: a list missing its ``]`` is reported where the
    parser noticed, usually the next line. Returns the message's addition and a hint."""
    cm, pm = exc.context_mark, exc.problem_mark
    if cm is None or not exc.context or (pm is not None and (pm.line, pm.column) == (cm.line, cm.column)):
        return "", ""
    at = f"line {cm.line + 1}, column {cm.column + 1}"
    what = re.sub(r"^while (?:parsing|scanning) (?:an? )?", "", exc.context)
    if what in _CLOSERS:
        name, opener, closer = _CLOSERS[what]
        return f", in the {name} opened by '{opener}' at {at}", f"close it with '{closer}'"
    if what == "quoted scalar":
        return f", in the quoted string that starts at {at}", "close the quote"
    return f", in the {what} that starts at {at}", ""


def _refuse_anchors_and_tags(path: str, text: str) -> None:
    """Anchors (with or without an alias) and explicit tags (``!!str``, ``!!map`` included, which
    compose to the plain values' own tags) are refused where they are written."""
    if "&" not in text and "!" not in text:
        return  # neither can be written without one of these characters
    for tok in yaml.scan(text, Loader=_LOADER):
        if isinstance(tok, yaml.AnchorToken | yaml.AliasToken):
            raise SpecError(SourceLoc(path, tok.start_mark.line + 1, tok.start_mark.column + 1), "",
                            "YAML anchors and aliases are not supported", "write the value out")
        if isinstance(tok, yaml.TagToken):
            handle, suffix = tok.value
            raise SpecError(SourceLoc(path, tok.start_mark.line + 1, tok.start_mark.column + 1), "",
                            f"YAML tag '{handle or ''}{suffix}' is not allowed", "specs use plain YAML values only")


def _loc(path: str, node: yaml.Node) -> SourceLoc:
    return SourceLoc(path, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(path: str, node: yaml.Node, seen: set[int], field: str) -> YNode:
    """``node`` as a YNode; ``field`` is its dotted path (``kernels.k.args``), for messages."""
    loc = _loc(path, node)
    if id(node) in seen:
        raise SpecError(loc, field, "YAML anchors and aliases are not supported", "write the value out")
    seen.add(id(node))
    if node.tag not in (_STR, _SEQ, _MAP):
        raise SpecError(loc, field, f"YAML tag '{node.tag}' is not allowed", "specs use plain YAML values only")
    if isinstance(node, yaml.ScalarNode):
        if node.tag != _STR:
            raise SpecError(loc, field, "a scalar here must be plain YAML")
        return _scalar(loc, node.value, node.style, field)
    if isinstance(node, yaml.SequenceNode):
        items_ = tuple(_convert(path, n, seen, f"{field}[{i}]") for i, n in enumerate(node.value))
        return YSeq(loc, _rejoin_seq(items_) if node.flow_style else items_)
    assert isinstance(node, yaml.MappingNode)
    items: list[tuple[YScalar, YNode]] = []
    first: dict[object, SourceLoc] = {}

    def child(k: yaml.Node) -> str:
        name = k.value if isinstance(k, yaml.ScalarNode) else "?"
        return f"{field}.{name}" if field else str(name)

    pairs = [(_convert(path, k, seen, child(k)), _convert(path, v, seen, child(k))) for k, v in node.value]
    if node.flow_style:
        pairs = _rejoin_map(pairs)
    for key, value in pairs:
        if not isinstance(key, YScalar) or key.value is None or isinstance(key.value, bool):
            what = "a collection"
            if isinstance(key, YScalar):
                what = f"'{str(key.value).lower() if key.value is not None else 'null'}'"
            raise SpecError(key.loc, "", f"mapping keys must be names or integers, not {what}",
                            "quote a name that YAML reads as a boolean or null")
        if key.value in first:
            raise SpecError(
                key.loc, f"{field}.{key.value}" if field else str(key.value),
                f"duplicate key (first defined at line {first[key.value].line})"
            )
        first[key.value] = key.loc
        items.append((key, value))
    return YMap(loc, tuple(items))


def _unbalanced(node: YNode) -> bool:
    return (
        isinstance(node, YScalar) and not node.quoted and isinstance(node.value, str)
        and node.value.count("(") > node.value.count(")")
    )


def _rejoin_seq(items: tuple[YNode, ...]) -> tuple[YNode, ...]:
    """Rejoin expressions that a flow list split at their commas.

    ``[n, div_ceil(q_len, 128), 1]`` reads as four plain items; an item whose
    parentheses do not balance is joined with the following plain items until they do.
    """
    out: list[YNode] = []
    for item in items:
        prev = out[-1] if out else None
        if prev is not None and _unbalanced(prev) and isinstance(item, YScalar) and not item.quoted \
                and item.value is not None:
            assert isinstance(prev, YScalar)
            out[-1] = YScalar(prev.loc, f"{prev.value}, {item.value}", False)
        else:
            out.append(item)
    return tuple(out)


def _rejoin_map(pairs: list[tuple[YNode, YNode]]) -> list[tuple[YNode, YNode]]:
    """The same for flow mappings: ``{size: div_ceil(a, b) * c}`` reads as a value
    ``div_ceil(a`` followed by a key ``b) * c`` without a value."""
    out: list[tuple[YNode, YNode]] = []
    for key, value in pairs:
        if out and _unbalanced(out[-1][1]) and isinstance(key, YScalar) and not key.quoted \
                and isinstance(key.value, (str, int)) and isinstance(value, YScalar) and value.value is None:
            pk, pv = out[-1]
            assert isinstance(pv, YScalar)
            out[-1] = (pk, YScalar(pv.loc, f"{pv.value}, {key.value}", False))
        else:
            out.append((key, value))
    return out


def _scalar(loc: SourceLoc, raw: str, style: str | None, field: str = "") -> YScalar:
    if style:  # quoted or block scalar: always a string
        return YScalar(loc, raw, True)
    if raw in ("", "~", "null"):
        return YScalar(loc, None, False)
    if raw in ("true", "false"):
        return YScalar(loc, raw == "true", False)
    if _INT.fullmatch(raw):
        return YScalar(loc, int(raw), False)
    if _FLOAT.fullmatch(raw):
        return YScalar(loc, float(raw), False)
    if raw in ("Null", "NULL"):
        raise SpecError(loc, field, f"'{raw}' is ambiguous YAML", "write null, or quote it for a string")
    if _YAML11_BOOL.fullmatch(raw):
        raise SpecError(
            loc, field, f"'{raw}' is a boolean in YAML 1.1 and a string in YAML 1.2",
            f"write true or false, or quote it for a string: '{raw}'",
        )
    if _NUMBERISH.fullmatch(raw):
        if _FLOATISH.fullmatch(raw):
            raise SpecError(
                loc, field,
                f"'{raw}' is not written as a plain decimal number (YAML 1.1 and 1.2 read such forms differently)",
                "write digits, a decimal point with a digit on each side, and an exponent only with its sign "
                "(0.000001, 1.0e-6, 1000.0, 1.0e+3), or quote it for a string",
            )
        raise SpecError(
            loc, field, f"'{raw}' is not a plain decimal integer",
            "write integers in decimal without '_' or leading zeros; quote it for a string",
        )
    return YScalar(loc, raw, False)
