"""The code of a streamed smolagents reply, as far as it is final (``CodeTail``).

smolagents parses a code action out of the model's complete reply: the text between the
agent's ``code_block_tags`` (regular expressions), stripped. While the reply streams, this
forwards the part of that code no later text can change, so the executor can feed it to
a Pysolate run; the executor checks that it is a prefix of what smolagents finally parses.
"""

from __future__ import annotations

import re

DEFAULT_CODE_BLOCK_TAGS = ("<code>", "</code>")
"""CodeAgent's default ``code_block_tags`` (regular expressions, as smolagents reads them)."""


class CodeTail:
    """The code of a streamed smolagents reply, as far as it is final, chunk by chunk.

    ``feed(text)`` returns the new code to forward: the text after the first match of the
    opening tag, leading whitespace skipped, up to the closing tag. It forwards only up to
    the last newline seen, and holds trailing whitespace back, because smolagents strips
    the block (``match.strip()``) and a partly streamed closing tag must never be taken for
    code. A wrong guess is harmless (the executor checks the prefix), so this is a plain
    best effort with no state beyond the text.
    """

    def __init__(self, code_block_tags: tuple[str, str] = DEFAULT_CODE_BLOCK_TAGS) -> None:
        self._opening = re.compile(code_block_tags[0])
        self._closing = re.compile(code_block_tags[1])
        self._text = ""
        self._start: int | None = None  # where the code starts in _text, once found
        self._sent = 0  # characters of code already returned
        self._closed = False

    def feed(self, text: str) -> str:
        """Append ``text`` of the reply; return the code that became final."""
        self._text += text
        if self._closed:
            return ""
        if self._start is None:
            found = self._opening.search(self._text)
            # The match must be followed by a character, so "```py" is not taken for "```python".
            if found is None or found.end() == len(self._text):
                return ""
            self._start = found.end()
        stripped = self._text[self._start :].lstrip()
        closing = self._closing.search(stripped)
        if closing is not None:
            stripped, self._closed = stripped[: closing.start()], True
        else:
            newline = stripped.rfind("\n")
            stripped = stripped[:newline] if newline >= 0 else ""
        final = stripped.rstrip()
        new, self._sent = final[self._sent :], max(self._sent, len(final))
        return new
