"""The coopmat2 kernel's text form: its steps (`steps.py`) in the tensor language's syntax, with coopnn's extension
for tensor addressing: `tensor_layout<D,constant> dims [...] slice [offset:+span, ...]` and
`tensor_view<D> permute [...]` / `dims [...] strides [...]` values, named by the load or store that uses them
(`cooperative_matrix_load %w0[%L, %V]`). A stage's epilogue is the region of a `cooperative_matrix_apply`, its kernel
instructions on scalars. A block format's layouts show their `block [1, 32]`, its loads the decode functions they
name (`decode(@decode_q4_0)`), and comments after the kernel say what each decode function computes."""

from __future__ import annotations

from typing import Callable

from coopnn.backends.coopmat2.decode import code_bytes
from coopnn.layouts.formats import weight_format
from coopnn.shaders.targets.tile_text import input_stage_lines, stage_lines, tile_function
from coopnn.backends.coopmat2.steps import STAGED, Apply, Convert, Layout, Load, MulAdd, Store, TileKernel, View


def _operands(values) -> str:
    return ", ".join(f"%{v}" if isinstance(v, str) else str(v) for v in values)


def _layout(name: str, layout: Layout) -> str:
    dims = len(layout.dimension)
    offset = [f"%{o}" if isinstance(o, str) else str(o) for o in layout.offset]
    region = ", ".join(f"{o}:+{s}" for o, s in zip(offset, layout.span))
    block = "" if layout.block is None else f" block [{_operands(layout.block)}]"
    return f"%{name} = tensor_layout<{dims},constant>{block} dims [{_operands(layout.dimension)}] slice [{region}]"


def _view(name: str, view: View) -> str:
    head = f"%{name} = tensor_view<{len(view.permutation)}>"
    if view.dimension is None:
        return f"{head} permute [{_operands(view.permutation)}]"
    return f"{head} dims [{_operands(view.dimension)}] strides [{_operands(view.stride)}]"


class _Printer:
    def __init__(self, kernel: TileKernel):
        self.kernel = kernel
        self.lines: list[str] = []
        self.layouts = 0
        self.print: dict[type, Callable] = {Load: self.load, Convert: self.convert, MulAdd: self.mul_add,
                                            Apply: self.apply, Store: self.store}

    def emit(self, line: str, depth: int = 2) -> None:
        self.lines.append("  " * depth + line)

    def addressing(self, layout: Layout, view: View | None) -> str:
        """Prints the layout (and view) the next access uses; their names."""
        self.layouts += 1
        names = [f"L{self.layouts}"]
        self.emit(_layout(names[0], layout))
        if view is not None:
            names.append(f"V{self.layouts}")
            self.emit(_view(names[1], view))
        return ", ".join(f"%{n}" for n in names)

    def input_stage(self) -> None:
        """Work-item s runs the per-sample instructions for sample s of the tile into the float16 rows of %staged."""
        stage = self.kernel.plan.stages[0]
        self.emit(f"; input stage: work-item s runs the per-sample instructions for sample s of the tile (the "
                  "batch's last sample past it),")
        self.emit(f"; its row into %{STAGED} as float16 (0 past the batch)")
        self.emit(f"%{STAGED} = alloca : memref<f16x{stage.width}x{self.kernel.tile},local>")
        self.emit("%s = local_invocation_index : index")
        self.emit("%sample = min (add %i, %s), (sub %n, 1) : index")
        for line in input_stage_lines(self.kernel.plan):
            self.emit(line)
        self.emit(f"store %{stage.source}, %{STAGED}[0:{stage.width}, %s] : f16")
        self.emit("barrier.local")

    def load(self, step: Load) -> None:
        where = self.addressing(step.layout, step.view)
        decode = ""
        if step.decode is not None:
            names = [f"@decode_{step.decode}"] + ([f"@decode_{step.decode}_x{step.decode_vector}"]
                                                  if step.decode_vector else [])
            decode = f" decode({', '.join(names)})"
        self.emit(f"%{step.result} = cooperative_matrix_load %{step.param}[{where}]{decode} : {step.type}")

    def convert(self, step: Convert) -> None:
        self.emit(f"%{step.result} = cast %{step.source} : {step.type}")

    def mul_add(self, step: MulAdd) -> None:
        c = step.c
        if c is None:
            c = f"zero_{step.result}"
            self.emit(f"%{c} = constant 0.0 : {step.type}")
        self.emit(f"%{step.result} = cooperative_matrix_mul_add %{step.a}, %{step.b}, %{c} : {step.type}")

    def apply(self, step: Apply) -> None:
        plan = self.kernel.plan
        stage = plan.stages[step.stage]
        self.emit(f"%{step.result} = cooperative_matrix_apply (%r,%c,%v)=%{step.source} -> {step.type} {{")
        lines, result = stage_lines(plan, stage, "%v")
        for line in lines:
            self.emit(line, 3)
        if step.mask is not None:
            self.emit(f"%keep = cmp.lt %c, {step.mask} : bool", 3)
            self.emit(f"%masked = select %keep, {result}, 0.0 : f32", 3)
            result = "%masked"
        if step.round_result:
            self.emit(f"%rh = cast {result} : f16", 3)
            self.emit("%rounded = cast %rh : f32", 3)
            result = "%rounded"
        self.emit(f"yield ({result})", 3)
        self.emit("}")

    def store(self, step: Store) -> None:
        where = self.addressing(step.layout, None)
        self.emit(f"cooperative_matrix_store %{step.source}, %{step.param}[{where}]")


def _decode_comments(kernel: TileKernel) -> list[str]:
    """What the decode functions the loads name compute, one comment line each."""
    load = next((s for s in kernel.steps if isinstance(s, Load) and s.decode is not None), None)
    if load is None:
        return []
    fmt = weight_format(load.decode)
    run, zero = code_bytes(fmt), fmt.blocks.zero
    code = f"q - {zero}" if zero else "q"
    signed = "signed " if fmt.blocks.signed else ""
    lines = [f"; @decode_{fmt.name}(block, blockCoord, coordInBlock) -> f16: j = coordInBlock[1], q = the {signed}"
             f"{fmt.bits}-bit code at bit {fmt.bits} * (j div {run}) of code byte j mod {run} of the block "
             f"{{f16 d; codes}}, cast(cast(d : f32) * ({code}) : f16)"]
    if load.decode_vector:
        lines.append(f"; @decode_{fmt.name}_x{load.decode_vector}: the same for j .. j + {load.decode_vector - 1} "
                     f"(j a multiple of {load.decode_vector}), a vector of {load.decode_vector} f16 "
                     f"(SPV_NV_cooperative_matrix_decode_vector)")
    return lines


def _memref(param, kernel: TileKernel) -> str:
    """A weight parameter's memref in the element type it is stored in: f16, f32 or a block format's name."""
    if param.role not in ("matrix", "vector"):
        return param.memref
    load = next((s for s in kernel.steps if isinstance(s, Load) and s.param == param.name), None)  # blocks' alike
    if load is None:  # a vector the input stage reads (an encoding's parameters): the format's vectors
        return param.memref.replace("memref<f32", f"memref<{kernel.vectors}")
    return param.memref.replace("memref<f32", f"memref<{load.decode or load.type.component}")


def kernel_text(kernel: TileKernel) -> str:
    program = kernel.plan.program
    params = [(f"%{p.name}: {_memref(p, kernel)}", "") for p in program.params]
    printer = _Printer(kernel)
    if kernel.plan.input_stage:
        printer.input_stage()
    for step in kernel.steps:
        printer.print[type(step)](step)
    return "\n".join([
        f"; kernel {program.name} on the coopmat2 target: a work-group of {kernel.tile} work-items carries a tile of "
        f"{kernel.tile} samples",
        "; through every layer as workgroup-scope cooperative matrices (feature dimensions padded to multiples of "
        f"{kernel.granularity});",
        "; tensor_layout and tensor_view are coopnn's extension (SPV_NV_tensor_addressing)",
        *tile_function(program.name, params, (kernel.tile, 1), kernel.tile, printer.lines),
        *_decode_comments(kernel),
    ]) + "\n"
