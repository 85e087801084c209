"""The portable backend's weights from a module's vector: float32 matrices (row-major) and vectors, copied on the GPU
(vkCmdCopyBuffer), a region per matrix row where the vector pads rows the weight buffer does not."""

from __future__ import annotations

from coopnn.interop.slot import Prologue
from coopnn.runtime.vk.loader import load_vulkan

BACKEND = "portable"
READS_HALVES = False
ITEMSIZE = 4


def _regions(entry, flat) -> list[tuple[int, int, int]] | None:
    """(vector byte offset, weight-buffer byte offset, bytes) copying `flat` (a FlatEntry) into `entry`; None where
    the entry is not float32 of the parameter's shape."""
    if entry.dtype != "fp32" or tuple(entry.shape) != flat.shape or entry.scale_offset is not None:
        return None
    source = flat.offset * ITEMSIZE
    if entry.layout == "vector":
        return [(source, entry.offset, entry.size)]
    if entry.layout != "row_major":
        return None
    rows, columns = entry.shape
    pitch = flat.padded[1] * ITEMSIZE
    if pitch == entry.stride == columns * ITEMSIZE:
        return [(source, entry.offset, rows * pitch)]
    return [(source + r * pitch, entry.offset + r * entry.stride, columns * ITEMSIZE) for r in range(rows)]


def prologue(executable, master, held: dict[str, str]) -> Prologue | None:
    vk = load_vulkan()
    entries = executable.binary.weight_image.entries
    regions = []
    for name, parameter in held.items():
        found = _regions(entries[name], master.layout.entries[parameter])
        if found is None:
            return None
        regions += found
    copies = vk.ffi.new("VkBufferCopy[]", [{"srcOffset": s, "dstOffset": d, "size": n} for s, d, n in regions])
    source, destination = master.buffer.handle, executable.weight_buffer.handle

    def record(cmd) -> None:
        vk.lib.vkCmdCopyBuffer(cmd, source, destination, len(regions), copies)

    return Prologue(("copy", master.buffer.serial, executable.weight_buffer.serial), (master.buffer,), record)

# the training sessions backward passes run on (`coopnn.torch.backward`), with and without the input's gradient: the
# backend's defaults, whose one step kernel writes it
INPUT_GRADIENT_OPTIONS: dict[str, str] = {}
BACKWARD_OPTIONS: dict[str, str] = {}
