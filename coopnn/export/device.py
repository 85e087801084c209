"""The weights of an export on a Vulkan device from Python: what `coopnn_weights.h` does for a C engine. The file is
checked against its manifest, then either uploaded as it is (the portable variant reads the row-major file) or laid
out anew with each matrix converted to InferencingOptimal by the device's driver (vkConvertCooperativeVectorMatrixNV,
on the host) and the biases and tables copied; the converted offsets are the values of the shader's specialization
constants.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from coopnn.backends.coopvec.driver import MatrixFormat, convert_on_host
from coopnn.errors import InputError
from coopnn.export.manifest import MANIFEST_VERSION
from coopnn.export.weights import check_file
from coopnn.layouts.pack import MATRIX_ALIGNMENT, VECTOR_ALIGNMENT, align_up
from coopnn.runtime.vk.memory import Buffer, HostAccess
from coopnn.runtime.vk.nv_ffi import ComponentType, MatrixLayout

VARIANTS = ("coopvec", "portable")
COMPONENTS = {"float16": ComponentType.FLOAT16, "float32": ComponentType.FLOAT32}


@dataclass(frozen=True)
class ExportFiles:
    """An export's manifest (parsed) and weights (bytes), checked against each other."""

    manifest: Mapping
    data: bytes


def read_export(manifest_path: str | os.PathLike) -> ExportFiles:
    """The manifest at `manifest_path` and the weights file it names beside it; InputError when either is not what
    an export wrote or they do not match."""
    path = Path(manifest_path)
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} is not a readable export manifest: {e}") from None
    if not isinstance(document, dict) or document.get("coopnn_shader_export") != MANIFEST_VERSION:
        raise InputError(f"{path} is not a version-{MANIFEST_VERSION} coopnn shader export manifest")
    try:
        weights = path.parent / document["weights"]["file"]
        _check_regions(document, document["weights"]["size"])
    except (KeyError, TypeError) as e:
        raise InputError(f"{path} lacks {e} or holds it in another form; write it again with coopnn export-shader") \
            from None
    try:
        data = weights.read_bytes()
    except OSError as e:
        raise InputError(f"{weights}: {e.strerror}") from None
    check_file(data, document, str(weights))
    return ExportFiles(document, data)


def _check_regions(document: Mapping, size: int) -> None:
    """InputError for a manifest entry reaching outside the weights file (KeyError for a missing key)."""
    regions = [(f"layer {l['name']!r}", part) for l in document["layers"] for part in (l["matrix"], l["bias"])]
    regions += [(f"the table of {t['node']!r}", t) for t in document["tables"]]
    for what, part in regions:
        if not 0 <= part["offset"] <= part["offset"] + part["size"] <= size:
            raise InputError(f"{what}: bytes [{part['offset']}, {part['offset'] + part['size']}) lie outside the "
                             f"{size}-byte weights file")


@dataclass(frozen=True)
class DeviceWeights:
    """The weights buffer a variant binds, and the specialization constants (id -> byte offset) its shader takes."""

    buffer: Buffer
    specialization: Mapping[int, int]


def optimal_image(context, files: ExportFiles) -> tuple[bytes, dict[int, int]]:
    """The cooperative-vector variant's buffer contents and its offsets by specialization constant index."""
    out, offsets, end = bytearray(), {}, 0
    for layer in files.manifest["layers"]:
        m, b = layer["matrix"], layer["bias"]
        component = COMPONENTS[m["component_type"]]
        source = MatrixFormat(m["rows"], m["columns"], component, MatrixLayout.ROW_MAJOR, m["stride"])
        target = MatrixFormat(m["rows"], m["columns"], component, MatrixLayout.INFERENCING_OPTIMAL)
        matrix_at = align_up(end, MATRIX_ALIGNMENT)
        converted = convert_on_host(context, files.data[m["offset"]:m["offset"] + m["size"]], source, target)
        bias_at = align_up(matrix_at + len(converted), VECTOR_ALIGNMENT)
        end = bias_at + b["size"]
        out.extend(bytes(end - len(out)))
        out[matrix_at:matrix_at + len(converted)] = converted
        out[bias_at:end] = files.data[b["offset"]:b["offset"] + b["size"]]
        offsets[m["spec_constant"]], offsets[b["spec_constant"]] = matrix_at, bias_at
    for table in files.manifest["tables"]:
        at = align_up(end, VECTOR_ALIGNMENT)
        end = at + table["size"]
        out.extend(bytes(end - len(out)))
        out[at:end] = files.data[table["offset"]:table["offset"] + table["size"]]
        offsets[table["spec_constant"]] = at
    return bytes(out), offsets


def upload_weights(context, manifest_path: str | os.PathLike, *, variant: str = "coopvec",
                   spec_id: int = 0) -> DeviceWeights:
    """The export's weights in a device-local buffer of `context` (a VulkanContext or a scope of one) for `variant`;
    `spec_id` is the value the shader's NAME_SPEC_ID has. The coopvec variant needs a context with the
    cooperativeVector feature (BackendUnavailableError naming the device otherwise)."""
    if variant not in VARIANTS:
        raise InputError(f"variant={variant!r}: an export has the variants {', '.join(VARIANTS)}")
    files = read_export(manifest_path)
    if variant == "portable":
        data, offsets = files.data, {}
    else:
        if files.manifest["weights"]["format"] != "fp16":
            raise InputError(f"{manifest_path}: weights={files.manifest['weights']['format']!r} have no "
                             f"cooperative-vector variant (it reads fp16); use variant='portable'")
        data, offsets = optimal_image(context, files)
    buffer = context.create_buffer(len(data), host_access=HostAccess.NONE)
    buffer.write(data)
    return DeviceWeights(buffer, {spec_id + index: offset for index, offset in offsets.items()})
