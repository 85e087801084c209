"""The cooperative-vector target: SPIR-V 1.6 with SPV_NV_cooperative_vector, one invocation per sample.

Each `gemv` is one OpCooperativeVectorMatrixMulAddNV (float16 input, matrix, bias and result; the driver turns the
converged invocations of a subgroup into tensor-core work), reading matrices and biases from one weight buffer at the
offsets of its manifest (`coopnn.backends.coopvec.layouts`): InferencingOptimal where the backend converted them on
the device's driver, row- or column-major with a stride otherwise. With 8-bit float weights (input and matrix
interpreted as E4M3 or E5M2) it is an OpCooperativeVectorMatrixMulNV followed by the row scales and the bias as
float16 vector arithmetic. Inputs and outputs are float32 buffers (the host
copies the user's arrays as they are), or with `io_dtype="f16"` float16 ones (for data already float16 on the GPU:
half the bytes, and no conversion), read and written with OpCooperativeVectorLoadNV/StoreNV where a sample's row is
a whole number of 16-byte groups, component by component otherwise.

Numerics, which `coopnn.layouts.formats.emulation.run_fp16_emulation` reproduces: inputs (rounded as they are
loaded), matrix-vector operands and results, and outputs (rounded, then widened exactly) are float16; everything else
is float32. Instructions whose result is exact in float16 when their operands are (max, min, neg, abs, comparisons,
selects, gathers) stay in float16, so ReLU layers never leave it; `elementwise.py` lowers them, on whole vectors where
the extension allows it. FMax/FMin follow the driver on NaN operands. Control flow is uniform but for the bounds
check.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from coopnn.errors import CompileError
from coopnn.backends.coopvec.layouts import COMPONENT_ALIGNMENT, LAYOUT_ENUMERANTS, pack_plan
from coopnn.backends.coopvec.products import weight_plan
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import WeightImage
from coopnn.registry import registrar
from coopnn.shaders.kernel.program import Instr, KernelProgram
from coopnn.shaders.targets.base import Binary, ShaderFrame, bindings_of, push_constants_of
from coopnn.shaders.targets.encodings.registry import emit_encoding
from coopnn.shaders.targets.encodings.writer import EncodingWriter
from coopnn.backends.coopvec.integer_product import integer_gemv
from coopnn.backends.quantized_layers import nan_inherited
from coopnn.backends.coopvec.values import Forms, Held
from coopnn.backends.coopvec.inference_options import DEFAULT_OPTIONS, InferenceOptions
from coopnn.backends.coopvec.sample_copies import enter, sample_copies
from coopnn.backends.coopvec.table_runs import TableRuns
from coopnn.backends.coopvec.staged_elements import stage_for
from coopnn.backends.coopvec.staged_rows import check_workgroup_memory, staged_bindings
from coopnn.shaders.spirv.ops import Ops

# SPIR-V ComponentType (`MatrixInterpretation`) of each weight format's elements, by its VkComponentTypeKHR name
INTERPRETATIONS = {"FLOAT16": "Float16NV", "FLOAT8_E4M3": "FloatE4M3NV", "FLOAT8_E5M2": "FloatE5M2NV",
                   "SINT8": "SignedInt8NV", "SINT32": "SignedInt32NV"}
FEATURES = frozenset({"cooperativeVector", "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"})
IO_BYTES_PER_COMPONENT = 2
IO_VECTOR_ALIGNMENT = COMPONENT_ALIGNMENT * IO_BYTES_PER_COMPONENT  # bytes: OpCooperativeVectorLoadNV/StoreNV offsets
# the layout that reads a plain matrix's memory as its transpose
PLAIN_TRANSPOSES = {"row_major": "column_major", "column_major": "row_major"}

# kernel instruction -> its lowering, an emitter method taking the instruction and giving the result's Held value;
# every instruction of the table (`coopnn.shaders.kernel.ops`) has one
LOWERINGS: dict[str, Callable[["CoopvecEmitter", Instr], "Held | None"]] = {}
lowers = registrar(LOWERINGS)  # @lowers(kernel instruction, ...)


class CoopvecEmitter:
    def __init__(self, program: KernelProgram, packed: WeightImage, workgroup_size: int, weights: WeightFormat = FP16,
                 *, bounds_check: bool = True, io_dtype: str = "f32", options: InferenceOptions = DEFAULT_OPTIONS,
                 table_atomics=None):
        self.program = program
        # how a trained grid's gradient is added (`coopnn.backends.coopvec.table_atomics`), and what that needs
        self.table_atomics, self.features = table_atomics, set(FEATURES)
        self.packed = packed
        self.weights = weights
        # Inputs and outputs are float32 in memory and converted here: converting a large batch on the host took 100
        # times longer than the kernel (`bench/results/*-host-path.md`). Per-sample losses stay float32: their sum over
        # a large batch is the reported loss. Only the training tape is float16.
        self.training = bool(program.params_of("tape"))
        # a format that quantizes inputs has its own arithmetic (`coopnn.layouts.formats.integer`): float32 but for
        # its products, where every other format follows the float16 arithmetic of `run_fp16_emulation`
        self.integer = weights.input_quantization is not None
        # the integer products' NaN tests: which product's factor (1 or NaN, by product result) a product takes
        self.nan_inherited, self.nan_factors = nan_inherited(program) if self.integer else {}, {}
        if io_dtype not in ("f32", "f16") or (io_dtype == "f16" and (self.training or self.integer)):
            raise CompileError(f"the coopvec target reads and writes float16 rows for inference with float weights "
                               f"only; asked for {io_dtype} I/O in a {'training' if self.training else 'model'} "
                               f"kernel with {weights.name} weights")
        halves = {"tape"} | ({"input", "output"} if io_dtype == "f16" else set())
        self.bindings = tuple(dataclasses.replace(b, dtype="f16") if b.role in halves else b
                              for b in bindings_of(program))
        self.push_constants = push_constants_of(program)
        # Weight gradients accumulate into the weight buffer (`accumulate.py`), declared writable here then.
        accumulates = bool(program.params_of("gradient"))
        staged = staged_bindings(self.bindings, options)
        self.options = options
        several = options.samples_per_invocation > 1
        if (staged or several) and self.training:
            raise CompileError(f"the coopvec target stages rows and takes several samples an invocation in inference "
                               f"kernels only, not in a training kernel ({options.describe()})")
        if staged and several:
            raise CompileError(f"the coopvec target stages rows of one sample an invocation, not {options.describe()}")
        _check_sample_components(program, options)
        self.frame = ShaderFrame(() if accumulates else self.bindings[:1], 16, workgroup_size, self.push_constants,
                                 bounds_check=bounds_check and not staged and not several)
        self.m, self.fn = self.frame.module, self.frame.main
        self.forms = Forms(self.m, self.fn)
        self.f16, self.f32, self.boolean = (self.forms.scalar_types[t] for t in ("f16", "f32", "bool"))
        self.halves = self.m.type_runtime_array(self.f16, stride=IO_BYTES_PER_COMPONENT)
        block = self.m.type_struct([self.halves], offsets=[0], decorations=["Block"], name="Samples")
        if accumulates:
            self.frame.buffers[0] = self.m.global_variable("StorageBuffer", block, name="weights_0",
                                                           decorations=[("DescriptorSet", 0), ("Binding", 0)])
        for b in self.bindings[1:]:
            decorations = [("DescriptorSet", 0), ("Binding", b.index)] + (["NonWritable"] if b.role in ("input", "state") else [])
            if b.role == "table_gradient":
                block_type = self.table_gradient_block()
            elif b.dtype == "f32":
                block_type = self.m.type_struct([self.m.type_runtime_array(self.f32, stride=4)], offsets=[0],
                                                decorations=["Block"], name="Floats")
            else:
                block_type = block
            self.frame.buffers[b.index] = self.m.global_variable("StorageBuffer", block_type,
                                                                 name=f"{b.role}_{b.index}", decorations=decorations)
        self.frame.state_binding = next((b.index for b in self.bindings if b.role == "state"), None)
        self.frame.draw_rows()
        self.binding_of = {b.name: b.index for b in self.bindings[1:]}
        self.binding_at = {b.index: b for b in self.bindings}
        self.inside = None  # whether this invocation's sample is in the batch, where it may not be (an id)
        # the memory operands of direct row loads and stores: none, or a hint that rows are read and written once
        self.row_access = ("Nontemporal",) if options.streaming_rows else ()
        self.stages = self.row_stages(staged, options.pad_rows)
        if options.vector_table_reads and (accumulates or self.integer):
            # accumulating kernels write the weight buffer that the runs would read through a second, read-only view
            raise CompileError(f"the coopvec target reads table runs as vectors in kernels with float weights that do "
                               f"not accumulate into them, not in a "
                               f"{'gradient-accumulating' if accumulates else weights.name} kernel")
        self.table_runs = TableRuns(self) if options.vector_table_reads else None
        self.held: dict[str, Held] = {}
        self.array_pointers: dict[int, object] = {}
        # inputs an encoding reads, kept as loaded (float32): encodings compute in float32, their results are rounded
        # to float16 by the product that takes them
        self.encoded = {i.args[0] for i in program.body if i.op == "encode"}
        self.unrounded: dict[str, Held] = {}

    def row_stages(self, staged: set[int], pad: bool) -> dict:
        """The stage of each binding in `staged`; with any, invocations past the batch read the last row directly
        and store nothing (`staged_rows.py`: there is no early return)."""
        if not staged:
            return {}
        fn, u32 = self.fn, self.frame.u32
        self.local_index = fn.ops.load(u32, self.m.builtin_input("LocalInvocationIndex", u32))
        count = self.frame.push_value("count")
        self.inside = fn.ops.uint_less(self.boolean, self.frame.sample, count)
        self.frame.data_row = self.glsl(u32, "UMin", self.frame.sample, fn.ops.int_sub(u32, count, self.uint(1)))
        stages = {i: stage_for(self, self.binding_at[i], pad) for i in sorted(staged)}
        check_workgroup_memory(stages.values(), self.program.name)
        return stages

    # ----- helpers --------------------------------------------------------------------------------------------------

    def table_gradient_block(self):
        """The block of the buffer a trained grid's gradient is added into, of the elements its atomics add."""
        if self.table_atomics is None:
            raise CompileError("the coopvec target adds a trained grid's gradient with the table atomics it is given "
                               "(coopnn.backends.coopvec.table_atomics), and was given none")
        element, stride = self.table_atomics.element_type(self)
        return self.m.type_struct([self.m.type_runtime_array(element, stride=stride)], offsets=[0],
                                  decorations=["Block"], name="TableGradient")

    def uint(self, value: int):
        return self.frame.uint(value)

    def array_pointer(self, binding: int, dtype: str = "f16"):
        """The runtime array of `binding` (of `dtype` elements), as the cooperative-vector instructions take it (the
        body is one block after the bounds check, so one access chain serves every later use)."""
        if binding not in self.array_pointers:
            array = self.halves if dtype == "f16" else self.m.type_runtime_array(self.f32, stride=4)
            self.array_pointers[binding] = self.fn.ops.access_chain(
                self.m.type_pointer("StorageBuffer", array), self.frame.buffers[binding],
                self.frame.zero)
        return self.array_pointers[binding]

    def operands(self, instr: Instr) -> list[Held]:
        return [self.held[a] for a in instr.args]

    @staticmethod
    def exact_dtype(held: list[Held]) -> str:
        """float16 when every operand is exact in it (the instruction then is too), else float32."""
        return "f16" if all(h.is_f16 for h in held) else "f32"

    def vector_result(self, instr: Instr, dtype: str, vector) -> Held:
        return self.forms.from_vector(dtype, instr.type.size, vector)

    def per_component(self, dtype: str, result_dtype: str, held: list[Held], compute) -> Held:
        """A value computed component by component: compute(*scalars of each operand in `dtype`)."""
        columns = [self.forms.components(h, dtype) for h in held]
        return self.forms.from_scalars(result_dtype, [compute(*row) for row in zip(*columns)])

    def glsl(self, result_type, name: str, *args):
        return self.fn.ext_inst(result_type, name, *args)

    # ----- instructions ---------------------------------------------------------------------------------------------

    @lowers("constant")
    def constant(self, instr: Instr) -> Held:
        return self.forms.known(np.full(instr.type.size, instr.attrs["value"]), instr.type.dtype)

    @lowers("load")
    def load(self, instr: Instr) -> Held:
        param = self.program.param(instr.args[0])
        if param.role != "input":
            return self.forms.known(self.program.constants[param.name])
        binding, features = self.binding_of[param.graph_name], param.shape[0]
        dtype, itemsize = self.binding_at[binding].dtype, self.binding_at[binding].itemsize
        if binding in self.stages:
            loaded = self.stages[binding].load()
        elif features * itemsize % IO_VECTOR_ALIGNMENT == 0:
            offset = self.fn.ops.int_mul(self.frame.u32, self.frame.data_row, self.uint(features * itemsize))
            vector = self.fn.ops.vector_load(self.forms.vector_type(dtype, features),
                                             self.array_pointer(binding, dtype), offset, *self.row_access)
            loaded = self.vector_result(instr, dtype, vector)
        else:
            first = self.fn.ops.int_mul(self.frame.u32, self.frame.data_row, self.uint(features))
            scalar = self.forms.scalar_types[dtype]
            loaded = self.forms.from_scalars(dtype, [self.fn.ops.load(scalar, self.frame.element_pointer(
                binding, self.fn.ops.int_add(self.frame.u32, first, self.uint(i)), scalar), *self.row_access)
                for i in range(features)])
        if self.training or self.integer:
            return loaded
        if instr.result in self.encoded:
            self.unrounded[instr.result] = loaded
        # inference rounds its inputs to float16 as they arrive, as `run_fp16_emulation` does
        return self.float16(loaded)

    def float16(self, held: Held) -> Held:
        """`held` rounded to float16 (itself when it already is)."""
        if held.is_f16:
            return held
        if held.vectors or held.constant is not None:
            return self.forms.from_vector("f16", held.size, self.forms.vector(held, "f16"))
        return self.forms.from_scalars("f16", self.forms.components(held, "f16"))

    @lowers("store")
    def store(self, instr: Instr) -> None:
        held, param = self.held[instr.args[0]], self.program.param(instr.args[1])
        if param.role in ("tape", "loss"):
            self.store_training(instr, held, param)
            return
        binding, features = self.binding_of[param.graph_name], param.shape[0]
        dtype, itemsize = self.binding_at[binding].dtype, self.binding_at[binding].itemsize
        # float16 results, widened exactly to the float32 the host reads (as `run_fp16_emulation` rounds outputs)
        rounded = held if self.integer else self.float16(held)
        if binding in self.stages:
            self.stages[binding].store(rounded)
        elif self.inside is not None:
            with self.fn.if_(self.inside):
                self.store_row(binding, features, dtype, itemsize, rounded)
        else:
            self.store_row(binding, features, dtype, itemsize, rounded)

    def store_row(self, binding: int, features: int, dtype: str, itemsize: int, rounded: Held) -> None:
        """This invocation's output row, straight into the storage buffer."""
        if features * itemsize % IO_VECTOR_ALIGNMENT == 0:
            offset = self.fn.ops.int_mul(self.frame.u32, self.frame.sample, self.uint(features * itemsize))
            self.fn.ops.vector_store(self.array_pointer(binding, dtype), offset,
                                     self.forms.vector(rounded, dtype), *self.row_access)
            return
        first = self.fn.ops.int_mul(self.frame.u32, self.frame.sample, self.uint(features))
        scalar_type = self.forms.scalar_types[dtype]
        for i, scalar in enumerate(self.forms.components(rounded, dtype)):
            index = self.fn.ops.int_add(self.frame.u32, first, self.uint(i))
            self.fn.ops.store(self.frame.element_pointer(binding, index, scalar_type), scalar, *self.row_access)

    def store_training(self, instr: Instr, held: Held, param) -> None:
        """The sample's loss (float32), or a tape region (float16; `coopnn.shaders.training.layout`): a layer input
        as one padded vector store, a delta component by component (feature-major: consecutive samples of one
        subgroup write consecutive halves)."""
        binding, u32 = self.binding_of[param.name], self.frame.u32
        if param.role == "loss":
            pointer = self.frame.element_pointer(binding, self.frame.sample, self.f32)
            self.fn.ops.store(pointer, self.forms.components(held, "f32")[0])
            return
        attrs = instr.attrs
        capacity = self.frame.push_value("capacity")
        if attrs["layout"] == "samples":
            # Counted in 16-byte groups and multiplied last, so the compiler can prove the alignment vector stores
            # need (the capacity and the padded widths are whole groups).
            group = COMPONENT_ALIGNMENT
            region_groups = self.fn.ops.int_mul(u32, self.fn.ops.shift_right(u32, capacity,
                                                                             self.uint(group.bit_length() - 1)),
                                                self.uint(attrs["start"]))
            groups = self.fn.ops.int_add(u32, region_groups, self.fn.ops.int_mul(u32, self.frame.sample,
                                                                                 self.uint(attrs["width"] // group)))
            offset = self.fn.ops.int_mul(u32, groups, self.uint(group * IO_BYTES_PER_COMPONENT))
            self.fn.ops.vector_store(self.array_pointer(binding), offset,
                                     self.forms.padded_vector(held, attrs["width"]))
            return
        region = self.fn.ops.int_mul(u32, capacity, self.uint(attrs["start"]))
        first = self.fn.ops.int_add(u32, region, self.frame.sample)
        for i, scalar in enumerate(self.forms.components(held, "f16")):
            index = self.fn.ops.int_add(u32, first, self.fn.ops.int_mul(u32, capacity, self.uint(i)))
            self.fn.ops.store(self.frame.element_pointer(binding, index, self.f16), scalar)

    @lowers("uniform")
    def uniform(self, instr: Instr) -> Held:
        return self.forms.from_scalars("f32", [self.frame.uniform_value(instr.attrs["name"])] * instr.type.size)

    @lowers("sample_mask")
    def sample_mask(self, instr: Instr) -> Held:
        inside = self.fn.ops.uint_less(self.boolean, self.frame.sample, self.frame.push_value("batch"))
        mask = self.fn.ops.select(self.f32, inside, self.forms.constant("f32", 1.0),
                                  self.forms.constant("f32", 0.0))
        return self.forms.from_scalars("f32", [mask] * instr.type.size)

    @lowers("gemv")
    def gemv(self, instr: Instr) -> Held:
        """One matrix-vector product with its bias. A scaled format (8-bit floats) multiplies without the bias, then
        applies the row scales and adds the bias as float16 vector arithmetic, in the order of the emulation
        (`coopnn.layouts.formats.emulation`, steps 1 to 3); a format that quantizes inputs takes `integer_gemv`."""
        if self.integer:
            return integer_gemv(self, instr)
        matrix = self.packed.entry(instr.args[0])
        rows, columns = matrix.shape
        m = self.m
        element = m.enum_constant("ComponentType", INTERPRETATIONS[weight_format(matrix.dtype).component_type])
        transpose = bool(instr.attrs.get("transpose"))
        layout = matrix.layout
        if transpose:
            # the product with the stored rows x columns matrix's transpose: `rows` in, `columns` out
            rows, columns = columns, rows
            if layout in PLAIN_TRANSPOSES:
                # plain layouts take no Transpose operand: a row-major matrix is its transpose column-major
                layout, transpose = PLAIN_TRANSPOSES[layout], False
        x = self.forms.padded_vector(self.held[instr.args[1]], columns)
        weights = self.array_pointer(0)
        scaled = matrix.scale_offset is not None
        bias = self.packed.entry(instr.args[2]) if len(instr.args) > 2 else None
        operands = [x, element, weights, self.uint(matrix.offset), element]
        fused_bias = bias is not None and not scaled
        if fused_bias:
            operands += [weights, self.uint(bias.offset), self.m.enum_constant("ComponentType", "Float16NV")]
        operands += [self.uint(rows), self.uint(columns),
                     m.enum_constant("CooperativeVectorMatrixLayout", LAYOUT_ENUMERANTS[layout]),
                     m.constant(self.boolean, transpose)]
        if matrix.stride:
            operands.append(self.uint(matrix.stride))
        product = Ops.vector_matrix_mul_add if fused_bias else Ops.vector_matrix_mul
        vector = self.forms.vector_type("f16", rows)
        y = product(self.fn.ops, vector, *operands)
        if scaled:
            y = self.fn.ops.float_mul(vector, y, self.weight_vector(vector, matrix.scale_offset))
            if bias is not None:
                y = self.fn.ops.float_add(vector, y, self.weight_vector(vector, bias.offset))
        if rows == instr.type.size:
            return self.vector_result(instr, "f16", y)
        return self.forms.from_scalars("f16", [self.fn.ops.extract(self.f16, y, i)
                                               for i in range(instr.type.size)])

    @lowers("encode")
    def encode(self, instr: Instr) -> Held:
        """The encoding in float32 (`coopnn.shaders.targets.encodings`), its parameter vector (float16, a vector
        entry of the weight plan) widened as it is read."""
        x, *params = instr.args
        if params and self.integer:
            raise CompileError(f"the coopvec target reads the parameters of {instr.attrs['encoding'].describe()} "
                               f"with float16 or 8-bit float weights, not {self.weights.name}")
        read = (lambda element: self.vector_element(params[0], element)) if params else None
        runs = neighbours = None
        if params and self.table_runs is not None:
            runs = lambda first, count: self.table_runs.read(params[0], first, count)  # noqa: E731
            if self.options.neighbour_reads:
                neighbours = lambda first, other, count: self.table_runs.read_neighbours(  # noqa: E731
                    params[0], first, other, count)
        xs = self.forms.components(self.unrounded.get(x, self.held[x]), "f32")
        ys = emit_encoding(EncodingWriter(self.m, self.fn, read, runs, neighbours), instr.attrs["encoding"], xs)
        return self.forms.from_scalars("f32", ys)

    def vector_element(self, param: str, element):
        """Element `element` (a u32 id) of the float16 vector entry `param` of the weight buffer, as float32."""
        index = self.fn.ops.int_add(self.frame.u32, element, self.uint(self.packed.entry(param).offset // 2))
        half = self.fn.ops.load(self.f16, self.frame.element_pointer(0, index, self.f16))
        return self.fn.ops.float_convert(self.f32, half)

    def weight_vector(self, vector_type, offset: int):
        """The float16 vector at byte `offset` of the weight buffer (a bias or row scales)."""
        return self.fn.ops.vector_load(vector_type, self.array_pointer(0), self.uint(offset))

    def compile(self) -> bytes:
        copies = sample_copies(self, self.options.samples_per_invocation)
        for instr in self.program.body:
            lowering = LOWERINGS.get(instr.op)
            if lowering is None:
                raise CompileError(f"the coopvec target has no lowering for kernel instruction {instr.op!r}")
            for copy in copies:
                enter(self, copy)
                result = lowering(self, instr)
                if instr.result is not None:
                    self.held[instr.result] = result
        return self.frame.finish()


class CoopvecTarget:
    name = "coopvec"

    def compile(self, program: KernelProgram, weights: WeightFormat, workgroup_size: int = 64, *,
                packed: WeightImage | None = None, io_dtype: str = "f32",
                options: InferenceOptions = DEFAULT_OPTIONS, table_atomics=None) -> Binary:
        """SPIR-V for `program`; matrices and biases at the offsets of `packed` (a manifest made from
        `weight_plan(program, weights)`), or packed row-major here when it is None; inputs and outputs of `io_dtype`
        ("f32", or "f16" for inference with float weights), moved as `options` say (`inference_options.py`); a
        trained grid's gradient added with `table_atomics` (a `coopnn.backends.coopvec.table_atomics.TableAtomics`)."""
        packed = packed if packed is not None else pack_plan(weight_plan(program, weights))
        emitter = CoopvecEmitter(program, packed, workgroup_size, weights, io_dtype=io_dtype, options=options,
                                 table_atomics=table_atomics)
        spirv = emitter.compile()
        invocations = emitter.frame.workgroup_size
        # samples a work-group, what dispatches are sized by (`sample_copies.py`)
        samples = (invocations[0] * options.samples_per_invocation,) + invocations[1:]
        return Binary("coopvec", spirv, "main", samples, emitter.bindings, emitter.push_constants,
                      packed, frozenset(emitter.features), frozenset())


# The H200's driver failed to build (VkErrorUnknown) the pipeline of 4 samples of 128-wide layers and built those of
# 256 components (bench/results/nvidia-h200-2026-12-02-27f76a6-gpu-tests.md).
MAX_SAMPLE_COMPONENTS = 256


def _check_sample_components(program, options: InferenceOptions) -> None:
    """Refuse several samples an invocation whose widest layer, times the samples, passes MAX_SAMPLE_COMPONENTS."""
    count = options.samples_per_invocation
    widest = max((max(p.shape) for p in program.params if p.role == "matrix"), default=0)
    if count > 1 and widest * count > MAX_SAMPLE_COMPONENTS:
        raise CompileError(f"samples_per_invocation={count} with layers {widest} wide holds {widest * count} "
                           f"components an invocation; the coopvec target takes at most {MAX_SAMPLE_COMPONENTS} "
                           f"(use {max(1, MAX_SAMPLE_COMPONENTS // widest)} or fewer samples for this model)")
