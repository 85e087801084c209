"""The coopmat2 target: SPIR-V 1.6 with SPV_NV_cooperative_matrix2 and SPV_NV_tensor_addressing, a work-group per
tile of samples (`steps.py` says what it does; this module emits it).

Matrices are workgroup-scope with flexible dimensions; tensor layouts and views are built where each load or store
needs them (`coopnn.shaders.spirv.cooperative_matrix2`), from the push constant `count` and the tile's first sample;
every invocation runs to the end (no early return: the matrix instructions need the whole work-group), and the
Constant clamp mode keeps loads and stores inside the batch. Weights are float16, or a block format (q8_0, q4_0:
blocks decoded by the loads, float32 biases; `decode.py`), row-major, packed as the portable target packs them
(matrices at 64-byte, vectors at 16-byte offsets: the 16-byte alignment tensor loads need); inputs and outputs are
the float32 buffers every target shares. With `decode_vector`, a block format's loads name a DecodeVectorFunc besides
the DecodeFunc (SPV_NV_cooperative_matrix_decode_vector, which the device must enable).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from coopnn.errors import CompileError
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.pack import WeightImage, pack, unpack
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv import Id
from coopnn.shaders.spirv.cooperative_matrix2 import (TensorLayoutValue, TensorViewValue, convert, load_tensor,
                                                      per_element_function, store_tensor)
from coopnn.shaders.targets.base import PUSH_CONSTANTS, Binary, ShaderFrame, bindings_of
from coopnn.shaders.targets.scalar_writer import ScalarWriter
from coopnn.shaders.targets.tile_epilogue import emit_stage, round_fp16
from coopnn.shaders.targets.tile_input import emit_input_stage
from coopnn.shaders.targets.tile_plan import plan_tiles
from coopnn.backends.coopmat2 import decode
from coopnn.backends.coopmat2.steps import (STAGED, Apply, Convert, Layout, Load, MatrixType, MulAdd, Store,
                                            TileKernel, View, tile_kernel)
from coopnn.backends.coopmat2.text import kernel_text

NAME = "coopmat2"
FEATURES = frozenset({"cooperativeMatrix", "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                      "cooperativeMatrixConversions", "cooperativeMatrixPerElementOperations",
                      "cooperativeMatrixTensorAddressing", "shaderFloat16", "storageBuffer16BitAccess",
                      "vulkanMemoryModel"})
# Tiles (samples per work-group, one per invocation) in the order the backend tries them on a device; the first is
# the default where no device is asked. NVIDIA's driver lists workgroup-scope f16 x f16 + f32 matrices of 128
# invocations at granularity 32 x 16 x 16 and of 64 at 16 x 16 x 16 (`coopnn info` shows a device's); tiles of 128
# were faster than tiles of 64 in every weight format, and tiles of 256 slower than 128
# (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-coopmat2-tiles.md`).
TILES = (128, 64)
TILE = TILES[0]
GRANULARITY = 16
# The staged rows carry other invocations' values, so under the Vulkan memory model their accesses are non-private:
# the barrier after the input stage makes them available and visible.
SHARED = "NonPrivatePointer"


def _debug_name(result: str) -> str:
    """An OpName for a step's result: kernel value names are numbers."""
    return f"v{result}" if result[0].isdigit() else result


def features(weights: WeightFormat, decode_vector: bool = False) -> frozenset[str]:
    """The device features a module for `weights` needs (with the DecodeVectorFunc where `decode_vector`)."""
    if weights.blocks is None:
        return FEATURES
    return FEATURES | decode.FEATURES | ({decode.DECODE_VECTOR_FEATURE} if decode_vector else set())


def pack_program(program: KernelProgram, weights: WeightFormat) -> WeightImage:
    """The program's matrices (row-major) and vectors in the `weights` format; CompileError naming a block-format
    matrix with a decoded weight beyond float16, the component type its decode function returns."""
    roles = {p.name: p.role for p in program.params_of("matrix", "vector")}
    packed = pack(program.constants, roles, weights)
    if weights.blocks is not None:
        largest = float(np.finfo(np.float16).max)
        for name in (n for n, role in roles.items() if role == "matrix"):
            top = float(np.abs(unpack(packed, name)).max(initial=0))
            if top > largest:
                source = ", ".join(repr(n) for n in program.sources.get(name, (name,)))
                raise CompileError(f"matrix {source} decodes to a weight of magnitude {top:.6g} in weights="
                                   f"{weights.name!r}, beyond float16 (at most {largest:g}), which the {NAME} target "
                                   f"decodes to; scale the model's weights down or use weights='fp16'")
    return packed


class Coopmat2Emitter:
    def __init__(self, kernel: TileKernel, packed: WeightImage, weights: WeightFormat):
        self.kernel = kernel
        self.plan = kernel.plan
        self.packed = packed
        self.bindings = bindings_of(self.plan.program)
        self.binding_of = {b.name: b.index for b in self.bindings}
        # the weight buffer read as the format's vectors; a block format's matrices through `decode.BlockMatrices`
        self.vector_bytes = weights.vectors.storage.itemsize
        self.frame = ShaderFrame(self.bindings, 8 * self.vector_bytes, kernel.tile, PUSH_CONSTANTS,
                                 bounds_check=False)
        self.blocks = None
        if weights.blocks is not None:
            matrices = {p.name: packed.entry(p.name) for p in self.plan.program.params_of("matrix")}
            vector = any(s.decode_vector for s in kernel.steps if isinstance(s, Load))
            self.blocks = decode.BlockMatrices(self.frame, weights, matrices, vector)
        m, fn = self.m, self.fn = self.frame.module, self.frame.main
        u32 = self.frame.u32
        group = fn.ops.load(m.type_vector(u32, 3), m.builtin_input("WorkgroupId", m.type_vector(u32, 3)))
        first = fn.ops.int_mul(u32, fn.ops.extract(u32, group, 0), self.frame.uint(kernel.tile),
                               name="first_sample")
        self.operands = {"n": self.frame.push_value("count"), "i": first}
        self.values: dict[str, Id] = {}
        self.staged = None
        if self.plan.input_stage:
            self.staged = self.input_stage(first)
        self.steps: dict[type, Callable] = {Load: self.load, Convert: self.convert, MulAdd: self.mul_add,
                                            Apply: self.apply, Store: self.store}

    def input_stage(self, first: Id) -> Id:
        """The per-sample input stage: each invocation runs it for its sample (the batch's last one stands in past the
        batch, whose rows become 0) and writes the float16 row into the staging array, which it returns."""
        m, fn, frame = self.m, self.fn, self.frame
        u32, f16, tile, width = frame.u32, m.type_float(16), self.kernel.tile, self.plan.stages[0].width
        staged = m.global_variable("Workgroup", m.type_array(f16, frame.uint(tile * width)), name=STAGED)
        local = fn.ops.load(u32, m.builtin_input("LocalInvocationIndex", u32))
        sample = fn.ops.int_add(u32, first, local)
        count = self.operands["n"]
        inside = fn.ops.uint_less(frame.bool, sample, count)
        row = fn.ext_inst(u32, "UMin", sample, fn.ops.int_sub(u32, count, frame.uint(1)))
        features = self.plan.input.shape[0]
        base = fn.ops.int_mul(u32, row, frame.uint(features))
        binding = self.binding_of[self.plan.input.graph_name]
        xs = [fn.ops.load(frame.f32, frame.element_pointer(binding, fn.ops.int_add(u32, base, frame.uint(j))))
              for j in range(features)]
        ys = emit_input_stage(m, fn, self.plan, xs, self.vector_element)
        start = fn.ops.int_mul(u32, local, frame.uint(width))
        zero = m.constant(frame.f32, 0.0)
        for column, y in enumerate(ys):
            pointer = fn.ops.access_chain(m.type_pointer("Workgroup", f16), staged,
                                          fn.ops.int_add(u32, start, frame.uint(column)))
            fn.ops.store(pointer, fn.ops.float_convert(f16, fn.ops.select(frame.f32, inside, y, zero)),
                         SHARED)
        fn.barrier()
        return staged

    def vector_element(self, param: str, element: Id) -> Id:
        """Element `element` (a u32 id) of the vector entry `param` of the weight buffer, as float32."""
        offset = self.frame.uint(self.packed.entry(param).offset // self.vector_bytes)
        index = self.fn.ops.int_add(self.frame.u32, element, offset)
        value = self.fn.ops.load(self.frame.weight_scalar,
                                 self.frame.element_pointer(0, index, self.frame.weight_scalar))
        return value if self.vector_bytes == 4 else self.fn.ops.float_convert(self.frame.f32, value)

    def matrix_type(self, t: MatrixType) -> Id:
        component = self.m.type_float(16 if t.component == "f16" else 32)
        return self.m.type_cooperative_matrix_khr(component, "Workgroup", t.rows, t.cols, t.use)

    def pointer(self, param: str) -> Id:
        """The first element of a kernel parameter: an input or output buffer, or a weight entry (float16)."""
        if param == STAGED:
            return self.fn.ops.access_chain(self.m.type_pointer("Workgroup", self.m.type_float(16)), self.staged,
                                            self.frame.zero)
        p = self.plan.program.param(param)
        if p.role in ("input", "output"):
            return self.frame.element_pointer(self.binding_of[p.graph_name], self.frame.zero)
        if p.role == "matrix" and self.blocks is not None:
            return self.blocks.pointer(param)
        offset = self.packed.entry(param).offset // self.vector_bytes
        return self.frame.element_pointer(0, self.frame.uint(offset), self.frame.weight_scalar)

    def layout(self, layout: Layout) -> TensorLayoutValue:
        given = [self.operands[o] if isinstance(o, str) else o for o in (*layout.dimension, *layout.offset)]
        dims = len(layout.dimension)
        created = TensorLayoutValue.create(self.fn, self.m.type_tensor_layout_nv(dims, "Constant"))
        if layout.block is not None:
            created = created.set_block_size(*layout.block)
        return created.set_dimension(*given[:dims]).slice(given[dims:], layout.span)

    def view(self, view: View) -> TensorViewValue:
        view_type = self.m.type_tensor_view_nv(len(view.permutation), view.dimension is not None, view.permutation)
        created = TensorViewValue.create(self.fn, view_type)
        if view.dimension is None:
            return created
        return created.set_dimension(*view.dimension).set_stride(*view.stride)

    def load(self, step: Load) -> Id:
        view = self.view(step.view) if step.view is not None else None
        decoders = {}
        if step.decode is not None:
            decoders = {"decode": self.blocks.decoders.scalar, "decode_vector": self.blocks.decoders.vector}
        access = (SHARED,) if step.param == STAGED else ("None",)
        return load_tensor(self.fn, self.matrix_type(step.type), self.pointer(step.param), self.layout(step.layout),
                           view=view, memory_access=access, name=_debug_name(step.result), **decoders)

    def convert(self, step: Convert) -> Id:
        return convert(self.fn, self.matrix_type(step.type), self.values[step.source], name=_debug_name(step.result))

    def mul_add(self, step: MulAdd) -> Id:
        result_type = self.matrix_type(step.type)
        c = self.values[step.c] if step.c is not None else self.m.constant_null(result_type)
        return self.fn.ops.matrix_mul_add(result_type, self.values[step.a], self.values[step.b], c,
                                          name=_debug_name(step.result))

    def apply(self, step: Apply) -> Id:
        """The stage as the function of an OpCooperativeMatrixPerElementOpNV: (row, column, element) -> element."""
        f32 = self.frame.f32
        element = per_element_function(self.m, f32, name=f"stage{step.stage}")
        _, column, x = element.params
        writer = ScalarWriter(self.m, element)
        y = emit_stage(writer, self.plan, self.plan.stages[step.stage], x)
        if step.mask is not None:
            inside = element.ops.uint_less(self.frame.bool, column, self.frame.uint(step.mask))
            y = element.ops.select(f32, inside, y, writer.constant(0.0))
        element.return_(round_fp16(writer, y) if step.round_result else y)
        return self.fn.ops.matrix_per_element(self.matrix_type(step.type), self.values[step.source],
                                              element.id, name=_debug_name(step.result))

    def store(self, step: Store) -> None:
        store_tensor(self.fn, self.pointer(step.param), self.values[step.source], self.layout(step.layout))

    def compile(self) -> bytes:
        for step in self.kernel.steps:
            made = self.steps[type(step)](step)
            if made is not None:
                self.values[step.result] = made
        return self.frame.finish()


class Coopmat2Target:
    name = NAME
    decodes_vectors = True  # takes decode_vector= (`coopnn compile --decode-vector`)

    def compile(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int = TILE, *,
                granularity: int = GRANULARITY, packed: WeightImage | None = None,
                decode_vector: bool = False) -> Binary:
        """SPIR-V for `program` in tiles of `workgroup_size` samples (one per invocation), feature dimensions padded
        to whole `granularity`, a block format's loads with a DecodeVectorFunc where `decode_vector`; CompileError
        when the program is not a chain of layers (`plan_tiles`)."""
        if workgroup_size % granularity:
            raise CompileError(f"the {NAME} target takes tiles of a whole number of {granularity} samples (the "
                               f"matrices' row granularity), not {workgroup_size}")
        if decode_vector and weights.blocks is None:
            raise CompileError(f"a DecodeVectorFunc decodes block formats (q8_0, q4_0); weights={weights.name!r} "
                               f"are loaded without decoding")
        width = decode.vector_width(weights) if decode_vector else None
        kernel = tile_kernel(plan_tiles(program, NAME), workgroup_size, granularity, weights, width)
        packed = packed if packed is not None else pack_program(program, weights)
        emitter = Coopmat2Emitter(kernel, packed, weights)
        spirv = emitter.compile()
        return Binary(NAME, spirv, "main", emitter.frame.workgroup_size, emitter.bindings, PUSH_CONSTANTS, packed,
                      features(weights, decode_vector), frozenset(), text=kernel_text(kernel))
