"""Parsing types, attributes and constants (the reference's Types, Attributes and Constants rules)."""

from __future__ import annotations

import re

from coopnn.tl.ast import DictAttr
from coopnn.tl.scanner import Scanner
from coopnn.tl.types import (ADDRESS_SPACES, MATRIX_USES, CoopMatrixType, CoopVectorType, GroupType, MemrefType,
                             ScalarType, Type, VoidType, default_strides)

_NUMBER_TYPE = re.compile(r"(index|bf16|i16|i32|i64|i8|f16|f32|f64|c32|c64)(?![A-Za-wyz0-9_])")
ATTRIBUTE_NAMES = ("alignment", "shape_gcd", "stride_gcd", "subgroup_size", "unroll", "work_group_size")


def number_type(s: Scanner) -> ScalarType:
    match = s.regex(_NUMBER_TYPE)
    if not match:
        raise s.error(f"expected a number type (i8, i16, i32, i64, index, bf16, f16, f32, f64, c32, c64), "
                      f"found {s.found()}")
    return ScalarType(match.group(1))


def scalar_type(s: Scanner) -> ScalarType:
    """A number type or `bool`."""
    if s.eat_word("bool"):
        return ScalarType("bool")
    return number_type(s)


def _dynamic_or_integer(s: Scanner) -> int | None:
    if s.eat("?"):
        return None
    return s.integer("an integer constant or '?'")


def memref_type(s: Scanner) -> MemrefType:
    s.expect("memref<")
    element = number_type(s)
    shape = []
    while s.eat("x"):
        shape.append(_dynamic_or_integer(s))
    strides, space = default_strides(tuple(shape)), "global"
    if s.eat(","):
        if s.eat("strided<"):
            written = [] if s.peek(">") else [_dynamic_or_integer(s)]
            while s.eat(","):
                written.append(_dynamic_or_integer(s))
            s.expect(">", "after the strides")
            if len(written) != len(shape):
                raise s.error(f"a strided layout needs one stride per mode ({len(shape)}), got {len(written)}")
            strides = tuple(written)
            space = _address_space(s) if s.eat(",") else space
        else:
            space = _address_space(s)
    s.expect(">", "closing the memref type")
    return MemrefType(element, tuple(shape), strides, space)


def _address_space(s: Scanner) -> str:
    word = s.peek_word()
    if word not in ADDRESS_SPACES:
        raise s.error(f"expected a memory layout (strided<...>) or an address space (global, local), found {s.found()}")
    s.eat_word(word)
    return word


def group_type(s: Scanner) -> GroupType:
    s.expect("group<")
    memref = memref_type(s)
    s.expect("x", "before the group size")
    size = _dynamic_or_integer(s)
    offset = 0
    if s.eat(","):
        s.expect_word("offset")
        s.expect(":")
        offset = _dynamic_or_integer(s)
    s.expect(">", "closing the group type")
    return GroupType(memref, size, offset)


def coopmatrix_type(s: Scanner) -> CoopMatrixType:
    s.expect("coopmatrix<")
    component = number_type(s)
    s.expect("x", "before the rows")
    rows = s.integer("the rows")
    s.expect("x", "before the columns")
    columns = s.integer("the columns")
    s.expect(",")
    use = s.peek_word()
    if use not in MATRIX_USES:
        raise s.error(f"expected a matrix use ({', '.join(MATRIX_USES)}), found {s.found()}")
    s.eat_word(use)
    s.expect(">", "closing the coopmatrix type")
    return CoopMatrixType(component, rows, columns, use)


def coopvector_type(s: Scanner) -> CoopVectorType:
    """coopnn's extension type `coopvector<dtype x size>`."""
    s.expect("coopvector<")
    dtype = s.peek_word()
    match = dtype and re.match(r"(f32|f16|bool)x(\d+)$", dtype)
    if not match:
        raise s.error(f"expected coopvector<f32xN>, <f16xN> or <boolxN>, found {s.found()}")
    s.eat_word(dtype)
    s.expect(">", "closing the coopvector type")
    return CoopVectorType(match.group(1), int(match.group(2)))


def any_type(s: Scanner) -> Type:
    """The reference's `type`, with coopmatrix-type added (the rule leaves it out though for, if and yield use it)
    and coopnn's extension type coopvector."""
    if s.peek("coopvector<"):
        return coopvector_type(s)
    if s.peek("memref<"):
        return memref_type(s)
    if s.peek("group<"):
        return group_type(s)
    if s.peek("coopmatrix<"):
        return coopmatrix_type(s)
    if s.eat_word("void"):
        return VoidType()
    return scalar_type(s)


def attribute(s: Scanner):
    """An attribute value: an int, a bool, a str, a tuple (array) or a DictAttr."""
    if s.peek("{"):
        return dictionary(s)
    if s.eat("["):
        items = [] if s.peek("]") else [attribute(s)]
        while s.eat(","):
            items.append(attribute(s))
        s.expect("]", "closing the array attribute")
        return tuple(items)
    if s.eat_word("true"):
        return True
    if s.eat_word("false"):
        return False
    text = s.string()
    if text is not None:
        return text
    value = s.floating()  # coopnn's extension: floating attributes, for its kernel instructions' constants
    if value is not None:
        return value
    if s.peek_integer():
        return s.integer()
    raise s.error(f"expected an attribute (array, boolean, dictionary, integer or string), found {s.found()}")


def dictionary(s: Scanner) -> DictAttr:
    s.expect("{")
    items: dict[str, object] = {}
    while not s.peek("}"):
        if items:
            s.expect(",", "between named attributes")
        name_start = s.skip()
        name = s.string()
        if name is None:
            name = s.peek_word()
            if name not in ATTRIBUTE_NAMES:
                raise s.error(f"expected an attribute name ({', '.join(ATTRIBUTE_NAMES)} or a string), "
                              f"found {s.found()}")
            s.eat_word(name)
        if name in items:
            raise s.error(f"attribute {name!r} is given twice", name_start)
        s.expect("=")
        items[name] = attribute(s)
    s.expect("}", "closing the dictionary attribute")
    return DictAttr(tuple(sorted(items.items())))


def constant(s: Scanner):
    """A boolean, integer, floating or complex constant; which it is decides what types it may take."""
    if s.eat_word("true"):
        return True
    if s.eat_word("false"):
        return False
    if s.eat("["):
        real = _floating(s)
        s.expect(",", "between the real and imaginary parts")
        imaginary = _floating(s)
        s.expect("]", "closing the complex constant")
        return complex(real, imaginary)
    value = s.floating()
    if value is not None:
        return value
    if s.peek_integer():
        return s.integer()
    raise s.error(f"expected a constant (true, false, an integer, a floating constant or [re, im]), found {s.found()}")


def _floating(s: Scanner) -> float:
    value = s.floating()
    if value is None:
        if s.peek_integer():
            return float(s.integer())
        raise s.error(f"expected a floating constant, found {s.found()}")
    return value
