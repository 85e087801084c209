"""How tensor-language values live in SPIR-V: the type a scalar is held in (bf16 as a float32 holding a bfloat16
value, complex as a two-component vector), the type it is stored in memory as (bf16 as 16-bit words), conversions
between the two, and constants."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from coopnn.shaders.spirv import Id, Module
from coopnn.tl.types import ScalarType

BF16_ROUNDING_BIAS = 0x7FFF  # round to nearest even when dropping the low 16 bits of a float32


def value_type(m: Module, t: ScalarType) -> Id:
    """The SPIR-V type a value of `t` is held in."""
    name = t.name
    if name == "bool":
        return m.type_bool()
    if t.is_integer:
        return m.type_int(64 if name == "index" else int(name[1:]), True)
    if name == "bf16":
        return m.type_float(32)
    if t.is_complex:
        return m.type_vector(m.type_float(32 if name == "c32" else 64), 2)
    return m.type_float(int(name[1:]))


def storage_type(m: Module, t: ScalarType) -> Id:
    """The SPIR-V type an element of `t` is stored as in a buffer or workgroup array: floating values as their
    bits (unsigned integers of their width, bf16 as 16-bit words), so that atomics reach them through integer
    pointers (logical addressing cannot cast pointers); integers and booleans as themselves."""
    if t.is_integer or t.is_bool:
        return value_type(m, t)
    bits = m.type_int(8 * t.component().size if t.name != "bf16" else 16, False)
    return m.type_vector(bits, 2) if t.is_complex else bits


def constant(m: Module, t: ScalarType, value) -> Id:
    if t.is_complex:
        return m.constant(value_type(m, t), [float(complex(value).real), float(complex(value).imag)])
    if t.is_bool:
        return m.constant(m.type_bool(), bool(value))
    if t.is_integer:
        return m.constant(value_type(m, t), int(value))
    if t.name == "bf16":
        return m.constant(m.type_float(32), _bf16_value(float(value)))
    return m.constant(value_type(m, t), float(value))


def _bf16_value(value: float) -> float:
    return float(np.float32(np.asarray(value, np.float32).astype(ml_dtypes.bfloat16)))


def round_bf16(fn, x: Id) -> Id:
    """A float32 rounded to the nearest bfloat16 (ties to even), still held as float32."""
    m = fn.module
    u32 = m.type_int(32, False)
    bits = fn.ops.bitcast(u32, x)
    odd = fn.ops.bitwise_and(u32, fn.ops.shift_right(u32, bits, m.constant(u32, 16)),
                             m.constant(u32, 1))
    rounded = fn.ops.int_add(u32, fn.ops.int_add(u32, bits, m.constant(u32, BF16_ROUNDING_BIAS)), odd)
    kept = fn.ops.bitwise_and(u32, rounded, m.constant(u32, 0xFFFF0000))
    return fn.ops.bitcast(m.type_float(32), kept)


def from_storage(fn, t: ScalarType, stored: Id) -> Id:
    m = fn.module
    if t.is_integer or t.is_bool:
        return stored
    if t.name != "bf16":
        return fn.ops.bitcast(value_type(m, t), stored)
    u32 = m.type_int(32, False)
    wide = fn.ops.uint_convert(u32, stored)
    return fn.ops.bitcast(m.type_float(32), fn.ops.shift_left(u32, wide, m.constant(u32, 16)))


def to_storage(fn, t: ScalarType, value: Id) -> Id:
    m = fn.module
    if t.is_integer or t.is_bool:
        return value
    if t.name != "bf16":
        return fn.ops.bitcast(storage_type(m, t), value)
    u32 = m.type_int(32, False)
    bits = fn.ops.bitcast(u32, round_bf16(fn, value))
    return fn.ops.uint_convert(m.type_int(16, False), fn.ops.shift_right(u32, bits, m.constant(u32, 16)))
