"""A VK_KHR_cooperative_matrix value kept in a Function variable, so that an invocation can read and write the
components it holds one at a time: the cooperative-matrix tile kernels' epilogues (coopmat inference, the tiled
training step). Which element of the matrix a component is, the implementation decides; components of matrices of one
type are the same elements."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from coopnn.shaders.spirv import Id


class HeldMatrix:
    def __init__(self, fn, matrix_type: Id, component_type: Id, value: Id | None = None, name: str = "held"):
        """A variable of `matrix_type` (components of `component_type`) in function `fn`, set to `value` if given."""
        self.fn, self.matrix_type, self.component_type = fn, matrix_type, component_type
        self.variable = fn.variable(matrix_type, name=name)
        if value is not None:
            fn.ops.store(self.variable, value)

    def pointer(self, index: Id) -> Id:
        """A pointer to component `index`, for OpLoad and OpStore."""
        return self.fn.ops.access_chain(self.fn.module.type_pointer("Function", self.component_type),
                                        self.variable, index)

    def load(self, index: Id) -> Id:
        return self.fn.ops.load(self.component_type, self.pointer(index))

    def value(self) -> Id:
        """The whole matrix, as its components are now."""
        return self.fn.ops.load(self.matrix_type, self.variable)


@contextmanager
def components(fn, matrix_type: Id) -> Iterator[Id]:
    """A loop over the components an invocation holds of a matrix of `matrix_type`; yields the component's index."""
    u32 = fn.module.type_int(32, False)
    length = fn.ops.matrix_length(u32, matrix_type)
    with fn.for_range(fn.module.constant(u32, 0), length) as index:
        yield index
