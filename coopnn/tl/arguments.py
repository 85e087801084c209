"""Binding a kernel's arguments from numpy: what a memref or group argument's array becomes (a flat buffer, its shape
and its strides in elements, the dope vector) and how results are copied back, shared by the interpreter and the
compiled kernels so that both read and write user arrays the same way.

A memref argument takes an array of its shape (a `?` takes any size) and its element type exactly. The kernel works
on a flat column-major copy unless the array's own strides already satisfy every static stride of the type; written
values are copied back into the caller's array after the run. A group argument takes a sequence of such arrays.
A scalar argument takes a Python or numpy number of a kind the type holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from coopnn.errors import InputError
from coopnn.tl import ast
from coopnn.tl.types import GroupType, MemrefType, ScalarType


@dataclass
class BoundMemref:
    """A memref argument: `buffer` (flat, the element type's dtype), where the memref starts in it, its shape and
    strides in elements, and the caller's array to copy results into (None when the kernel worked in it)."""

    buffer: np.ndarray | None
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    source: np.ndarray | None = None

    def strided(self) -> np.ndarray:
        """The memref as a numpy view of `buffer` (writes go to the buffer)."""
        itemsize = self.buffer.itemsize
        return np.lib.stride_tricks.as_strided(self.buffer[self.offset:], self.shape,
                                               tuple(s * itemsize for s in self.strides))

    def copy_back(self) -> None:
        if self.source is not None and self.buffer is not None:
            self.source[...] = self.strided()


@dataclass
class BoundGroup:
    """A group argument: its memrefs laid one after another in one buffer."""

    buffer: np.ndarray
    members: list[BoundMemref]
    offset: int

    def copy_back(self) -> None:
        for member in self.members:
            member.copy_back()


def packed_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, running = [], 1
    for size in shape:
        strides.append(running)
        running *= max(size, 1)
    return tuple(strides)


def _shape(name: str, memref: MemrefType, array: np.ndarray) -> tuple[int, ...]:
    if array.ndim != memref.order or any(s is not None and s != n for s, n in zip(memref.shape, array.shape)):
        raise InputError(f"argument %{name} is {memref}; got an array of shape {list(array.shape)}")
    if array.dtype != memref.element.numpy:
        raise InputError(f"argument %{name} holds {memref.element} ({memref.element.numpy}); got {array.dtype}")
    return tuple(int(n) for n in array.shape)


def _own_strides(array: np.ndarray) -> tuple[int, ...] | None:
    itemsize = array.itemsize
    if any(s <= 0 or s % itemsize for s in array.strides):
        return None
    return tuple(s // itemsize for s in array.strides)


def _layout(memref: MemrefType, shape: tuple[int, ...], array: np.ndarray) -> tuple[tuple[int, ...], bool]:
    """The strides the kernel sees, and whether the array's own memory can be used."""
    own = _own_strides(array) if array.size else None
    if own is not None and all(s is None or s == o for s, o in zip(memref.strides, own)):
        return own, True
    packed = packed_strides(shape)
    strides = tuple(s if s is not None else p for s, p in zip(memref.strides, packed))
    return strides, False


def _span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    if any(n == 0 for n in shape):
        return 1
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def bind_memref(name: str, memref: MemrefType, value) -> BoundMemref:
    if value is None:
        return BoundMemref(None, 0, tuple(s or 0 for s in memref.shape), tuple(s or 0 for s in memref.strides))
    if not isinstance(value, np.ndarray):
        raise InputError(f"argument %{name} is {memref}: pass a numpy array, got {type(value).__name__}")
    shape = _shape(name, memref, value)
    strides, in_place = _layout(memref, shape, value)
    if in_place and value.flags.writeable:
        # every stride is positive, so the elements lie in the span from the first one on: a flat view of it
        flat = np.lib.stride_tricks.as_strided(value, (_span(shape, strides),), (value.itemsize,))
        return BoundMemref(flat, 0, shape, strides, None)
    buffer = np.zeros(_span(shape, strides), value.dtype)
    bound = BoundMemref(buffer, 0, shape, strides, value)
    if value.size:
        bound.strided()[...] = value
    return bound


def bind_group(name: str, group: GroupType, value) -> BoundGroup:
    if isinstance(value, np.ndarray) or not hasattr(value, "__len__"):
        raise InputError(f"argument %{name} is {group}: pass a sequence of numpy arrays")
    if group.size is not None and len(value) != group.size:
        raise InputError(f"argument %{name} is {group}: pass {group.size} arrays, got {len(value)}")
    members = [bind_memref(f"{name}[{k}]", group.memref, v) for k, v in enumerate(value)]
    offset = group.offset if group.offset is not None else 0
    sizes = [len(m.buffer) + offset for m in members]
    buffer = np.zeros(max(sum(sizes), 1), group.memref.element.numpy)
    start = 0
    for member, size in zip(members, sizes):
        buffer[start + offset:start + size] = member.buffer
        member.source = member.source if member.source is not None else np.lib.stride_tricks.as_strided(
            member.buffer, member.shape, tuple(s * member.buffer.itemsize for s in member.strides))
        member.buffer, member.offset = buffer, start + offset
        start += size
    return BoundGroup(buffer, members, offset)


def bind_scalar(name: str, scalar: ScalarType, value):
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype == scalar.numpy and np.ndim(value) == 0:
        return np.asarray(value)
    kind = np.asarray(value).dtype.kind if value is not None else "O"
    accepted = {"bool": "b", "c": "biufc"}.get("c" if scalar.is_complex else scalar.name,
                                               "biu" if scalar.is_integer else "biuf")
    if np.ndim(value) != 0 or kind not in accepted:
        raise InputError(f"argument %{name} is {scalar}; got {value!r}")
    return np.asarray(value).astype(scalar.numpy)


def bind_arguments(function: ast.Function, args: tuple) -> list:
    """One bound value per argument of `function`: BoundMemref, BoundGroup or a numpy scalar."""
    if len(args) != len(function.arguments):
        listed = ", ".join(f"%{a.value.name}: {a.type}" for a in function.arguments)
        raise InputError(f"@{function.name} takes {len(function.arguments)} arguments ({listed}); got {len(args)}")
    bound = []
    for argument, value in zip(function.arguments, args):
        name, kind = argument.value.name, argument.type
        if isinstance(kind, MemrefType):
            bound.append(bind_memref(name, kind, value))
        elif isinstance(kind, GroupType):
            bound.append(bind_group(name, kind, value))
        else:
            bound.append(bind_scalar(name, kind, value))
    return bound
