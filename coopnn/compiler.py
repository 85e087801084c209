"""`coopnn.compile`: a model to SPIR-V for one target, with the kernel program's text and the binding layout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from coopnn.graph.ir import Graph
from coopnn.graph.passes import optimize
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.printer import print_program
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.spirv import disassemble
from coopnn.backends import target, target_format
from coopnn.errors import CompileError
from coopnn.layouts.formats.calibration import calibrated
from coopnn.layouts.formats.format import WeightFormat
from coopnn.shaders.targets.base import Binary

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class Program:
    """A compiled model: `.spirv` (bytes), `.text` (the kernel program, or the target's own text form of it),
    entry point, bindings and push constants."""

    graph: Graph
    kernel: KernelProgram
    binary: Binary
    text: str

    @property
    def spirv(self) -> bytes:
        return self.binary.spirv

    @property
    def entry_point(self) -> str:
        return self.binary.entry_point

    @property
    def bindings(self):
        return self.binary.bindings

    @property
    def push_constants(self):
        return self.binary.push_constants

    @property
    def workgroup_size(self) -> tuple[int, int, int]:
        return self.binary.workgroup_size

    @property
    def weights(self) -> bytes:
        return self.binary.weight_image.data

    def spvasm(self) -> str:
        return disassemble(self.binary.spirv)


def compile_graph(graph: Graph, *, target_name: str = "portable", weights: str | WeightFormat | None = None,
                  workgroup_size: int | None = None, calibration: Any = None, decode_vector: bool = False) -> Program:
    fmt = calibrated(target_format(target_name, weights), graph, calibration)
    kernel = lower(graph)
    chosen = target(target_name)
    options = {}
    if decode_vector:
        if not getattr(chosen, "decodes_vectors", False):
            raise CompileError(f"the {target_name} target has no DecodeVectorFunc variant (decode_vector: the "
                               f"coopmat2 target with weights='q8_0' or 'q4_0')")
        options["decode_vector"] = True
    if workgroup_size is not None:
        options["workgroup_size"] = workgroup_size
    binary = chosen.compile(kernel, fmt, **options)
    return Program(graph, kernel, binary, binary.text or print_program(kernel, binary.workgroup_size[0]))


def compile(model: str | os.PathLike | bytes | onnx.ModelProto, *, target: str = "portable", weights: str | None = None,
            workgroup_size: int | None = None, calibration: Any = None, decode_vector: bool = False) -> Program:
    """Compile a model (path, bytes or ModelProto) for `target` ("portable", ...) with weights in format `weights`
    (by default the target's own: float32 on portable, float16 on coopvec) and `workgroup_size` (samples per
    work-group; by default the target's own: 64, or the coopmat2 target's tiles of 128); `calibration` as
    `coopnn.load` takes it, for a format that quantizes inputs (int8); `decode_vector`: a block format's loads name a
    DecodeVectorFunc as well (coopmat2, for inspection: the backend emits it where the device offers it)."""
    from coopnn.graph.onnx.importer import import_model  # onnx is imported only when a model is

    return compile_graph(optimize(import_model(model)), target_name=target, weights=weights,
                         workgroup_size=workgroup_size, calibration=calibration, decode_vector=decode_vector)
