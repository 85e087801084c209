"""The Vulkan part of `coopnn info`: every device, what it offers for cooperative vectors and matrices, and whether
its driver reports kernel statistics."""

from __future__ import annotations

from typing import Callable

from coopnn.errors import BackendUnavailableError


def _coopvec_lines(info) -> list[str]:
    cv = info.cooperative_vector
    if cv is None or not cv.cooperative_vector:
        return ["    cooperative vectors: no (VK_NV_cooperative_vector absent)"]
    lines = [f"    cooperative vectors: yes, training {'yes' if cv.training else 'no'}, "
             f"max components {cv.max_components}, f16 accumulation "
             f"{'yes' if cv.training_float16_accumulation else 'no'}, f32 accumulation "
             f"{'yes' if cv.training_float32_accumulation else 'no'}"]
    for c in cv.combinations:
        names = [t.name for t in (c.input_type, c.input_interpretation, c.matrix_interpretation,
                                  c.bias_interpretation, c.result_type)]
        lines.append("      input {} as {}, matrix {}, bias {}, result {}".format(*names)
                     + (", transpose" if c.transpose else ""))
    return lines


def _coopmat_lines(info) -> list[str]:
    lines = []
    cm = info.cooperative_matrix
    if cm is not None and cm.cooperative_matrix:
        shapes = sorted({f"{s.m}x{s.n}x{s.k} {s.a_type.name}->{s.result_type.name}" for s in cm.shapes})
        lines.append(f"    cooperative matrix (KHR): {len(cm.shapes)} shapes: {', '.join(shapes[:6])}"
                     + (" ..." if len(shapes) > 6 else ""))
    else:
        lines.append("    cooperative matrix (KHR): no")
    cm2 = info.cooperative_matrix2
    if cm2 is not None:
        on = [name for name, enabled in cm2.features.items() if enabled]
        lines.append(f"    cooperative matrix 2 (NV): {', '.join(on) if on else 'no features'}")
    else:
        lines.append("    cooperative matrix 2 (NV): no")
    return lines


def device_report(targets: Callable[[object], list[str]] | None = None) -> str:
    """Several lines describing the Vulkan devices, or one line saying why there are none; with `targets`, a line
    naming the shader targets each device (`DeviceInfo`) can take, as `targets(info)` gives them."""
    try:
        from coopnn.runtime.vk.shared import vulkan_devices

        devices = vulkan_devices()
    except BackendUnavailableError as e:
        return f"vulkan: unavailable: {e}"
    if not devices:
        return "vulkan: no devices"
    from coopnn.runtime.vk.pipeline_statistics import EXTENSION, FEATURE

    lines = ["vulkan devices:"]
    for info in devices:
        lines.append("  " + info.describe())
        lines += _coopvec_lines(info) + _coopmat_lines(info)
        reports = "yes (`coopnn kernels`)" if info.features.get(FEATURE) else f"no ({EXTENSION} absent)"
        lines.append(f"    kernel statistics: {reports}")
        if targets is not None:
            lines.append(f"    targets: {', '.join(targets(info)) or 'none'}")
    return "\n".join(lines)
