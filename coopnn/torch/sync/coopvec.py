"""The coopvec backend's weights from a module's float16 mirror: matrices converted from row-major float16 into the
kernel's driver-defined layout (vkCmdConvertCooperativeVectorMatrixNV, through `coopvec.driver.repack`, as a trainer
hands its weights to a model), float16 vectors copied. Formats below 16 bits are chosen on the host (row scales), so
their models refresh through the host."""

from __future__ import annotations

from coopnn.backends.coopvec.driver import repack
from coopnn.interop.slot import Prologue
from coopnn.layouts.pack import Entry

BACKEND = "coopvec"
READS_HALVES = True
ITEMSIZE = 2


def _source(entry: Entry, flat) -> Entry | None:
    """Where the mirror holds what `entry` (of the weight buffer) needs, as an entry of the mirror; None where the
    entry is not float16 or larger than the parameter's padded block."""
    if entry.dtype != "fp16" or entry.scale_offset is not None or len(entry.shape) != len(flat.padded):
        return None
    if any(n > padded for n, padded in zip(entry.shape, flat.padded)):
        return None
    offset = flat.offset * ITEMSIZE
    if entry.layout == "vector":
        return Entry(entry.name, offset, entry.size, entry.shape, "vector", "fp16")
    return Entry(entry.name, offset, flat.size * ITEMSIZE, entry.shape, "row_major", "fp16", flat.padded[1] * ITEMSIZE)


def prologue(executable, master, held: dict[str, str]) -> Prologue | None:
    entries = executable.binary.weight_image.entries
    sources, destinations = {}, {}
    for name, parameter in held.items():
        source = _source(entries[name], master.layout.entries[parameter])
        if source is None:
            return None
        sources[name], destinations[name] = source, entries[name]
    record = repack(executable.context, master.mirror_buffer, sources, executable.weight_buffer, destinations)
    return Prologue(("convert", master.mirror_buffer.serial, executable.weight_buffer.serial),
                    (master.mirror_buffer,), record)

# the training sessions backward passes run on (`coopnn.torch.backward`): where the input's gradient is wanted, the
# per-sample step kernel, which is compiled from the step program and so writes it; else the backend's choice (the
# tiled kernel where it takes the model)
INPUT_GRADIENT_OPTIONS = {"step": "coopvec"}
BACKWARD_OPTIONS: dict[str, str] = {}
