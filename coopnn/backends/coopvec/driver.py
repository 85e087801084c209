"""VK_NV_cooperative_vector matrix conversion: sizes, the host form and the command-buffer form.

Cooperative-vector weights are stored in driver-defined layouts (InferencingOptimal, TrainingOptimal); these are the
only ways to produce or read them. All three need a context whose device was created with the cooperativeVector feature
(which enables the extension); anything else raises BackendUnavailableError naming the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from coopnn.errors import BackendUnavailableError
from coopnn.layouts.formats import weight_format
from coopnn.layouts.formats.format import WeightFormat
from coopnn.runtime.vk import nv_ffi
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import as_bytes
from coopnn.runtime.vk.nv_ffi import ComponentType, MatrixLayout, StructureType, ffi

if TYPE_CHECKING:
    from coopnn.layouts.pack import Entry
    from coopnn.runtime.vk.context import VulkanContext
    from coopnn.runtime.vk.memory import Buffer

vk = load_vulkan()


@dataclass(frozen=True)
class MatrixFormat:
    """A matrix of `rows` x `columns` elements of `component_type` stored in `layout` (`stride`: bytes between rows
    or columns for the row/column-major layouts, 0 otherwise)."""

    rows: int
    columns: int
    component_type: ComponentType
    layout: MatrixLayout
    stride: int = 0


def matrix_format(fmt: WeightFormat, rows: int, columns: int, layout: str, stride: int = 0) -> MatrixFormat:
    """A matrix of `fmt` elements in `layout`, named as manifest entries name it ("row_major", "inferencing_optimal",
    ...)."""
    return MatrixFormat(rows, columns, ComponentType[fmt.component_type], MatrixLayout[layout.upper()], stride)


@dataclass(frozen=True)
class MatrixConversion:
    """One device-side conversion: bytes [src_offset, src_offset + src_size) of `src` into `dst` at `dst_offset`."""

    src: Buffer
    src_offset: int
    src_size: int
    src_format: MatrixFormat
    dst: Buffer
    dst_offset: int
    dst_size: int
    dst_format: MatrixFormat


def _require(context: VulkanContext) -> None:
    if nv_ffi.COOPERATIVE_VECTOR_EXTENSION not in context.device.extensions:
        supported = context.info.cooperative_vector is not None
        raise BackendUnavailableError(
            f"{context.info.describe()}: {nv_ffi.COOPERATIVE_VECTOR_EXTENSION} is "
            + ("not enabled on this context (create it with features={'cooperativeVector'})" if supported
               else "not supported by this device and driver"))


def _info(src_format: MatrixFormat, dst_format: MatrixFormat, src_size: int, dst_size_pointer):
    if (src_format.rows, src_format.columns) != (dst_format.rows, dst_format.columns):
        raise ValueError(f"conversion changes the matrix shape: {src_format} -> {dst_format}")
    info = ffi.new("VkConvertCooperativeVectorMatrixInfoNV*")
    info.sType = StructureType.CONVERT_COOPERATIVE_VECTOR_MATRIX_INFO_NV
    info.srcSize = src_size
    info.pDstSize = dst_size_pointer
    info.srcComponentType = src_format.component_type
    info.dstComponentType = dst_format.component_type
    info.numRows = src_format.rows
    info.numColumns = src_format.columns
    info.srcLayout = src_format.layout
    info.srcStride = src_format.stride
    info.dstLayout = dst_format.layout
    info.dstStride = dst_format.stride
    return info


def _device(context: VulkanContext):
    return ffi.cast("VkDevice", nv_ffi.address(vk.ffi, context.device.handle))


def _convert(context: VulkanContext, info) -> int:
    function = nv_ffi.device_function(vk, context.device.handle, "vkConvertCooperativeVectorMatrixNV")
    check(vk, function(_device(context), info), "vkConvertCooperativeVectorMatrixNV")
    return info.pDstSize[0]


def converted_size(context: VulkanContext, src_format: MatrixFormat, dst_format: MatrixFormat) -> int:
    """Bytes a matrix takes once converted to `dst_format` (the driver's answer for optimal layouts)."""
    _require(context)
    size = ffi.new("size_t*")
    return _convert(context, _info(src_format, dst_format, 0, size))


def convert_on_host(context: VulkanContext, data, src_format: MatrixFormat, dst_format: MatrixFormat) -> bytes:
    """`data` (bytes or a contiguous array in `src_format`) converted on the host to `dst_format`."""
    _require(context)
    source = as_bytes(data)
    size = ffi.new("size_t*")
    needed = _convert(context, _info(src_format, dst_format, 0, size))
    out = ffi.new("uint8_t[]", max(needed, 1))
    info = _info(src_format, dst_format, source.size, size)
    source_pointer = ffi.from_buffer(source)
    info.srcData.hostAddress = source_pointer
    info.dstData.hostAddress = out
    written = _convert(context, info)
    return ffi.buffer(out, written)[:]


def record_conversions(context: VulkanContext, command_buffer, conversions: Sequence[MatrixConversion]) -> None:
    """Record vkCmdConvertCooperativeVectorMatrixNV for `conversions` (buffers made with device_address=True).

    Ordering is the caller's: `VulkanContext.submit(lambda cmd: record_conversions(context, cmd, ...))` orders the
    conversions after earlier work and makes their results visible to everything after.
    """
    _require(context)
    if not conversions:
        return
    infos = ffi.new("VkConvertCooperativeVectorMatrixInfoNV[]", len(conversions))
    sizes = ffi.new("size_t[]", [c.dst_size for c in conversions])
    for i, c in enumerate(conversions):
        for buffer, offset, size in ((c.src, c.src_offset, c.src_size), (c.dst, c.dst_offset, c.dst_size)):
            if buffer.device_address is None:
                raise ValueError("device-side conversion needs buffers created with device_address=True")
            if offset < 0 or offset + size > buffer.size:
                raise ValueError(f"byte range [{offset}, {offset + size}) is outside a buffer of {buffer.size} bytes")
        info = _info(c.src_format, c.dst_format, c.src_size, sizes + i)
        info.srcData.deviceAddress = c.src.device_address + c.src_offset
        info.dstData.deviceAddress = c.dst.device_address + c.dst_offset
        infos[i] = info[0]
    function = nv_ffi.device_function(vk, context.device.handle, "vkCmdConvertCooperativeVectorMatrixNV")
    function(ffi.cast("VkCommandBuffer", nv_ffi.address(vk.ffi, command_buffer)), len(conversions), infos)


def repack(context: VulkanContext, source: Buffer, source_entries: Mapping[str, Entry], destination: Buffer,
           destination_entries: Mapping[str, Entry]) -> Callable[[object], None]:
    """A recording that rewrites every entry of `destination` from the same-named entry of `source`: matrices
    (row-major in `source`) converted to the destination's layout and weight format, vectors (of one format in both)
    copied. Both buffers need device addresses; ordering is the caller's, as for `record_conversions`."""
    conversions, copies = [], []
    for name, entry in destination_entries.items():
        origin = source_entries[name]
        if entry.layout == "vector":
            copies.append(vk.VkBufferCopy(srcOffset=origin.offset, dstOffset=entry.offset, size=entry.size))
            continue
        rows, columns = entry.shape
        conversions.append(MatrixConversion(
            source, origin.offset, origin.size,
            matrix_format(weight_format(origin.dtype), rows, columns, origin.layout, origin.stride),
            destination, entry.offset, entry.size,
            matrix_format(weight_format(entry.dtype), rows, columns, entry.layout, entry.stride)))

    def record(command_buffer) -> None:
        record_conversions(context, command_buffer, conversions)
        if copies:
            vk.vkCmdCopyBuffer(command_buffer, source.handle, destination.handle, len(copies), copies)

    return record
