"""Training on the portable target: plain SPIR-V on any Vulkan 1.3 device, float32 throughout.

The step kernel reads its weights straight from the flat float32 working copy the optimizer writes (the fixed
constants of the input stage follow the parameters in the same buffer), and the weight-gradient kernel sums each
parameter's products over the batch in sample order: no atomics, so a step is deterministic.
"""

from __future__ import annotations

import numpy as np

from coopnn.layouts.pack import Entry, PackedWeights, align_up
from coopnn.shaders.targets import target
from coopnn.shaders.training.gradients import tape_gradient_shader
from coopnn.train.gpu.session import KernelTrainingSession

VECTOR_ALIGNMENT = 16


def flat_manifest(program, layout) -> PackedWeights:
    """The program's constants in one float32 buffer: the trainable parameters at their flat offsets, the fixed
    constants after them."""
    entries, data = {}, [np.zeros(layout.size, np.float32)]
    trainable = set()
    for layer in layout.layers:
        entries[layer.weight] = Entry(layer.weight, layer.weight_offset * 4, layer.weight_size * 4,
                                      (layer.rows, layer.cols), "row_major", "fp32", layer.cols * 4)
        entries[layer.bias] = Entry(layer.bias, layer.bias_offset * 4, layer.rows * 4, (layer.rows,), "vector", "fp32")
        trainable |= {layer.weight, layer.bias}
    offset = layout.size * 4
    for name, array in program.constants.items():
        if name in trainable:
            continue
        start = align_up(offset, VECTOR_ALIGNMENT)
        data.append(np.zeros((start - offset) // 4, np.float32))
        flat = np.asarray(array, np.float32).reshape(-1)
        layout_name = "row_major" if array.ndim == 2 else "vector"
        stride = array.shape[1] * 4 if array.ndim == 2 else 0
        entries[name] = Entry(name, start, flat.size * 4, tuple(array.shape), layout_name, "fp32", stride)
        data.append(flat)
        offset = start + flat.size * 4
    return PackedWeights(np.concatenate(data).tobytes(), entries)


class PortableTrainingSession(KernelTrainingSession):
    def compile_step(self):
        self.manifest = flat_manifest(self.program, self.layout)
        return target("portable").compile(self.program, "fp32", 64, packed=self.manifest)

    def setup_weights(self) -> None:
        from coopnn.runtime.vk.memory import HostAccess

        if not hasattr(self, "weights"):
            self.weights = self.context.create_buffer(len(self.manifest.data), HostAccess.NONE)
            self.weights.upload(np.frombuffer(self.manifest.data, np.uint8))
        self.weights.upload(self.master.download(np.float32, self.layout.size))

    def make_gradient_shaders(self):
        return [tape_gradient_shader(self.layout, self.tape)]

    def weights_buffer(self):
        return self.weights

    def gradient_steps(self, batch: int, count: int) -> list:
        from coopnn.runtime.vk.commands import Dispatch

        push = self.gradient_shaders[0].pack_push(count=self.layout.size, batch=batch, capacity=self.capacity)
        tape = self.io[self._binding("tape")]
        return [Dispatch(self.gradient_kernels[0], (tape, self.gradient, self.status), push,
                         self.groups(self.layout.size))]


class PortableTrainingBackend:
    name = "portable"

    def prepare(self, graph, loss, optimizer, *, device) -> PortableTrainingSession:
        return PortableTrainingSession(graph, loss, optimizer, device)
