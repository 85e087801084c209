"""What the cooperative-matrix tile backends (coopmat2, coopmat) share: the record's behaviour around a target that
compiles a chain of layers (`coopnn.shaders.targets.tile_plan`), and the reading of a device's matrix shapes.

Both take float16 weights (coopmat2 the block formats q8_0 and q4_0 as well) and run inference only.
`backend="auto"` ranks them below coopvec and above portable (by `priority`), so it takes them only where coopvec
cannot run the request (a device without cooperative vectors, block-format weights): coopvec ran the benchmark MLPs
faster than both, and both faster than portable, at every batch measured
(`bench/results/nvidia-h100-80gb-hbm3-2026-11-25-tile-targets.md`, `...-2026-11-25-coopmat-column-owner.md`).
coopmat2 ranks above coopmat because with tiles of 128 samples it was the faster of the two on all three MLPs at large
batches (`bench/results/nvidia-h100-80gb-hbm3-2026-11-27-coopmat2-tiles.md`). On a CPU Vulkan device auto takes
neither, as numpy is what runs fastest there and nothing measured the tile kernels on such devices.
A subclass says what the device needs (`device_needs`), what a weight format needs of it (`format_needs`), what the
program needs of it (`program_needs`), and how its target packs the weights and compiles for it (`pack_for`,
`compile_for`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterable

from coopnn.backends.base import Examined
from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.graph.ir import Graph
from coopnn.layouts.formats.format import WeightFormat
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.layouts.pack import WeightImage
from coopnn.runtime.executable import KernelExecutable, chosen_device, device_unavailable_reason
from coopnn.shaders.kernel.lower import lower
from coopnn.shaders.kernel.program import KernelProgram
from coopnn.shaders.targets.base import Binary
from coopnn.shaders.targets.tile_plan import TilePlan, plan_tiles

COMPUTE_STAGE_BIT = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
# A, B, C and result component types: the products (float32 accumulators), and the float16 accumulators the kernels
# declare too (bias tiles, results rounded to float16), whose types must match a listed matrix as well
FLOAT16_PRODUCT = ("FLOAT16", "FLOAT16", "FLOAT32", "FLOAT32")
FLOAT16_ACCUMULATION = ("FLOAT16", "FLOAT16", "FLOAT16", "FLOAT16")


def float16_shapes(shapes: Iterable, scope: str, types: tuple[str, ...] = FLOAT16_PRODUCT) -> list:
    """The shapes (`CooperativeMatrixShape`) of float16 products with `types` at `scope` ("SUBGROUP",
    "WORKGROUP")."""
    return [s for s in shapes if s.scope.name == scope and not s.saturating_accumulation
            and tuple(t.name for t in (s.a_type, s.b_type, s.c_type, s.result_type)) == types]


def with_float16_accumulators(candidates: list, shapes: Iterable, scope: str) -> list:
    """The `candidates` for which a shape of float16 accumulation with the same M, N and invocations is listed."""
    listed = {(s.m, s.n, s.workgroup_invocations) for s in float16_shapes(shapes, scope, FLOAT16_ACCUMULATION)}
    return [c for c in candidates if (c.m, c.n, c.workgroup_invocations) in listed]


def missing_features(info, features: Iterable[str]) -> str | None:
    missing = sorted(f for f in features if not info.features.get(f))
    return f"{info.name} lacks the features {', '.join(missing)}" if missing else None


class TileBackend(ABC):
    """The shared half of a tile backend's record (`coopnn.backends.base.Backend`)."""

    name: str
    target: Any
    formats = (FP16,)  # float16 operands of the float16 x float16 + float32 products every vendor lists
    trains = False
    training_options: dict[str, tuple[str, ...]] = {}

    @abstractmethod
    def device_needs(self, info) -> str | None:
        """None when the device can run the target's kernels; otherwise what it lacks."""

    def format_needs(self, info, weights: WeightFormat) -> str | None:
        """None when the device can read weights in format `weights` (one of `formats`); otherwise what it lacks."""
        return None

    @abstractmethod
    def program_needs(self, info, plan: TilePlan) -> str | None:
        """None when the device can run this program's kernel; otherwise why not."""

    @abstractmethod
    def pack_for(self, info, program: KernelProgram, weights: WeightFormat) -> WeightImage:
        """The weight buffer of `program` for the shapes the device lists."""

    @abstractmethod
    def compile_for(self, info, program: KernelProgram, weights: WeightFormat, packed: WeightImage) -> Binary:
        """The target's binary for `program`, reading `packed`, in the shapes the device lists."""

    def unavailable_reason(self) -> str | None:
        return device_unavailable_reason(None, self.device_needs)

    def examine(self, graph: Graph, weights: WeightFormat, device) -> Examined:
        why = device_unavailable_reason(device,
                                        lambda info: self.device_needs(info) or self.format_needs(info, weights))
        if why:
            return Examined(why)
        try:
            program = lower(graph)
            plan = plan_tiles(program, self.name)
        except CompileError as e:
            return Examined(str(e))
        return Examined(self.program_needs(chosen_device(device), plan), program)

    def auto_skip_reason(self, device, lowered: KernelProgram, weights: WeightFormat) -> str | None:
        return device_unavailable_reason(device, lambda info: (
            f"{info.name} is a CPU Vulkan device, where auto runs numpy and nothing has measured {self.name} "
            f"(ask for backend={self.name!r})") if info.device_type == "cpu" else None)

    def prepare(self, graph: Graph, lowered: KernelProgram, *, weights: WeightFormat, device) -> KernelExecutable:
        info = chosen_device(device)
        binary = self.compile_for(info, lowered, weights, self.pack_for(info, lowered, weights))
        return KernelExecutable(binary, graph, device, lowered.sources)

    def refresh(self, executable: KernelExecutable, graph: Graph, *, weights: WeightFormat) -> bool:
        """Take the new constant values of `graph` (same structure) into the weight buffer, without compiling."""
        program = lower(graph)
        if not executable.replace_weights(self.pack_for(executable.context.info, program, weights)):
            return False
        executable.sources = dict(program.sources)
        return True

    def take_trained(self, executable: KernelExecutable, session) -> bool:
        return False  # no backend trains in this layout: the model takes trained weights through the host

    def prepare_training(self, graph: Graph, loss, optimizer, *, device, **options):
        raise BackendUnavailableError(f"the {self.name} backend runs inference only")
