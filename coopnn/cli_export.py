"""`coopnn export-shader MODEL`: the model's network as GLSL or Slang source an engine includes, with its weights
file, manifest and C header (`coopnn.export`). Imports nothing heavy until it runs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

HELP = "write a model as a GLSL or Slang include for an engine's own shaders, with its weights and C helpers"


def setup(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--lang", choices=("glsl", "slang"), default="glsl", help="shading language of the include")
    p.add_argument("-o", "--output-dir", default=".", help="folder for the files (made if missing)")
    p.add_argument("--name", default=None,
                   help="prefix of every exported symbol and file (default: the model file's name as an identifier)")
    p.add_argument("--weights", default="fp16",
                   help="format of the weights file: fp16 (both variants) or fp32 (the portable variant only)")


def default_name(model: str) -> str:
    """The model file's stem as an identifier: other characters become underscores, a leading digit gets a prefix."""
    name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", Path(model).stem)).strip("_") or "network"
    return name if name[0].isalpha() else f"net_{name}"


def run(args: argparse.Namespace) -> int:
    from coopnn.export import export_shader
    from coopnn.graph.onnx.importer import import_model

    graph = import_model(args.model)
    name = args.name or default_name(args.model)
    written = export_shader(graph, args.output_dir, lang=args.lang, name=name, weights=args.weights)
    print(f"wrote {', '.join(str(p) for p in written.files)}")
    print(f"include {written.source.name} and call {name}_eval; convert and upload {written.weights.name} with "
          f"{written.helper.name} (C) or coopnn.export.device (Python); docs/shader-export.md says what to enable")
    return 0
