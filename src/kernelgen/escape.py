"""Escaping of spec text for each place it lands: comments and C/C++ string literals."""

from __future__ import annotations


def comment_text(s: str) -> str:
    """Text safe inside any comment: // and /* */ in C and C++, # in Python and CMake.

    Printable ASCII only; no backslashes (a trailing one would splice the next line into
    a // comment); no comment delimiters that could end a /* */ block or open another."""
    s = s.replace("\n", " ")
    if s.isascii() and s.isprintable() and "\\" not in s:  # the common case, unchanged but for */ and /*
        return s.replace("*/", "* /").replace("/*", "/ *")
    out = []
    for ch in s.replace("\n", " "):
        if ch == "\\":
            out.append("/")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append(f"U+{ord(ch):04X}")
    return "".join(out).replace("*/", "* /").replace("/*", "/ *")


def c_string(s: str) -> str:
    """A C/C++ string literal holding ``s`` exactly (UTF-8, octal-escaped)."""
    if s.isascii() and s.isprintable() and not any(c in s for c in '"\\?'):
        return f'"{s}"'  # nothing to escape
    out = ['"']
    for b in s.encode("utf-8"):
        ch = chr(b)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= b < 0x7F and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)
