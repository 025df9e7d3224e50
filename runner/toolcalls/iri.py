"""The ``iri`` and ``iri-reference`` formats (RFC 3987), checked through RFC 3987's own mapping to a URI.

jsonschema checks these formats only when ``rfc3987-syntax`` is importable, and that package compiles 38 Lark
grammars whenever it is imported: 2.5 s of CPU in every process that imports jsonschema (LiteLLM does), which was
most of a trial pod's start-up and of ``mcpfleet run``'s (bench/bench_imports.py). It is not installed; the
checker adds these two formats itself instead.

RFC 3987, section 3.1: an IRI maps to a URI by percent-encoding, as UTF-8, each of its non-ASCII characters,
and a string is an IRI exactly when every non-ASCII character is one the IRI grammar allows where it stands
(``ucschar`` anywhere, ``iprivate`` in the query only) and its mapping is a URI. The URI grammar is the one
jsonschema's ``uri`` format already uses (``rfc3986-validator``).
"""

from __future__ import annotations

from urllib.parse import quote

from rfc3986_validator import validate_rfc3986

# RFC 3987, section 2.2.
UCSCHAR = (
    (0xA0, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
    *((plane << 16, (plane << 16) | 0xFFFD) for plane in range(1, 14)),
    (0xE1000, 0xEFFFD),
)
IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))


def _within(code: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= code <= high for low, high in ranges)


def _encode(part: str, allowed: tuple[tuple[int, int], ...]) -> str | None:
    """``part`` with its non-ASCII characters percent-encoded; None if one is not in ``allowed``."""
    out = []
    for ch in part:
        if ch.isascii():
            out.append(ch)
        elif _within(ord(ch), allowed):
            out.append(quote(ch, safe=""))
        else:
            return None
    return "".join(out)


def to_uri(value: str) -> str | None:
    """The URI an IRI maps to (RFC 3987, 3.1), or None when a character is not allowed where it stands."""
    rest, hash_, fragment = value.partition("#")
    head, question, query = rest.partition("?")
    encoded = [_encode(head, UCSCHAR), _encode(query, UCSCHAR + IPRIVATE), _encode(fragment, UCSCHAR)]
    if any(part is None for part in encoded):
        return None
    head_uri, query_uri, fragment_uri = encoded
    return f"{head_uri}{question}{query_uri}{hash_}{fragment_uri}"


def _valid(value: str, rule: str) -> bool:
    # The validator's pattern ends in "$", which also matches before a final newline: no newline is valid anyway.
    uri = to_uri(value)
    return uri is not None and "\n" not in uri and validate_rfc3986(uri, rule=rule) is not None


def is_iri(instance: object) -> bool:
    """The ``iri`` format: non-strings pass, as every format check lets them."""
    return not isinstance(instance, str) or _valid(instance, "URI")


def is_iri_reference(instance: object) -> bool:
    """The ``iri-reference`` format: an IRI or a relative reference."""
    return not isinstance(instance, str) or _valid(instance, "URI_reference")
