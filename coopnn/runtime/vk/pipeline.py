"""`ComputeKernel`: one compute shader made ready to dispatch, built once and reused by every run.

A kernel owns its shader's pipeline, the descriptor set layout of its N storage buffers (bindings 0..N-1 of set 0),
the pipeline layout with one push-constant range, and a small pool of descriptor sets cached by the buffers bound, so
repeated runs on the same buffers allocate and update nothing. Specialization constants are optional (id → value).
"""

from __future__ import annotations

import struct
import weakref
from collections import OrderedDict
from typing import Mapping, Protocol, Sequence

import numpy as np

from coopnn.errors import CompileError
from coopnn.runtime.vk.commands import Dispatch, Recorded
from coopnn.runtime.vk.device import Device
from coopnn.runtime.vk.device_info import DeviceInfo
from coopnn.runtime.vk.loader import check, load_vulkan
from coopnn.runtime.vk.memory import Buffer
from coopnn.runtime.vk.pipeline_cache import PipelineCache, PipelineKey
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()
# Raw cffi for descriptor sets: pyvulkan's struct builders cost more than the calls (`write_storage_buffers`).
ffi, lib = vk.ffi, vk.lib

SPIRV_MAGIC = 0x07230203
DESCRIPTOR_SET_CAPACITY = 8
"""Distinct buffer bindings a kernel keeps descriptor sets for (and the most one submission may use)."""

SpecializationValue = int | float | bool | np.generic


def encode_specialization(constants: Mapping[int, SpecializationValue]) -> tuple[list[tuple[int, int, int]], bytes]:
    """Map entries (constant id, offset, size) and data: bools as VkBool32, Python ints as 32-bit, floats as float32,
    numpy scalars as their own type (e.g. np.float16 for a 16-bit constant)."""
    entries, data = [], b""
    for constant_id, value in sorted(constants.items()):
        if isinstance(value, np.generic):
            raw = value.tobytes()
        elif isinstance(value, bool):
            raw = struct.pack("<I", int(value))
        elif isinstance(value, int):
            raw = struct.pack("<i" if value < 0 else "<I", value)
        elif isinstance(value, float):
            raw = struct.pack("<f", value)
        else:
            raise TypeError(f"specialization constant {constant_id} has unsupported type {type(value).__name__}")
        entries.append((constant_id, len(data), len(raw)))
        data += raw
    return entries, data


class KernelOwner(Protocol):
    """What kernels are made through: a `VulkanContext` or a scope of one. Named here rather than imported, because
    the context is built on this module."""

    info: DeviceInfo
    device: Device
    tracker: ObjectTracker
    pipeline_cache: PipelineCache

    def run(self, steps: Sequence[Dispatch | Recorded],
            downloads: Mapping[Buffer, tuple[int, int]] | None = None) -> float | None:
        """Run `steps` in one submission (`commands.Dispatcher.run`); GPU ms of the dispatches, or None."""


class ComputeKernel:
    """A compute pipeline over `binding_count` storage buffers and `push_constant_size` bytes of push constants."""

    descriptor_set_capacity = DESCRIPTOR_SET_CAPACITY

    def __init__(self, context: KernelOwner, spirv: bytes, binding_count: int, push_constant_size: int = 0,
                 workgroup_size: tuple[int, int, int] = (64, 1, 1),
                 specialization: Mapping[int, SpecializationValue] | None = None, entry_point: str = "main",
                 name: str = "", capture_statistics: bool = False):
        """`capture_statistics`: make the pipeline with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR, so that
        `pipeline_statistics.read_statistics` can ask the driver about it (the device must have enabled the feature
        `pipeline_statistics.FEATURE`)."""
        self.context = context
        self.flags = vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if capture_statistics else 0
        self.name = name or f"kernel_{id(self):x}"
        self.binding_count = binding_count
        self.push_constant_size = push_constant_size
        self.workgroup_size = tuple(workgroup_size)
        _validate(context, spirv, binding_count, push_constant_size, self.workgroup_size)
        device = context.device.handle
        tracker = context.tracker
        tokens = []

        def track(kind: str, destroy) -> None:
            tokens.append(tracker.add(kind, destroy))

        try:
            bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                        descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                        for i in range(binding_count)]
            set_layout = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(
                pBindings=bindings), None)
            track("VkDescriptorSetLayout", lambda: vk.vkDestroyDescriptorSetLayout(device, set_layout, None))
            ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                             size=push_constant_size)] if push_constant_size else None
            self.layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
                pSetLayouts=[set_layout], pPushConstantRanges=ranges), None)
            layout = self.layout
            track("VkPipelineLayout", lambda: vk.vkDestroyPipelineLayout(device, layout, None))
            self.pipeline = self._create_pipeline(spirv, specialization or {}, entry_point)
            pipeline = self.pipeline
            track("VkPipeline", lambda: vk.vkDestroyPipeline(device, pipeline, None))
            pool = vk.vkCreateDescriptorPool(device, vk.VkDescriptorPoolCreateInfo(
                maxSets=DESCRIPTOR_SET_CAPACITY,
                pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    descriptorCount=DESCRIPTOR_SET_CAPACITY * binding_count)]), None)
            track("VkDescriptorPool", lambda: vk.vkDestroyDescriptorPool(device, pool, None))
        except BaseException:
            tracker.release_many(reversed(tokens))
            raise
        self._set_layout = set_layout
        self._pool = pool
        self._sets: OrderedDict[tuple, object] = OrderedDict()
        self._tokens = list(reversed(tokens))
        self._release = weakref.finalize(self, tracker.release_many, self._tokens)

    def _create_pipeline(self, spirv: bytes, specialization: Mapping[int, SpecializationValue], entry_point: str):
        try:
            return self._build_pipeline(spirv, specialization, entry_point)
        except vk.VkError as exc:
            raise CompileError(f"{self.context.info.name} rejected the compute pipeline of {self.name} "
                               f"({type(exc).__name__}); validate its SPIR-V with spirv-val") from exc

    def _build_pipeline(self, spirv: bytes, specialization: Mapping[int, SpecializationValue], entry_point: str):
        device = self.context.device.handle
        entries, data = encode_specialization(specialization)
        module = vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv), None)
        token = self.context.tracker.add("VkShaderModule", lambda: vk.vkDestroyShaderModule(device, module, None))
        try:
            specialization_info = vk.VkSpecializationInfo(
                pMapEntries=[vk.VkSpecializationMapEntry(constantID=i, offset=o, size=s) for i, o, s in entries],
                dataSize=len(data), pData=vk.ffi.from_buffer(data)) if entries else None
            stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module,
                                                       pName=entry_point, pSpecializationInfo=specialization_info)
            create_info = vk.VkComputePipelineCreateInfo(flags=self.flags, stage=stage, layout=self.layout)
            if self.flags & vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR:
                # Statistics describe a compilation: NVIDIA's driver answers a pipeline seeded from a cache blob
                # with subgroup size 0, so these pipelines are always compiled afresh.
                return vk.vkCreateComputePipelines(device, None, 1, [create_info], None)[0]
            key = PipelineKey(bytes(spirv), entry_point,
                              b"".join(struct.pack("<III", *entry) for entry in entries) + data,
                              self.binding_count, self.push_constant_size)
            return self.context.pipeline_cache.create_pipeline(self.context.tracker, device, key, create_info)
        finally:
            # The pipeline keeps what it needs; the module can go as soon as it is built.
            self.context.tracker.release(token)

    def descriptor_set(self, buffers: Sequence[Buffer]):
        """The descriptor set binding `buffers` to 0..N-1 (as a one-element VkDescriptorSet array, ready for
        vkCmdBindDescriptorSets), reused when the same buffers were bound before."""
        if len(buffers) != self.binding_count:
            raise ValueError(f"{self.name} takes {self.binding_count} buffers, got {len(buffers)}")
        key = tuple(b.serial for b in buffers)
        if key in self._sets:
            self._sets.move_to_end(key)
            return self._sets[key]
        limit = self.context.info.limits.max_storage_buffer_range
        for binding, buffer in enumerate(buffers):
            if buffer.size > limit:
                raise ValueError(f"{self.name}: buffer at binding {binding} has {buffer.size} bytes, over this "
                                 f"device's maxStorageBufferRange of {limit}; split the batch")
        if len(self._sets) < DESCRIPTOR_SET_CAPACITY:
            descriptor_set = vk.vkAllocateDescriptorSets(self.context.device.handle, vk.VkDescriptorSetAllocateInfo(
                descriptorPool=self._pool, pSetLayouts=[self._set_layout]))
        else:
            _, descriptor_set = self._sets.popitem(last=False)
        write_storage_buffers(self.context.device.handle, descriptor_set[0], buffers)
        self._sets[key] = descriptor_set
        return descriptor_set

    def dedicated_descriptor_set(self, buffers: Sequence[Buffer]) -> DedicatedDescriptorSet:
        """A descriptor set binding `buffers`, owned by the caller alone (from a pool of its own), for lanes that run
        this kernel from several threads at once; the shared cache of `descriptor_set` is for one thread."""
        return DedicatedDescriptorSet(self, buffers)

    def group_count_for(self, invocations: int) -> int:
        """Workgroups along x covering `invocations` (the shader bounds-checks the tail)."""
        return -(-invocations // self.workgroup_size[0])

    def run(self, buffers: Sequence[Buffer], push_constants=b"", group_count: int | tuple[int, int, int] = 1,
            downloads=None) -> float | None:
        """Upload pending writes, dispatch once, download readable buffers; the GPU time in ms (None without
        timestamp support)."""
        return self.context.run([Dispatch(self, tuple(buffers), push_constants, group_count)], downloads=downloads)

    def destroy(self) -> None:
        self._release()

    @property
    def alive(self) -> bool:
        return self._release.alive and all(self.context.tracker.alive(t) for t in self._tokens)


def _validate(context: KernelOwner, spirv: bytes, binding_count: int, push_constant_size: int,
              workgroup_size: tuple[int, ...]) -> None:
    limits = context.info.limits
    if len(spirv) % 4 or len(spirv) < 20 or struct.unpack_from("<I", spirv)[0] != SPIRV_MAGIC:
        raise ValueError("spirv must be a little-endian SPIR-V module (bytes, a multiple of 4, starting 0x07230203)")
    if binding_count < 1:
        raise ValueError(f"a kernel needs at least one storage buffer, got binding_count={binding_count}")
    if push_constant_size % 4 or not 0 <= push_constant_size <= limits.max_push_constants_size:
        raise ValueError(f"push_constant_size {push_constant_size} must be a multiple of 4 within "
                         f"maxPushConstantsSize={limits.max_push_constants_size}")
    sizes_fit = all(1 <= s <= m for s, m in zip(workgroup_size, limits.max_compute_work_group_size))
    if (len(workgroup_size) != 3 or not sizes_fit
            or int(np.prod(workgroup_size)) > limits.max_compute_work_group_invocations):
        raise ValueError(f"workgroup size {workgroup_size} exceeds maxComputeWorkGroupSize="
                         f"{limits.max_compute_work_group_size} / maxComputeWorkGroupInvocations="
                         f"{limits.max_compute_work_group_invocations}")


def write_storage_buffers(device, descriptor_set, buffers: Sequence[Buffer]) -> None:
    """Point bindings 0..N-1 of `descriptor_set` at the whole of `buffers`. The structs are filled through cffi
    directly, as pyvulkan's struct builders were most of what making a recorded step's descriptor sets cost."""
    infos = ffi.new("VkDescriptorBufferInfo[]", [(buffer.handle, 0, buffer.size) for buffer in buffers])
    writes = ffi.new("VkWriteDescriptorSet[]", len(buffers))
    for binding, write in enumerate(writes):
        write.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
        write.dstSet = descriptor_set
        write.dstBinding = binding
        write.descriptorCount = 1
        write.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
        write.pBufferInfo = infos + binding
    lib.vkUpdateDescriptorSets(device, len(buffers), writes, 0, ffi.NULL)


class DedicatedDescriptorSet:
    """One descriptor set from a pool of its own; `handle` is the one-element array vkCmdBindDescriptorSets takes."""

    def __init__(self, kernel: ComputeKernel, buffers: Sequence[Buffer]):
        if len(buffers) != kernel.binding_count:
            raise ValueError(f"{kernel.name} takes {kernel.binding_count} buffers, got {len(buffers)}")
        context = kernel.context
        device = context.device.handle
        sizes = ffi.new("VkDescriptorPoolSize*", (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kernel.binding_count))
        created = ffi.new("VkDescriptorPool*")
        check(vk, lib.vkCreateDescriptorPool(device, ffi.new("VkDescriptorPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, "maxSets": 1, "poolSizeCount": 1,
            "pPoolSizes": sizes}), ffi.NULL, created), "vkCreateDescriptorPool")
        pool = created[0]
        token = context.tracker.add("VkDescriptorPool", lambda: lib.vkDestroyDescriptorPool(device, pool, ffi.NULL))
        try:
            layouts = ffi.new("VkDescriptorSetLayout[1]", [kernel._set_layout])
            self.handle = ffi.new("VkDescriptorSet[1]")
            check(vk, lib.vkAllocateDescriptorSets(device, ffi.new("VkDescriptorSetAllocateInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, "descriptorPool": pool,
                "descriptorSetCount": 1, "pSetLayouts": layouts}), self.handle), "vkAllocateDescriptorSets")
            write_storage_buffers(device, self.handle[0], buffers)
        except BaseException:
            context.tracker.release(token)
            raise
        self._release = weakref.finalize(self, context.tracker.release, token)

    def destroy(self) -> None:
        self._release()
