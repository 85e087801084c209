"""Where the tiled training-step kernel's tiles live (`coopnn.backends.coopvec.tiled_step`): its activation rows in
workgroup memory, the tape's regions and the weights in device memory; the cooperative-matrix loads and stores of
them, and which sample and feature an accumulator component holds."""

from __future__ import annotations

from coopnn.shaders.targets.held_matrix import HeldMatrix
from coopnn.shaders.training.shader import HALVES_PER_WORD

MATRIX = 16  # M = N = K of every product
# Memory operands of the kernel's loads and stores: workgroup memory and the tape are read by other invocations than
# wrote them
SHARED = "NonPrivatePointer"


class TileAddressing:
    """Addressing helpers of `TiledStepEmitter`, which sets what they read: `m`, `fn` and `frame` (the module, main
    function and shader frame), `ops` and `ix` (its instruction and u32 index helpers), the types `u32`, `f16`, `f32`,
    `word` (HALVES_PER_WORD halves) and `accumulator`, the layouts `row_major` and `column_major`, `activations`
    (workgroup-memory buffers of `word` elements, rows `stride` halves apart), `tape_binding` and `tape_words` (the
    tape as `word` elements), `tile` and `invocations`, and, as the kernel starts, `local` (the invocation's index in
    the work-group), `first` (the work-group's first sample), `capacity` (samples a tape region holds) and
    `index_matrix` (each accumulator component's element index)."""

    def matrix(self, component, use: str):
        return self.m.type_cooperative_matrix_khr(component, "Subgroup", MATRIX, MATRIX, use)

    def builtin(self, name: str):
        return self.ops.load(self.u32, self.m.builtin_input(name, self.u32))

    def shared(self, buffer: int, index) -> object:
        """A pointer to the element of activation buffer `buffer` that starts at half `index` (a multiple of
        HALVES_PER_WORD)."""
        element = (self.frame.uint(index // HALVES_PER_WORD) if isinstance(index, int)
                   else self.ix.shift_right(index, HALVES_PER_WORD.bit_length() - 1))
        return self.ops.access_chain(self.m.type_pointer("Workgroup", self.word), self.activations[buffer],
                                     element)

    def shared_stride(self):
        """The activation rows' stride in elements, for cooperative-matrix loads and stores."""
        return self.frame.uint(self.stride // HALVES_PER_WORD)

    def shared_f32(self, variable, index) -> object:
        return self.ops.access_chain(self.m.type_pointer("Workgroup", self.f32), variable, index)

    def times(self, value, factor: int):
        """`value` (an int or a u32 id) times `factor`: an int for an int, else an instruction."""
        return value * factor if isinstance(value, int) else self.ix.mul(value, factor)

    def activation_tile(self, buffer: int, row, column) -> object:
        """The workgroup-memory element at the corner of a tile: row `row` of the tile of samples, feature `column`
        (each an int or a u32 id)."""
        offset = self.times(row, self.stride)
        both_known = isinstance(column, int) and isinstance(offset, int)
        return self.shared(buffer, column + offset if both_known else self.ix.add(column, offset))

    def load(self, type_, pointer, layout, stride, *memory):
        return self.ops.matrix_load(type_, pointer, layout, stride, *memory)

    def store(self, pointer, value, layout, stride, *memory) -> None:
        self.ops.matrix_store(pointer, value, layout, stride, *memory)

    def tape_tile(self, region: int, width: int, layout: str, row: int, column):
        """(pointer, matrix layout, stride) of the tile of the tape region starting at `region` (in widths of
        capacity) whose corner is sample `first + row`, feature `column`: sample-major regions (element (b, k) at
        b width + k) as row-major tiles, feature-major ones (element (b, k) at k capacity + b) as column-major."""
        start = self.ix.mul(self.capacity, region)
        sample = self.ix.add(self.first, row)
        if layout == "samples":
            index = self.ix.add(start, self.ix.add(self.ix.mul(sample, width), column))
            return self.tape_pointer(index), self.row_major, self.frame.uint(width)
        index = self.ix.add(start, self.ix.add(self.ix.mul(column, self.capacity), sample))
        return self.tape_pointer(index), self.column_major, self.capacity

    def tape_pointer(self, index):
        return self.frame.element_pointer(self.tape_binding, index, self.f16)

    def weight_pointer(self, index):
        return self.frame.element_pointer(0, index, self.f16)

    def held(self, value, name: str) -> HeldMatrix:
        """A float32 accumulator in a function variable (set to `value` unless None), read component by component."""
        return HeldMatrix(self.fn, self.accumulator, self.f32, value, name)

    def element(self, component):
        """Which element of its 16 x 16 matrix accumulator component `component` is: row * 16 + column."""
        return self.ops.float_to_uint(self.u32, self.index_matrix.load(component))

    def feature(self, component, column):
        """The feature of accumulator component `component` in the column tile starting at `column`."""
        return self.ix.add(column, self.ix.bit_and(self.element(component), MATRIX - 1))

    def sample(self, component, row: int):
        """The sample of accumulator component `component` in the row tile starting at tile row `row`."""
        return self.ix.add(self.first, self.tile_sample(component, row))

    def tile_sample(self, component, row: int):
        """`sample` counted from the tile's first."""
        return self.ix.add(self.ix.shift_right(self.element(component), 4), row)

    def to_buffer(self, buffer: int, tile, row: int, column) -> None:
        """A float16 tile into workgroup-memory buffer `buffer` at tile row `row`, feature `column`."""
        self.store(self.activation_tile(buffer, row, column), tile, self.row_major, self.shared_stride(), SHARED)

    def to_tape(self, tile, region: int, width: int, layout: str, row: int, column) -> None:
        pointer, matrix_layout, stride = self.tape_tile(region, width, layout, row, column)
        self.store(pointer, tile, matrix_layout, stride, SHARED)

    def copy_to_tape(self, buffer: int, region: int, width: int) -> None:
        """The tile's rows of activation buffer `buffer` (`width` halves of each) onto the sample-major tape region
        starting at `region` (in widths of capacity), where they are contiguous: every invocation copies whole
        elements, consecutive invocations consecutive elements."""
        fn, per_row = self.fn, width // HALVES_PER_WORD
        start = self.ix.shift_right(self.ix.add(self.ix.mul(self.capacity, region),
                                                self.ix.mul(self.first, width)),
                        HALVES_PER_WORD.bit_length() - 1)
        tape_element = self.m.type_pointer("StorageBuffer", self.word)
        with fn.for_range(self.local, self.frame.uint(self.tile * per_row), self.frame.uint(self.invocations)) as e:
            row = self.ix.mul(self.ix.div(e, per_row), self.stride // HALVES_PER_WORD)
            value = self.ops.load(self.word, self.ops.access_chain(self.m.type_pointer("Workgroup", self.word),
                                                                   self.activations[buffer],
                                                                   self.ix.add(row, self.ix.mod(e, per_row))),
                            SHARED)
            self.ops.store(self.ops.access_chain(tape_element, self.tape_words, self.frame.zero,
                                                 self.ix.add(start, e)), value, SHARED)
