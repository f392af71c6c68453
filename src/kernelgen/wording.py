"""English for messages: plurals and the indefinite article."""

from __future__ import annotations


def plural_noun(noun: str) -> str:
    """The plural of ``noun``, the last word of a phrase (``directory`` -> ``directories``,
    ``axis`` -> ``axes``, ``nvcc flag`` -> ``nvcc flags``)."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u", ""):
        return noun[:-1] + "ies"
    if noun.endswith("is"):
        return noun[:-2] + "es"
    if noun.endswith(("s", "x", "sh", "ch")):
        return noun + "es"
    return noun + "s"


def count(n: int, noun: str) -> str:
    """``n`` and the noun, singular for one: ``1 module``, ``3 modules``, ``1 kernel function``."""
    return f"{n} {noun if n == 1 else plural_noun(noun)}"


def article(phrase: str) -> str:
    """``phrase`` after ``a`` or ``an``, by its first letter (``an argument name``, ``a kernel name``)."""
    first = phrase[:1].lower()
    return f"{'an' if first and first in 'aeiou' else 'a'} {phrase}"


def joined(items: list[str], conjunction: str) -> str:
    """``a``, ``a and b``, ``a, b and c`` (with ``conjunction`` "and" or "or")."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {conjunction} {items[-1]}"
