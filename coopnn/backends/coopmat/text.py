"""The coopmat kernel's text form: what a work-group does with its tile of samples, in the tensor language's syntax
with coopnn's cooperative types, printed from what the emitter (`target.py`) builds the kernel from (its tile plan,
tile, matrix shape, work-group size, activation row stride and packed weights), so its sizes are the kernel's.

Memrefs are column-major, as the tensor language lays them out: a sample's features are a column of the input,
output and activation memrefs, and a weight matrix or bias tile stored row-major is the memref of its transpose. So
the kernel's row-major tile loads and stores (RowMajorKHR) print as `.t` and its column-major B loads plainly. The
element copies are a `foreach` over the tile's elements with the work-item each goes to in a comment; a column's row
tiles are a `for` the kernel unrolls (`unroll=true`); integer operands that are constants print as literals.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Protocol

from coopnn.layouts.pack import WeightImage, align_up
from coopnn.shaders.targets.tile_plan import Stage, TilePlan
from coopnn.shaders.targets.tile_text import input_stage_lines, matrix_type, stage_lines, tile_function


ACCUMULATOR = "MatrixAccumulatorKHR"


class MatrixShape(Protocol):
    """The M x N x K of the kernel's subgroup-scope matrices (`target.Shape`)."""

    m: int
    n: int
    k: int

    @property
    def granularity(self) -> int: ...


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _sizes(given: tuple[int, ...], padded: tuple[int, ...]) -> str:
    """'R x C' or 'N' of a weight as the model gives it, and what it is padded to where that differs."""
    text = " x ".join(map(str, given))
    return text if given == padded else f"{text} (padded to {' x '.join(map(str, padded))})"


class _Printer:
    def __init__(self, plan: TilePlan, packed: WeightImage, shape: MatrixShape, tile: int,
                 work_group_size: tuple[int, int, int], stride: int):
        self.plan, self.packed, self.shape, self.tile, self.stride = plan, packed, shape, tile, stride
        self.invocations = work_group_size[0] * work_group_size[1]
        self.lines: list[str] = []
        self.depth = 2

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def comment(self, *lines: str) -> None:
        for line in lines:
            self.emit("; " + line)

    @contextmanager
    def region(self, opening: str, closing: str | None = "}") -> Iterator[None]:
        self.emit(opening)
        self.depth += 1
        yield
        self.depth -= 1
        if closing is not None:
            self.emit(closing)

    def padded(self, features: int) -> int:
        return align_up(features, self.shape.granularity)

    @contextmanager
    def elements(self, columns: int, first: int = 0) -> Iterator[None]:
        """A `foreach` over the tile's `columns` elements a row (from column `first`): %s the sample in the tile, %f
        the column."""
        with self.region(f"foreach (%e) = (0), ({self.tile * columns}) {{"):
            self.emit(f"%s = div %e, {columns} : index")
            if first:
                self.emit(f"%p = rem %e, {columns} : index")
                self.emit(f"%f = add %p, {first} : index")
            else:
                self.emit(f"%f = rem %e, {columns} : index")
            yield

    def workgroup(self) -> None:
        widest = max(self.padded(s.width) for s in self.plan.stages)
        self.comment("the subgroups share out each layer's column tiles")
        for line in ("%sg = subgroup_linear_id : i32", "%sx = num_subgroups.x : i32", "%sy = num_subgroups.y : i32",
                     "%sn = mul %sx, %sy : i32", "%subgroup = cast %sg : index", "%subgroups = cast %sn : index"):
            self.emit(line)
        self.comment(f"workgroup memory: two buffers of {self.tile} rows (samples) of {self.stride} halves, the widest "
                     f"layer's {widest} and {self.stride - widest} of padding",
                     f"(consecutive rows start on different banks), {2 * self.tile * self.stride} bytes each")
        for buffer in range(2):
            self.emit(f"%act{buffer} = alloca : memref<f16x{widest}x{self.tile},strided<1,{self.stride}>,local>")

    def input_stage(self) -> None:
        plan, stage = self.plan, self.plan.stages[0]
        width = self.padded(stage.width)
        self.comment(f"input stage: work-item s < {self.tile} runs the per-sample instructions for sample s of the "
                     "tile (the batch's last sample past it),",
                     f"its row into %act0 as float16 (0 past the batch), columns {stage.width} to {width - 1} zero")
        with self.region(f"foreach (%s) = (0), ({self.tile}) {{"):
            self.emit("%sample = min (add %i, %s), (sub %n, 1) : index")
            for line in input_stage_lines(plan):
                self.emit(line)
            self.emit(f"store %{stage.source}, %act0[0:{stage.width}, %s] : f16")
        self.emit("barrier.local")

    def inputs(self) -> None:
        if self.plan.input_stage:
            self.input_stage()
            return
        plan, stage = self.plan, self.plan.stages[0]
        features, name = plan.input.shape[0], plan.input.name
        self.comment(f"input: the tile's {self.tile} x {features} floats of %{name} into %act0, element e by work-item "
                     f"e mod {self.invocations} (consecutive",
                     "work-items read consecutive floats), through stage 0 to float16, 0 for samples past the batch")
        with self.elements(features):
            self.emit("%inside = cmp.lt %s, %ti : bool")
            with self.region("%y = if %inside -> (f16) {", None):
                self.emit("%sample = add %i, %s : index")
                self.emit(f"%{stage.source} = load %{name}[%f, %sample] : f32")
                result = f"%{stage.source}"
                if stage.epilogue:
                    lines, result = stage_lines(plan, stage, result)
                    for line in lines:
                        self.emit(line)
                self.emit(f"%rounded = cast {result} : f16")
                self.emit("yield (%rounded)")
            with self.region("} else {"):
                self.emit("%zero = constant 0.0 : f16")
                self.emit("yield (%zero)")
            self.emit("store %y, %act0[%f, %s]")
        padding = self.padded(features) - features
        if padding:
            self.comment(f"padding: columns {features} to {features + padding - 1} of every row of %act0 are 0, "
                         f"element e by work-item e mod {self.invocations}")
            with self.elements(padding, features):
                self.emit("%zero = constant 0.0 : f16")
                self.emit("store %zero, %act0[%f, %s]")
        self.emit("barrier.local")

    def layer(self, index: int, stage: Stage, source: int, target: int) -> None:
        shape, plan = self.shape, self.plan
        width, columns = self.padded(stage.width), self.padded(stage.columns)
        tiles, steps, rows = width // shape.n, columns // shape.k, self.tile // shape.m
        operands = ", ".join(f"%{v}" for v in (stage.matrix, plan.stages[index - 1].result, stage.bias) if v)
        self.comment(f"layer {index}: %{stage.source} = gemv.n {operands} from %act{source} into %act{target}, "
                     f"weights {_sizes((stage.width, stage.columns), (width, columns))}:",
                     f"{_count(tiles, 'column tile')} of {shape.n}, tile c on subgroup c mod %subgroups; a column "
                     f"loads its {_count(steps, 'B tile')} once")
        acc = matrix_type("f32", shape.m, shape.n, ACCUMULATOR)
        halves = matrix_type("f16", shape.m, shape.n, ACCUMULATOR)
        column, row, start = f"%j{index}", f"%row{index}", f"%C{index}"
        with self.region(f"for %col{index} = %subgroup, {tiles}, %subgroups {{"):
            self.emit(f"{column} = mul %col{index}, {shape.n} : index")
            if stage.bias is not None:
                self.emit(f"%bias{index} = cooperative_matrix_load.t %{stage.bias}[{column}, 0] : {halves}")
                self.emit(f"{start} = cast %bias{index} : {acc}")
            else:
                self.emit(f"{start} = constant 0.0 : {acc}")
            b = matrix_type("f16", shape.k, shape.n, "MatrixBKHR")
            for step in range(steps):
                self.emit(f"%B{index}_{step} = cooperative_matrix_load %{stage.matrix}[{step * shape.k}, {column}] "
                          f": {b}")
            self.comment(f"{_count(rows, 'row tile')} of {shape.m} samples, an accumulator each from {start}, K steps "
                         "ascending (interleaved: K outermost)")
            a = matrix_type("f16", shape.m, shape.k, "MatrixAKHR")
            with self.region(f"for {row} = 0, {self.tile}, {shape.m} {{", "} attributes {unroll=true}"):
                value = start
                for step in range(steps):
                    self.emit(f"%A{index}_{step} = cooperative_matrix_load.t %act{source}[{step * shape.k}, {row}] "
                              f": {a}")
                    product = f"%{stage.source}" if step == steps - 1 else f"%P{index}_{step}"
                    self.emit(f"{product} = cooperative_matrix_mul_add %A{index}_{step}, %B{index}_{step}, {value} "
                              f": {acc}")
                    value = product
                if stage.epilogue:
                    value = self.epilogue(index, stage, value, acc)
                self.emit(f"%H{index} = cast {value} : {halves}")
                self.emit(f"cooperative_matrix_store.t %H{index}, %act{target}[{column}, {row}]")
        self.emit("barrier.local")

    def epilogue(self, index: int, stage: Stage, value: str, acc: str) -> str:
        """The stage on every component of the accumulator `value`; the result's identifier."""
        result = f"%{stage.result}" if stage.result != stage.source else f"%y{index}"
        with self.region(f"{result} = cooperative_matrix_apply (%r,%c,%v)={value} -> {acc} {{"):
            lines, last = stage_lines(self.plan, stage, "%v")
            for line in lines:
                self.emit(line)
            self.emit(f"yield ({last})")
        return result

    def outputs(self, source: int) -> None:
        output = self.plan.output
        features = output.shape[0]
        self.comment(f"output: the tile's {self.tile} x {features} floats of %act{source} into %{output.name}, element "
                     f"e by work-item e mod {self.invocations},", "samples in the batch only")
        with self.elements(features):
            self.emit("%inside = cmp.lt %s, %ti : bool")
            with self.region("if %inside {"):
                self.emit(f"%h = load %act{source}[%f, %s] : f16")
                value = f"%{self.plan.stages[-1].result}"
                self.emit(f"{value} = cast %h : f32")
                self.emit("%sample = add %i, %s : index")
                self.emit(f"store {value}, %{output.name}[%f, %sample]")

    def param(self, name: str, memref: str) -> tuple[str, str]:
        """A kernel parameter's declaration, and for a weight entry where it sits and what it holds."""
        if name not in self.packed.entries:
            return f"%{name}: {memref}", ""
        entry = self.packed.entry(name)
        if len(entry.shape) == 1:
            return (f"%{name}: memref<f16x{entry.shape[0]}>", f"byte {entry.offset}: an encoding's parameter vector, "
                    "read element by element")
        rows, cols = entry.shape
        shape = self.plan.program.param(name).shape
        if len(shape) == 2:
            held = f"matrix {_sizes(shape, (rows, cols))}, row-major"
        else:
            held = f"biases {_sizes(shape, (cols,))} as a tile of {rows} identical rows"
        return f"%{name}: memref<f16x{cols}x{rows}>", f"byte {entry.offset}: {held}"


def kernel_text(plan: TilePlan, packed: WeightImage, shape: MatrixShape, tile: int,
                work_group_size: tuple[int, int, int], stride: int) -> str:
    """The kernel the emitter builds from these: tiles of `tile` samples on a work-group of `work_group_size`, M x N x
    K = `shape` matrices, activation rows of `stride` halves, weights as `packed`."""
    printer = _Printer(plan, packed, shape, tile, work_group_size, stride)
    printer.workgroup()
    printer.inputs()
    for index, stage in enumerate(plan.products, start=1):
        printer.layer(index, stage, (index - 1) % 2, index % 2)
    printer.outputs(len(plan.products) % 2)
    program = plan.program
    params = [printer.param(p.name, p.memref) for p in program.params]
    x, y = work_group_size[:2]
    return "\n".join([
        f"; kernel {program.name} on the coopmat target (VK_KHR_cooperative_matrix): a work-group of "
        f"{printer.invocations} work-items",
        f"; ({x} x {y}) carries a tile of {tile} samples through every layer as subgroup-scope cooperative matrices "
        f"of M x N x K =",
        f"; {shape.m} x {shape.n} x {shape.k}, feature dimensions padded to multiples of {shape.granularity}; "
        "weights in one float16 buffer (bytes below).",
        "; Memrefs are column-major, as in the tensor language: a sample's features are a column, a row-major weight "
        "matrix",
        "; is the memref of its transpose, and the kernel's row-major tile loads and stores are `.t`. Constant "
        "integer operands",
        "; are literals.",
        *tile_function(program.name, params, (x, y), tile, printer.lines),
    ]) + "\n"
