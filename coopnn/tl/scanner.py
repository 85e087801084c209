"""Reading tensor-language text character by character: white space and `;` comments skipped between tokens, literal
punctuation and keywords, regular-expression tokens, and source ranges (line.column) of what was read.

The parser reads the text directly rather than a token stream, because the language's tokens depend on where they
stand: `f32x4x8` is one run of letters in a memref type but a type and two modes there.
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, TypeVar

from coopnn.tl.ast import Span, Value
from coopnn.tl.errors import Diagnostic, TensorLanguageError

T = TypeVar("T")

_SPACE = re.compile(r"(?:\s+|;[^\n]*)*")
IDENTIFIER = r"(?:[0-9]+|[A-Za-z][A-Za-z0-9_]*)"
_LOCAL = re.compile(r"%(" + IDENTIFIER + r")")
_GLOBAL = re.compile(r"@(" + IDENTIFIER + r")")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPCODE = re.compile(r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*")
_INTEGER = re.compile(r"[+-]?[0-9]+(?![0-9.])")
_HEX_FLOAT = r"[+-]?0x(?:[0-9a-fA-F]*\.[0-9a-fA-F]+|[0-9a-fA-F]+\.?)(?:p[+-]?[0-9]+)?"
_DEC_FLOAT = r"[+-]?(?:[0-9]*\.[0-9]+(?:e[+-]?[0-9]+)?|[0-9]+\.(?:e[+-]?[0-9]+)?|[0-9]+e[+-]?[0-9]+)"
_FLOAT = re.compile(rf"(?:{_HEX_FLOAT}|{_DEC_FLOAT}|[+-]?inf|[+-]?nan)(?![A-Za-z0-9_])")
_STRING = re.compile(r'"([\x20\x21\x23-\x7e]*)"')
INT64_LIMIT = 2 ** 63 - 1


class Scanner:
    """A cursor over `text`; every reading method skips white space and comments first."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def skip(self) -> int:
        self.pos = _SPACE.match(self.text, self.pos).end()
        return self.pos

    def at_end(self) -> bool:
        return self.skip() >= len(self.text)

    def location(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return line + 1, offset - self._line_starts[line] + 1

    def span(self, start: int, end: int | None = None) -> Span:
        """The range from offset `start` to the last character read (or to offset `end`)."""
        end = self.pos if end is None else end
        line, column = self.location(start)
        end_line, end_column = self.location(max(start, end - 1))
        return Span(line, column, end_line, end_column)

    def error(self, message: str, start: int | None = None) -> TensorLanguageError:
        start = self.skip() if start is None else start
        return TensorLanguageError([Diagnostic(self.span(start, max(self.pos, start + 1)), message)])

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.skip())

    def eat(self, literal: str) -> bool:
        if self.peek(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, context: str = "") -> None:
        if not self.eat(literal):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{literal}'{where}, found {self.found()}")

    def items_until(self, close: str, read: Callable[[], T], between: str) -> list[T]:
        """What `read` reads, item after item separated by commas, up to `close` (`between` names the commas)."""
        items = []
        while not self.eat(close):
            if items:
                self.expect(",", between)
            items.append(read())
        return items

    def found(self) -> str:
        start = self.skip()
        if start >= len(self.text):
            return "the end of the text"
        word = _WORD.match(self.text, start) or re.compile(r"\S{1,12}").match(self.text, start)
        return repr(word.group(0))

    def regex(self, pattern: re.Pattern) -> re.Match | None:
        match = pattern.match(self.text, self.skip())
        if match:
            self.pos = match.end()
        return match

    def peek_word(self) -> str | None:
        match = _WORD.match(self.text, self.skip())
        return match.group(0) if match else None

    def eat_word(self, word: str) -> bool:
        if self.peek_word() == word:
            self.pos += len(word)
            return True
        return False

    def expect_word(self, word: str, context: str = "") -> None:
        if not self.eat_word(word):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{word}'{where}, found {self.found()}")

    def opcode(self) -> str | None:
        match = self.regex(_OPCODE)
        return match.group(0) if match else None

    def local(self, what: str = "a local identifier") -> Value:
        start = self.skip()
        match = self.regex(_LOCAL)
        if not match:
            raise self.error(f"expected {what} (%name), found {self.found()}")
        return Value(match.group(1), self.span(start))

    def peek_local(self) -> bool:
        return self.peek("%")

    def global_name(self) -> str:
        match = self.regex(_GLOBAL)
        if not match:
            raise self.error(f"expected a global identifier (@name), found {self.found()}")
        return match.group(1)

    def integer(self, what: str = "an integer constant") -> int:
        start = self.skip()
        match = self.regex(_INTEGER)
        if not match:
            raise self.error(f"expected {what}, found {self.found()}")
        value = int(match.group(0))
        if abs(value) > INT64_LIMIT:
            raise self.error("integer constants must lie in -2^63+1 .. 2^63-1", start)
        return value

    def peek_integer(self) -> bool:
        return _INTEGER.match(self.text, self.skip()) is not None

    def floating(self) -> float | None:
        match = self.regex(_FLOAT)
        if not match:
            return None
        text = match.group(0)
        return float.fromhex(text) if "0x" in text.lower() else float(text)

    def string(self) -> str | None:
        match = self.regex(_STRING)
        return match.group(1) if match else None
