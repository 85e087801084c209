"""Builds the model zoo: exports every network in `zoo_networks.ZOO` to models/NAME.onnx, checks it, writes README.md.

Run from the repository root:

    python3 models/build_zoo.py               # rebuild every model and the README
    python3 models/build_zoo.py --only NAME   # rebuild one model (the README is regenerated from the files on disk)
    python3 models/build_zoo.py --check       # rebuild in memory and fail if any committed file differs

Every model is built under its own seed, exported with a dynamic batch axis, stripped of the exporters' metadata (stack
traces, doc strings) so that rebuilding gives byte-identical files, checked with the full ONNX checker, and run in
onnxruntime at a batch size other than the export one against the PyTorch module. Torch is a tool of this script only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import warnings
import zlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from zoo_inventory import render_readme
from zoo_networks import ZOO, ZooEntry

MODELS_DIR = Path(__file__).resolve().parent
EXPORT_BATCH = 5
CHECK_BATCH = 7
RTOL, ATOL = 1e-4, 1e-5


class ZooBuildError(RuntimeError):
    """A model failed to export, failed the checker, or disagreed with PyTorch."""


@contextlib.contextmanager
def exporter_output_captured():
    """Send everything written to fds 1 and 2 (exporter progress, torch logging, warnings) to a scratch file.

    The exporters log through handlers that hold the original stderr, so only an fd-level redirect keeps the table
    readable. The captured text is replayed if the export fails, where it is the useful diagnostic.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile(mode="w+b") as log, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fd in (1, 2):
            os.dup2(log.fileno(), fd)
        try:
            yield
        except BaseException:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, original in saved.items():
                os.dup2(original, fd)
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace"))
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, original in saved.items():
                os.dup2(original, fd)
                os.close(original)


def seed_of(entry: ZooEntry) -> int:
    """A per-model seed from the name, so one model builds the same whether alone (--only) or with the rest."""
    return zlib.crc32(entry.name.encode())


def build_module(entry: ZooEntry) -> torch.nn.Module:
    torch.manual_seed(seed_of(entry))
    return entry.build().eval()


def random_feeds(entry: ZooEntry, batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed_of(entry) + batch)
    return {name: rng.uniform(-1.0, 1.0, size=(batch, width)).astype(np.float32) for name, width in entry.inputs}


def export_dynamo(entry: ZooEntry, module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> onnx.ModelProto:
    batch = torch.export.Dim("batch")
    program = torch.onnx.export(
        module, example, dynamo=True, opset_version=entry.opset, verbose=False,
        input_names=entry.input_names, output_names=entry.output_names,
        dynamic_shapes=tuple({0: batch} for _ in example),
    )
    return program.model_proto


def export_legacy(entry: ZooEntry, module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> onnx.ModelProto:
    buffer = io.BytesIO()
    torch.onnx.export(
        module, example, buffer, dynamo=False, opset_version=entry.opset,
        input_names=entry.input_names, output_names=entry.output_names,
        dynamic_axes={name: {0: "batch"} for name in entry.input_names + entry.output_names},
    )
    return onnx.load_from_string(buffer.getvalue())


EXPORTERS = {"dynamo": export_dynamo, "legacy": export_legacy}


def strip_metadata(model: onnx.ModelProto) -> None:
    """Drop doc strings and metadata: the dynamo exporter records stack traces with absolute paths in them."""
    del model.metadata_props[:]
    model.doc_string = ""
    graph = model.graph
    graph.doc_string = ""
    del graph.metadata_props[:]
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.doc_string = ""
        del value.metadata_props[:]
    for tensor in graph.initializer:
        tensor.doc_string = ""
        del tensor.metadata_props[:]
    for node in graph.node:
        node.doc_string = ""
        del node.metadata_props[:]


def check_signature(entry: ZooEntry, model: onnx.ModelProto) -> None:
    """Every input and output is float32 [batch, width]: a symbolic axis 0 and the declared feature width."""
    for declared, values in ((entry.inputs, model.graph.input), (entry.outputs, model.graph.output)):
        found = []
        for value in values:
            tensor_type = value.type.tensor_type
            dims = tensor_type.shape.dim
            found.append((value.name, tensor_type.elem_type, [d.dim_param or d.dim_value for d in dims]))
        expected = [(name, onnx.TensorProto.FLOAT, ["batch", width]) for name, width in declared]
        if found != expected:
            raise ZooBuildError(f"{entry.name}: graph signature {found} differs from the declared {expected}")


def compare_with_torch(entry: ZooEntry, module: torch.nn.Module, model_bytes: bytes) -> float:
    """Run the exported file in onnxruntime at CHECK_BATCH and return the largest absolute error against PyTorch."""
    feeds = random_feeds(entry, CHECK_BATCH)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    onnx_outputs = session.run(None, feeds)
    with torch.no_grad():
        torch_outputs = module(*(torch.from_numpy(feeds[name]) for name in entry.input_names))
    if isinstance(torch_outputs, torch.Tensor):
        torch_outputs = (torch_outputs,)
    worst = 0.0
    for (name, _), got, want in zip(entry.outputs, onnx_outputs, torch_outputs):
        want = want.numpy()
        if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=ATOL):
            raise ZooBuildError(f"{entry.name}: output {name!r} disagrees with PyTorch (onnxruntime {got.shape}, "
                                f"torch {want.shape}, max abs error {np.max(np.abs(got - want)):.3g})")
        worst = max(worst, float(np.max(np.abs(got - want))))
    return worst


def build(entry: ZooEntry) -> tuple[bytes, dict[str, str]]:
    """Export, strip, check and compare one model; return its bytes and a row of the summary table."""
    module = build_module(entry)
    example = tuple(torch.from_numpy(array) for array in random_feeds(entry, EXPORT_BATCH).values())
    with exporter_output_captured():
        model = EXPORTERS[entry.exporter](entry, module, example)
    strip_metadata(model)
    onnx.checker.check_model(model, full_check=True)
    check_signature(entry, model)
    model_bytes = model.SerializeToString()
    worst = compare_with_torch(entry, module, model_bytes)
    row = {
        "model": entry.name,
        "exporter": f"{entry.exporter} opset {entry.opset}",
        "nodes": str(len(model.graph.node)),
        "params": str(sum(p.numel() for p in module.parameters())),
        "bytes": str(len(model_bytes)),
        f"max |err| @ batch {CHECK_BATCH}": f"{worst:.2e}",
    }
    return model_bytes, row


def print_table(rows: list[dict[str, str]]) -> None:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    print("  ".join("-" * widths[c] for c in columns))
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", metavar="NAME", choices=[e.name for e in ZOO], help="rebuild this model only")
    parser.add_argument("--check", action="store_true", help="rebuild in memory; fail if a committed file differs")
    args = parser.parse_args(argv)

    built, rows = {}, []
    for entry in (e for e in ZOO if args.only in (None, e.name)):
        built[entry.name], row = build(entry)
        rows.append(row)
    print_table(rows)

    # With --only the README still covers the whole zoo: the models not rebuilt are read from disk.
    model_bytes = {e.name: built.get(e.name) or (MODELS_DIR / f"{e.name}.onnx").read_bytes() for e in ZOO}
    outputs = {f"{name}.onnx": data for name, data in built.items()}
    outputs["README.md"] = render_readme(ZOO, model_bytes).encode()
    if args.check:
        stale = [name for name, data in outputs.items()
                 if not (MODELS_DIR / name).exists() or (MODELS_DIR / name).read_bytes() != data]
        if stale:
            print(f"\nout of date (rerun python3 models/build_zoo.py): {', '.join(stale)}", file=sys.stderr)
            return 1
        print("\nevery committed file matches a fresh build")
        return 0
    for name, data in outputs.items():
        (MODELS_DIR / name).write_bytes(data)
    print(f"\nwrote {', '.join(outputs)}; zoo total {sum(map(len, model_bytes.values()))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
