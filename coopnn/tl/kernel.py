"""`compile(text)`: a tensor-language function compiled to SPIR-V and loaded on a Vulkan device, as a callable on
numpy arrays (and `coopnn.to_device` arrays for float32 memrefs whose static strides allow their row-major layout).

    kernel = coopnn.tl.compile(text)          # the only function of text, or function="name"
    kernel(a, b, c, 16, groups=(4, 1))       # arguments in order; results written into the numpy arrays
"""

from __future__ import annotations

import numpy as np

from coopnn.errors import CompileError, InputError
from coopnn.tl import ast
from coopnn.tl.arguments import BoundGroup, BoundMemref, bind_arguments
from coopnn.tl.checker import checked
from coopnn.tl.codegen.compile import CompiledFunction, compile_function
from coopnn.tl.codegen.layout import argument_words
from coopnn.tl.launch import MatrixShape, grid, launch_for
from coopnn.tl.parser import parse
from coopnn.tl.types import MemrefType

MIN_BUFFER_BYTES = 16  # a buffer is never empty, even for an unassociated or empty memref
COMPUTE_STAGE_BIT = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
COMPONENT_TYPES = {"FLOAT16": "f16", "FLOAT32": "f32", "FLOAT64": "f64", "SINT8": "i8", "SINT16": "i16",
                   "SINT32": "i32", "SINT64": "i64", "BFLOAT16": "bf16"}  # VkComponentTypeKHR names


def matrix_shapes(info) -> tuple[MatrixShape, ...]:
    """The subgroup-scope cooperative-matrix products `info`'s device offers to compute shaders, in the device's
    order (none without VK_KHR_cooperative_matrix)."""
    from coopnn.runtime.vk.nv_ffi import Scope

    matrices = info.cooperative_matrix
    if matrices is None or not matrices.cooperative_matrix or not matrices.supported_stages & COMPUTE_STAGE_BIT:
        return ()
    found = []
    for s in matrices.shapes:
        types = [COMPONENT_TYPES.get(t.name) for t in (s.a_type, s.b_type, s.c_type)]
        if s.scope == Scope.SUBGROUP and s.result_type == s.c_type and not s.saturating_accumulation \
                and None not in types:
            found.append(MatrixShape(s.m, s.n, s.k, *types))
    return tuple(found)


class _OnDevice(BoundMemref):
    """A memref argument that is a coopnn device array: bound where it lies, nothing to copy."""

    def __init__(self, array, shape: tuple[int, ...], strides: tuple[int, ...]):
        super().__init__(np.empty(0, np.float32), 0, shape, strides)
        self.array = array

    def copy_back(self) -> None:
        """The kernel wrote the device array itself."""


def _device_binding(name: str, memref: MemrefType, array) -> _OnDevice:
    shape = array.shape
    if memref.element.name != "f32" or len(shape) != memref.order or any(
            s is not None and s != n for s, n in zip(memref.shape, shape)):
        raise InputError(f"argument %{name} is {memref}; the device array is float32 of shape {list(shape)}")
    strides, running = [], 1
    for size in reversed(shape):
        strides.insert(0, running)
        running *= size
    if any(s is not None and s != r for s, r in zip(memref.strides, strides)):
        raise InputError(f"argument %{name} is {memref}, but a device array is row-major (strides {strides}): "
                         f"declare the strides it has, or '?'")
    return _OnDevice(array, tuple(shape), tuple(strides))


class Kernel:
    """A compiled tensor-language function on one Vulkan device; call it with its arguments in order."""

    def __init__(self, function: ast.Function, device=None):
        from coopnn.runtime.vk.shared import chosen_device, open_context

        self.function = function
        info = chosen_device(device)
        launch = launch_for(function, info.subgroup.size, matrix_shapes=matrix_shapes(info))
        limits = info.limits
        if launch.work_items > limits.max_compute_work_group_invocations or any(
                n > most for n, most in zip(launch.work_group_size, limits.max_compute_work_group_size)):
            raise CompileError(f"@{function.name}'s work-group of {launch.work_group_size[0]}x"
                               f"{launch.work_group_size[1]} is more than {info.name} runs (at most "
                               f"{limits.max_compute_work_group_invocations} invocations, "
                               f"{list(limits.max_compute_work_group_size[:2])} per mode)")
        self.limits = limits
        self.compiled: CompiledFunction = compile_function(function, launch)
        self.context = open_context(device, features=self.compiled.features, extensions=self.compiled.extensions)
        self.kernel = self.context.create_kernel(self.compiled.spirv, self.compiled.binding_count, 0,
                                                 workgroup_size=(*launch.work_group_size, 1),
                                                 name=f"tl:{function.name}")

    @property
    def spirv(self) -> bytes:
        return self.compiled.spirv

    def _bind(self, args: tuple) -> list:
        from coopnn.interop.device_arrays import DeviceArray

        plain = tuple(None if isinstance(a, DeviceArray) else a for a in args)
        bound = bind_arguments(self.function, plain)
        for k, (argument, value) in enumerate(zip(self.function.arguments, args)):
            if isinstance(value, DeviceArray):
                if not isinstance(argument.type, MemrefType):
                    raise InputError(f"argument %{argument.value.name} is {argument.type}; device arrays bind to "
                                     f"memrefs")
                bound[k] = _device_binding(argument.value.name, argument.type, value)
        return bound

    def __call__(self, *args, groups=(1, 1, 1)) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        counts = grid(groups)
        if any(n > most for n, most in zip(counts, self.limits.max_compute_work_group_count)):
            raise InputError(f"groups {list(counts)} is more than the device dispatches (at most "
                             f"{list(self.limits.max_compute_work_group_count)})")
        bound = self._bind(args)
        words = argument_words(self.function, bound)
        made = [self.context.create_buffer(max(words.nbytes, MIN_BUFFER_BYTES), HostAccess.WRITE)]
        made[0].write(words.view(np.uint8))
        buffers, read_back = [made[0]], []
        for item in bound:
            if isinstance(item, _OnDevice):
                buffers.append(item.array.bound_in(self.context))
            elif isinstance(item, (BoundMemref, BoundGroup)):
                data = item.buffer if item.buffer is not None else np.zeros(0, np.uint8)
                buffer = self.context.create_buffer(max(data.nbytes, MIN_BUFFER_BYTES), HostAccess.READ_WRITE)
                if data.nbytes:
                    buffer.write(np.ascontiguousarray(data).view(np.uint8))
                made.append(buffer)
                buffers.append(buffer)
                read_back.append((item, buffer, data))
        try:
            self.kernel.run(buffers, b"", counts)
            for item, buffer, data in read_back:
                if data.nbytes:
                    data[...] = buffer.read(data.dtype, data.size)
                item.copy_back()
        finally:
            for buffer in made:
                buffer.destroy()

    def close(self) -> None:
        self.kernel.destroy()
        self.context.close()


def compile(text: str | ast.Program, function: str | None = None, device=None) -> Kernel:
    """The function `function` (the only one by default) of `text`, checked, compiled and loaded on `device`."""
    program = parse(text) if isinstance(text, str) else text
    return Kernel(checked(program).function(function), device)
