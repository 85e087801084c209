"""`parse(text)`: tensor-language text to a `Program`, by recursive descent over the reference's ABNF (the slips of the
reference and how they are read are listed in docs/tensor-language.md)."""

from __future__ import annotations

import re

from coopnn.tl import parse_control, parse_coopmatrix, parse_memory, parse_ops  # noqa: F401 (they register readers)
from coopnn.tl.ast import Argument, DictAttr, Function, Program
from coopnn.tl.errors import TensorLanguageError
from coopnn.tl.parse_base import FreshNames, region
from coopnn.tl.parse_types import any_type, dictionary
from coopnn.tl.scanner import Scanner

_NAMED_ATTRIBUTE = re.compile(r'\{\s*(?:[A-Za-z_]\w*|"[^"]*")\s*=')


def _argument(s: Scanner) -> Argument:
    value = s.local("an argument")
    s.expect(":")
    argument_type = any_type(s)
    attributes = dictionary(s) if s.peek("{") else DictAttr()
    return Argument(value, argument_type, attributes)


def _function(s: Scanner, fresh: FreshNames) -> Function:
    start = s.skip()
    s.expect_word("func", "(a program is a list of function definitions)")
    name = s.global_name()
    s.expect("(")
    arguments = s.items_until(")", lambda: _argument(s), "between arguments")
    results = _results(s) if s.eat("->") else ()
    attributes = DictAttr()
    if s.eat_word("attributes"):
        attributes = dictionary(s)
    elif s.peek("{") and _looks_like_dictionary(s):
        raise s.error("function attributes follow the keyword 'attributes': func @f(...) attributes {...} {...}")
    body = region(s, fresh)
    return Function(name, tuple(arguments), attributes, body, s.span(start), results)


def _results(s: Scanner) -> tuple:
    """coopnn's extension: `-> (type, ...)` as `if` writes it, or one type without the parentheses."""
    if not s.eat("("):
        return (any_type(s),)
    return tuple(s.items_until(")", lambda: any_type(s), "between result types"))


def _looks_like_dictionary(s: Scanner) -> bool:
    """Whether the `{` ahead opens `{name=...}` (a dictionary written without `attributes`) rather than a region."""
    return _NAMED_ATTRIBUTE.match(s.text, s.skip()) is not None


def parse(text: str, source_name: str = "") -> Program:
    """The program `text` defines; TensorLanguageError with the source range of the first syntax error."""
    s = Scanner(text)
    fresh = FreshNames(text)
    functions = []
    try:
        while not s.at_end():
            functions.append(_function(s, fresh))
    except TensorLanguageError as error:
        raise TensorLanguageError(error.diagnostics, source_name) from None
    return Program(tuple(functions))
