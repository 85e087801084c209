"""The calling convention of a compiled kernel: which storage buffer each memref and group argument binds to, and
where its dope vector (associated flag, shape, strides; a group's memref count and table) and each scalar argument
sit in the argument buffer at binding 0.

The argument buffer is an array of 8-byte slots: a memref of order n takes 1 + 2n (associated, sizes, strides), a
group 3 (associated, count, the slot its table starts at), a scalar 1 (c64: 2) holding its bits. Group tables follow
the fixed slots: per memref its offset in the group's buffer, sizes and strides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coopnn.tl import ast
from coopnn.tl.arguments import BoundGroup, BoundMemref
from coopnn.tl.types import GroupType, MemrefType, ScalarType

ARGUMENT_BINDING = 0


@dataclass(frozen=True)
class Slot:
    argument: str
    kind: str  # memref, group, scalar
    slot: int  # first slot in the argument buffer
    binding: int | None  # storage buffer of a memref or group


def argument_slots(function: ast.Function) -> tuple[tuple[Slot, ...], int]:
    """Where each argument goes, and how many fixed slots there are."""
    slots, next_slot, next_binding = [], 0, ARGUMENT_BINDING + 1
    for argument in function.arguments:
        t = argument.type
        if isinstance(t, MemrefType):
            slots.append(Slot(argument.value.name, "memref", next_slot, next_binding))
            next_slot, next_binding = next_slot + 1 + 2 * t.order, next_binding + 1
        elif isinstance(t, GroupType):
            slots.append(Slot(argument.value.name, "group", next_slot, next_binding))
            next_slot, next_binding = next_slot + 3, next_binding + 1
        else:
            slots.append(Slot(argument.value.name, "scalar", next_slot, None))
            next_slot += 2 if t.name == "c64" else 1
    return tuple(slots), next_slot


def _scalar_slots(t: ScalarType, value: np.ndarray) -> list[int]:
    raw = np.zeros(16, np.uint8)
    data = np.asarray(value, t.numpy).reshape(1).view(np.uint8)
    raw[:data.size] = data
    return list(raw.view(np.uint64)[:2 if t.name == "c64" else 1])


def argument_words(function: ast.Function, bound: list) -> np.ndarray:
    """The argument buffer's contents (as 64-bit slots) for arguments bound by `coopnn.tl.arguments`."""
    slots, fixed = argument_slots(function)
    values: list[int] = [0] * fixed
    tables: list[int] = []
    for slot, argument, item in zip(slots, function.arguments, bound):
        if isinstance(item, BoundMemref):
            values[slot.slot:slot.slot + 1 + 2 * len(item.shape)] = [int(item.buffer is not None), *item.shape,
                                                                       *item.strides]
        elif isinstance(item, BoundGroup):
            values[slot.slot:slot.slot + 3] = [1, len(item.members), fixed + len(tables)]
            for member in item.members:
                tables.extend([member.offset, *member.shape, *member.strides])
        else:
            words = _scalar_slots(argument.type, item)
            values[slot.slot:slot.slot + len(words)] = words
    return np.array([v & 0xFFFFFFFFFFFFFFFF for v in values + tables] or [0], np.uint64)
