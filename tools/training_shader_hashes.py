"""Print a SHA-256 of every training kernel's SPIR-V (step, weight gradients, optimizer, loss tiles), one line each
under a stable name, with no GPU: refactors of the training kernels diff this list before and after.

The sessions are built as `Trainer` builds them, on a recorded device (`FakeContext`: the limits, subgroup sizes and
memory the sessions size their kernels by; buffers and kernels that are never run) with the driver's converted sizes
of TrainingOptimal matrices replaced by a fixed rule, so the list depends only on the code. A combination the session
refuses is listed with its error type and a hash of its message, so refusals are checked too.

    PYTHONPATH=$PWD python3 tools/training_shader_hashes.py > hashes.txt     [--quick: one model, one subgroup size]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRADIENTS = ("auto", "coopmat", "coopvec", "fused", "outer_product", "outer_product_reduced")
STEPS = ("auto", "tiled", "coopvec")
TABLE_ATOMICS = ("float32", "float16_pairs")
GRID = {"otype": "HashGrid", "n_levels": 4, "n_features_per_level": 2, "log2_hashmap_size": 8, "base_resolution": 4,
        "per_level_scale": 2.0}
ZOO = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16", "siren_sdf", "legacy_gemm_mlp", "gelu_silu_mlp",
       "neural_material_freq", "legacy_encoding_activations")
SUBGROUPS = (32, 16)
WORKGROUP_MEMORY = 49152  # NVIDIA's maxComputeSharedMemorySize (shared/gpu/h200-capabilities.md)


@dataclass
class FakeBuffer:
    size: int
    handle: int = 0
    placement: object = None

    def upload(self, *_):
        pass

    def write(self, *_):
        pass

    def download(self, dtype, count):
        import numpy as np

        return np.zeros(count, dtype)

    def destroy(self):
        pass


@dataclass
class FakeKernel:
    workgroup_size: tuple

    def group_count_for(self, invocations: int) -> int:
        return -(-invocations // self.workgroup_size[0])


class FakeContext:
    """What a training session asks of its context before it runs a step, on a device of `subgroup` lanes that has
    every Vulkan feature coopnn knows but `missing`."""

    def __init__(self, subgroup: int, missing: frozenset[str] = frozenset()):
        from coopnn.runtime.vk.chain import FEATURE_OWNER

        limits = SimpleNamespace(max_compute_shared_memory_size=WORKGROUP_MEMORY, max_storage_buffer_range=2 ** 32 - 1,
                                 max_buffer_size=2 ** 40, max_compute_work_group_count=(2 ** 31 - 1, 65535, 65535),
                                 max_push_constants_size=256)
        memory = SimpleNamespace(heap_device_local=True, heap_size=140 << 30)
        name = f"recorded device (subgroups of {subgroup})"
        self.info = SimpleNamespace(name=name, limits=limits,
                                    subgroup=SimpleNamespace(size=subgroup, min_size=subgroup, max_size=subgroup),
                                    memory_types=(memory,), features={f: f not in missing for f in FEATURE_OWNER},
                                    extensions=frozenset(), describe=lambda: name)

    def create_buffer(self, size, *_, **__):
        return FakeBuffer(size)

    def create_kernel(self, spirv, binding_count, push_constant_size, workgroup_size, **_):
        return FakeKernel(workgroup_size)

    def run(self, *_, **__):
        return 0.0

    def close(self):
        pass


def converted_size(context, source, destination) -> int:
    """A fixed stand-in for the driver's size of a TrainingOptimal float16 matrix: row-major, in 64-byte blocks."""
    return -(-source.rows * source.columns * 2 // 64) * 64


def _install_fakes(subgroup: list[int]) -> None:
    """Sessions open `FakeContext`s of subgroup size `subgroup[0]` and size TrainingOptimal matrices by the rule."""
    from coopnn.backends.coopvec import driver
    from coopnn.runtime.vk import shared

    driver.converted_size = converted_size
    shared.open_context = lambda *_, **__: FakeContext(subgroup[0])
    shared.chosen_device = lambda *_: FakeContext(subgroup[0]).info


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _session_lines(name: str, make) -> list[str]:
    """`name/<kernel> <sha256>` for every kernel of the session `make()` builds, or its refusal."""
    try:
        session = make()
    except Exception as error:  # a crash is listed like a refusal, so a change in either shows in the diff
        return [f"{name} refused {type(error).__name__} {_digest(str(error).encode())}"]
    return [f"{name}/{kernel} {_digest(binary.spirv)}" for kernel, binary in sorted(session.binaries().items())]


def _coopvec(graph, loss: str, optimizer: str, gradients: str, step: str, **options: str):
    from coopnn.backends.coopvec.training import CoopvecTrainingSession
    from coopnn.train.losses import get_loss
    from coopnn.train.optim import get_optimizer

    return lambda: CoopvecTrainingSession(graph, get_loss(loss), get_optimizer(optimizer), None, gradients=gradients,
                                          step=step, **options)


def _portable(graph, loss: str, optimizer: str):
    from coopnn.backends.portable.training import PortableTrainingSession
    from coopnn.train.losses import get_loss
    from coopnn.train.optim import get_optimizer

    return lambda: PortableTrainingSession(graph, get_loss(loss), get_optimizer(optimizer), None)


def _zoo_graph(name: str):
    import coopnn

    return coopnn.load(ROOT / "models" / f"{name}.onnx", backend="numpy").graph


def _cases(quick: bool):
    """(name, session maker, subgroup size) for every case: each axis varied against fixed choices of the others."""
    from coopnn.graph.activations import ACTIVATIONS
    from coopnn.nets.builders import mlp_graph
    from coopnn.shaders.kernel.derivatives import DERIVATIVES
    from coopnn.train.gpu.loss_kernels import LOSS_KERNELS
    from coopnn.train.optim import get_optimizer

    subgroups = SUBGROUPS[:1] if quick else SUBGROUPS
    methods = [(g, s) for g in GRADIENTS for s in STEPS]
    for model in ZOO[:1] if quick else ZOO:
        graph = _zoo_graph(model)
        for subgroup in subgroups:
            for gradients, step in methods:
                yield (f"coopvec/{model}/sg{subgroup}/l2/adam/{gradients}/{step}",
                       _coopvec(graph, "l2", "adam", gradients, step), subgroup)
            yield f"portable/{model}/sg{subgroup}/l2/adam", _portable(graph, "l2", "adam"), subgroup
    activations = sorted(op.value for op in DERIVATIVES if op in ACTIVATIONS and not ACTIVATIONS[op].required)
    for activation in activations[:2] if quick else activations:
        for depth, hidden in (("shallow", [24, 40]), ("deep", [32, 48, 24])):
            graph = mlp_graph(3, hidden, 5, activation=activation, name=f"{activation}_{depth}")
            for gradients, step in methods:
                yield (f"coopvec/{activation}_{depth}/sg32/l2/adam/{gradients}/{step}",
                       _coopvec(graph, "l2", "adam", gradients, step), 32)
            yield f"portable/{activation}_{depth}/sg32/l2/adam", _portable(graph, "l2", "adam"), 32
    graph = mlp_graph(4, [64, 64], 3, activation="relu", encoding="frequency", octaves=3, name="frequency_mlp")
    optimizers = sorted(get_optimizer(name).name for name in ("adam", "sgd"))
    for loss in sorted(LOSS_KERNELS):
        for optimizer in optimizers:
            for gradients, step in methods:
                yield (f"coopvec/frequency_mlp/sg32/{loss}/{optimizer}/{gradients}/{step}",
                       _coopvec(graph, loss, optimizer, gradients, step), 32)
            yield f"portable/frequency_mlp/sg32/{loss}/{optimizer}", _portable(graph, loss, optimizer), 32
    graph = mlp_graph(2, [64, 64], 3, activation="relu", encoding=GRID, name="hash_grid_mlp")
    for atomics in TABLE_ATOMICS:
        for gradients, step in methods:
            yield (f"coopvec/hash_grid_mlp/sg32/l2/adam/{gradients}/{step}/{atomics}",
                   _coopvec(graph, "l2", "adam", gradients, step, table_atomics=atomics), 32)
    yield "portable/hash_grid_mlp/sg32/l2/adam", _portable(graph, "l2", "adam"), 32


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one zoo model, one subgroup size, two activations")
    args = parser.parse_args(argv)
    subgroup = [SUBGROUPS[0]]
    _install_fakes(subgroup)
    for name, make, size in _cases(args.quick):
        subgroup[0] = size
        for line in _session_lines(name, make):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
