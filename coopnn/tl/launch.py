"""How a kernel is launched: its subgroup size, two-dimensional work-group size and three-dimensional grid of
work-groups, from the function's attributes where it gives them (the interpreter and the compiler agree on the
defaults through this one place)."""

from __future__ import annotations

from dataclasses import dataclass

from coopnn.errors import InputError
from coopnn.tl import ast

DEFAULT_SUBGROUP_SIZE = 16
DEFAULT_WORK_ITEMS = 64  # the first mode of the default work-group size, where the subgroup size divides it


@dataclass(frozen=True)
class MatrixShape:
    """A subgroup-scope cooperative-matrix product the device offers (VK_KHR_cooperative_matrix): M x K times
    K x N plus M x N, by tensor-language component types."""

    m: int
    n: int
    k: int
    a: str
    b: str
    c: str


@dataclass(frozen=True)
class Launch:
    subgroup_size: int
    work_group_size: tuple[int, int]
    num_groups: tuple[int, int, int]
    matrix_shapes: tuple[MatrixShape, ...] = ()  # what gemm may lower to; none: loops

    @property
    def work_items(self) -> int:
        return self.work_group_size[0] * self.work_group_size[1]


def grid(num_groups) -> tuple[int, int, int]:
    grid = (num_groups,) if isinstance(num_groups, int) else tuple(num_groups)
    if not 1 <= len(grid) <= 3 or any(type(n) is not int or n < 1 for n in grid):
        raise InputError(f"groups takes one to three positive integers (the work-groups along x, y, z); got "
                         f"{num_groups!r}")
    return tuple(grid) + (1,) * (3 - len(grid))


def launch_for(function: ast.Function, subgroup_size: int | None = None, num_groups=(1, 1, 1),
               matrix_shapes: tuple[MatrixShape, ...] = ()) -> Launch:
    """The launch of `function`: its subgroup_size attribute, else `subgroup_size`, else 16; its work_group_size,
    else (64, 1) (or one subgroup where 64 is not a multiple of it)."""
    if function.results:
        raise InputError(f"@{function.name} returns values: it is a function for use inside models "
                         f"(coopnn.tl.activation, coopnn.tl.encoding, coopnn.tl.loss), not a kernel to launch")
    wanted = function.attributes.get("subgroup_size")
    size = wanted or subgroup_size or DEFAULT_SUBGROUP_SIZE
    if wanted and subgroup_size and wanted != subgroup_size:
        raise InputError(f"@{function.name} asks for subgroup size {wanted}; this device runs {subgroup_size}")
    shape = function.attributes.get("work_group_size")
    if shape is None:
        shape = (DEFAULT_WORK_ITEMS if DEFAULT_WORK_ITEMS % size == 0 else size, 1)
    elif shape[0] % size:
        raise InputError(f"@{function.name}'s work_group_size {list(shape)} is not a multiple of the subgroup size "
                         f"{size} in its first mode")
    return Launch(size, tuple(shape), grid(num_groups), tuple(matrix_shapes))
