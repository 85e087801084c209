"""The shader export: a trained network as source an engine includes in its own shaders (`coopnn export-shader`,
`Model.export_shader`).

`export_shader(graph, directory, lang=...)` writes `NAME.glsl` or `NAME.slang` (the network as `NAME_eval`, with
cooperative vectors or, under `NAME_PORTABLE`, plain loops), `NAME.weights.bin` (row-major weights and biases),
`NAME.json` (the manifest), `NAME.h` (its offsets for C and C++) and `coopnn_weights.h` (a C helper that converts
and uploads the weights on the engine's device). `coopnn.export.device` does what that helper does from Python.
docs/shader-export.md is the engine's side of it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from coopnn.disk_cache import write_atomic
from coopnn.errors import InputError
from coopnn.graph.ir import Graph
from coopnn.graph.passes import optimize
from coopnn.layouts.formats.format import WeightFormat

LANGUAGES = ("glsl", "slang")


@dataclass(frozen=True)
class ExportedShader:
    """The files an export wrote."""

    source: Path
    weights: Path
    manifest: Path
    header: Path
    helper: Path

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.source, self.weights, self.manifest, self.header, self.helper)


def export_shader(graph: Graph, directory: str | os.PathLike, *, lang: str = "glsl", name: str | None = None,
                  weights: str | WeightFormat = "fp16") -> ExportedShader:
    """Write the export of `graph` into `directory` (made if missing); `name` prefixes every symbol (default: the
    graph's name)."""
    from coopnn.export import c_header, glsl, slang
    from coopnn.export.manifest import manifest
    from coopnn.export.plan import plan_export
    from coopnn.export.source import Export, check_name
    from coopnn.export.weights import encode, export_format, layout

    writers = {"glsl": glsl.write_glsl, "slang": slang.write_slang}
    if lang not in writers:
        raise InputError(f"lang={lang!r}: the shader export writes {' or '.join(LANGUAGES)}")
    fmt = export_format(weights)
    plan = plan_export(optimize(graph))
    name = check_name(name if name is not None else graph.name)
    where = layout(plan, fmt)
    export = Export(plan, fmt, where.layers, name, where.tables)
    data = encode(plan, fmt)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    files = ExportedShader(out / f"{name}.{lang}", out / f"{name}.weights.bin", out / f"{name}.json",
                           out / f"{name}.h", out / c_header.HELPER_NAME)
    write_atomic(files.source, writers[lang](export).encode())
    write_atomic(files.weights, data)
    document = manifest(export, data, lang, graph.constants)
    write_atomic(files.manifest, (json.dumps(document, indent=2) + "\n").encode())
    write_atomic(files.header, c_header.write_header(export, document).encode())
    write_atomic(files.helper, c_header.helper_source().encode())
    return files
