"""What a device's driver made of coopnn's kernels (`Model.kernel_statistics`, `Trainer.kernel_statistics`,
`coopnn kernels`): each kernel's Binary compiled again with the driver asked to keep statistics
(VK_KHR_pipeline_executable_properties), and what it reports about it under its own names and descriptions
(registers per invocation, spilled bytes, workgroup memory, instruction counts: `vk.pipeline_statistics`).

The kernels are compiled on a context of their own, closed when done: the feature is enabled when a device is made,
and the contexts models share do not enable it. A device whose driver reports no statistics (the lavapipe the tests
run on, for one) gets a BackendUnavailableError that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk.pipeline_statistics import EXTENSION, FEATURE, ExecutableStatistics, read_statistics
from coopnn.shaders.targets.base import Binary


@dataclass(frozen=True)
class KernelStatistics:
    kernel: str
    workgroup_size: tuple[int, int, int]
    executables: tuple[ExecutableStatistics, ...]

    def values(self) -> dict[str, int | float | bool]:
        """Statistic name -> value over the kernel's executables (a compute pipeline has one; a later executable's
        statistic of the same name is prefixed with its executable's name)."""
        out: dict[str, int | float | bool] = {}
        for executable in self.executables:
            for statistic in executable.statistics:
                key = statistic.name if statistic.name not in out else f"{executable.name}: {statistic.name}"
                out[key] = statistic.value
        return out


def kernel_statistics(binaries: Mapping[str, Binary], device: str | int | None = None) -> list[KernelStatistics]:
    """The driver's statistics of each named Binary on `device` (as `coopnn.load` names devices)."""
    from coopnn.runtime.executable import load_kernel
    from coopnn.runtime.vk.context import VulkanContext, list_devices
    from coopnn.runtime.vk.selection import select_device

    info = select_device(list_devices(), device)
    if not info.features.get(FEATURE):
        raise BackendUnavailableError(f"{info.describe()} does not report kernel statistics: its driver lacks "
                                      f"{EXTENSION} (feature {FEATURE})")
    features = set().union(*(b.features for b in binaries.values())) | {FEATURE}
    extensions = set().union(*(b.extensions for b in binaries.values()))
    with VulkanContext(info.index, features=features, extensions=extensions) as context:
        out = []
        for name, binary in binaries.items():
            kernel = load_kernel(context, binary, name, capture_statistics=True)
            out.append(KernelStatistics(name, tuple(binary.workgroup_size),
                                        read_statistics(context.device, kernel.pipeline)))
        return out


def statistics_table(statistics: Sequence[KernelStatistics]) -> str:
    """A Markdown table: a row per kernel, a column per statistic (in the order the driver first lists them), and
    under it what each statistic is, in the driver's words."""
    columns: dict[str, str] = {}
    for kernel in statistics:
        for executable in kernel.executables:
            for statistic in executable.statistics:
                columns.setdefault(statistic.name, statistic.description)
    header = ["kernel", "workgroup", "subgroup", *columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for kernel in statistics:
        values = kernel.values()
        subgroups = ", ".join(str(e.subgroup_size) for e in kernel.executables)
        cells = [kernel.kernel, "x".join(map(str, kernel.workgroup_size)), subgroups,
                 *(_cell(values.get(name)) for name in columns)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [""] + [f"- {name}: {description}" for name, description in columns.items()]
    return "\n".join(lines) + "\n"


def _cell(value: int | float | bool | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
