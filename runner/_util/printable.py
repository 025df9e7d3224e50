"""Text from outside (a provider's error, a model's reply, a hand-edited summary.json) made safe to show.

A terminal obeys escape sequences (clear the screen, set the title, plant a link) and bidirectional overrides
reorder what it shows, so text that reaches one is shown literally: control and bidi-override characters are
dropped, lone surrogates (half an emoji cut at a token boundary) become U+FFFD, and nothing is read as markup.
"""

from __future__ import annotations

import re

from rich.text import Text

# C0 and C1 controls (DEL included) and the bidirectional embedding, override and isolate characters.
_UNSHOWABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSHOWABLE_KEEP_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: object, *, one_line: bool = True) -> str:
    """``text`` as a terminal shows it as it reads: controls dropped; with ``one_line`` whitespace runs (line
    breaks included) become one space, else line breaks and tabs are kept (a message listing several problems)."""
    s = str(text)
    if one_line:
        s = _UNSHOWABLE.sub("", " ".join(s.split()))
    else:
        s = _UNSHOWABLE_KEEP_LINES.sub("", s.replace("\r\n", "\n"))
    return _SURROGATE.sub("\ufffd", s)


def literal(text: object) -> Text:
    """``printable`` as a rich Text, which rich never parses as markup (``[/v1/keys]`` stays as written)."""
    return Text(printable(text))
