"""One full-screen draw into an offscreen image, read back: what proves a shader written for an engine's graphics
pipeline (a fragment shader evaluating an exported network per pixel) on the device coopnn runs on.

`draw_fullscreen` makes a float32 RGBA colour image, a render pass that clears it and leaves it ready for a transfer,
a pipeline of the given vertex and fragment shaders (no vertex input: the vertex shader makes its triangle from
gl_VertexIndex) over storage buffers at bindings 0..N-1 of set 0, draws three vertices, copies the image into a
readable buffer, and destroys everything it made. Vulkan errors arrive as coopnn errors (through the loader's typed
module); a pipeline the driver refuses is a CompileError.
"""

from __future__ import annotations

import contextlib
from typing import Mapping, Sequence

import numpy as np

from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.runtime.vk.loader import load_vulkan
from coopnn.runtime.vk.memory import DEVICE_PREFERENCES, Buffer, HostAccess, _memory_type
from coopnn.runtime.vk.pipeline import SpecializationValue, encode_specialization, write_storage_buffers

vk = load_vulkan()

COLOR_FORMAT = vk.VK_FORMAT_R32G32B32A32_SFLOAT
PIXEL_BYTES = 16


class _Owned:
    """Vulkan objects made for one draw, destroyed in reverse order of making."""

    def __init__(self, context):
        self.context = context
        self.device = context.device.handle
        self._tokens: list[int] = []

    def add(self, kind: str, destroy) -> None:
        self._tokens.append(self.context.tracker.add(kind, destroy))

    def close(self) -> None:
        self.context.tracker.release_many(reversed(self._tokens))


def _require_graphics(context) -> None:
    families = vk.vkGetPhysicalDeviceQueueFamilyProperties(context.device.physical_device)
    if not families[context.device.queue_family].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT:
        raise BackendUnavailableError(f"{context.info.describe()}: the queue coopnn uses cannot draw (no graphics "
                                      f"bit on queue family {context.device.queue_family})")


def _color_image(owned: _Owned, width: int, height: int):
    device = owned.device
    image = vk.vkCreateImage(device, vk.VkImageCreateInfo(
        imageType=vk.VK_IMAGE_TYPE_2D, format=COLOR_FORMAT, extent=vk.VkExtent3D(width, height, 1), mipLevels=1,
        arrayLayers=1, samples=vk.VK_SAMPLE_COUNT_1_BIT, tiling=vk.VK_IMAGE_TILING_OPTIMAL,
        usage=vk.VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | vk.VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
        sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED), None)
    owned.add("VkImage", lambda: vk.vkDestroyImage(device, image, None))
    requirements = vk.vkGetImageMemoryRequirements(device, image)
    memory_type = _memory_type(owned.context.info, requirements.memoryTypeBits, DEVICE_PREFERENCES)
    memory = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
        allocationSize=requirements.size, memoryTypeIndex=memory_type.index), None)
    owned.add("VkDeviceMemory", lambda: vk.vkFreeMemory(device, memory, None))
    vk.vkBindImageMemory(device, image, memory, 0)
    view = vk.vkCreateImageView(device, vk.VkImageViewCreateInfo(
        image=image, viewType=vk.VK_IMAGE_VIEW_TYPE_2D, format=COLOR_FORMAT,
        subresourceRange=vk.VkImageSubresourceRange(aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, baseMipLevel=0,
                                                    levelCount=1, baseArrayLayer=0, layerCount=1)), None)
    owned.add("VkImageView", lambda: vk.vkDestroyImageView(device, view, None))
    return image, view


def _render_pass(owned: _Owned):
    device = owned.device
    attachment = vk.VkAttachmentDescription(
        format=COLOR_FORMAT, samples=vk.VK_SAMPLE_COUNT_1_BIT, loadOp=vk.VK_ATTACHMENT_LOAD_OP_CLEAR,
        storeOp=vk.VK_ATTACHMENT_STORE_OP_STORE, stencilLoadOp=vk.VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        stencilStoreOp=vk.VK_ATTACHMENT_STORE_OP_DONT_CARE, initialLayout=vk.VK_IMAGE_LAYOUT_UNDEFINED,
        finalLayout=vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL)
    reference = vk.VkAttachmentReference(attachment=0, layout=vk.VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL)
    subpass = vk.VkSubpassDescription(pipelineBindPoint=vk.VK_PIPELINE_BIND_POINT_GRAPHICS,
                                      pColorAttachments=[reference])
    output = vk.VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT
    # Into the pass: the clear waits for the layout transition; out of it: the copy waits for the colour writes.
    dependencies = [
        vk.VkSubpassDependency(srcSubpass=vk.VK_SUBPASS_EXTERNAL, dstSubpass=0, srcStageMask=output,
                               dstStageMask=output, srcAccessMask=0,
                               dstAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT),
        vk.VkSubpassDependency(srcSubpass=0, dstSubpass=vk.VK_SUBPASS_EXTERNAL, srcStageMask=output,
                               dstStageMask=vk.VK_PIPELINE_STAGE_TRANSFER_BIT,
                               srcAccessMask=vk.VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                               dstAccessMask=vk.VK_ACCESS_TRANSFER_READ_BIT)]
    render_pass = vk.vkCreateRenderPass(device, vk.VkRenderPassCreateInfo(
        pAttachments=[attachment], pSubpasses=[subpass], pDependencies=dependencies), None)
    owned.add("VkRenderPass", lambda: vk.vkDestroyRenderPass(device, render_pass, None))
    return render_pass


def _layouts(owned: _Owned, binding_count: int, push_constant_size: int):
    device = owned.device
    bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_FRAGMENT_BIT)
                for i in range(binding_count)]
    set_layout = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(pBindings=bindings), None)
    owned.add("VkDescriptorSetLayout", lambda: vk.vkDestroyDescriptorSetLayout(device, set_layout, None))
    ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_FRAGMENT_BIT, offset=0,
                                     size=push_constant_size)] if push_constant_size else None
    layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
        pSetLayouts=[set_layout], pPushConstantRanges=ranges), None)
    owned.add("VkPipelineLayout", lambda: vk.vkDestroyPipelineLayout(device, layout, None))
    pool = vk.vkCreateDescriptorPool(device, vk.VkDescriptorPoolCreateInfo(maxSets=1, pPoolSizes=[
        vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=binding_count)]), None)
    owned.add("VkDescriptorPool", lambda: vk.vkDestroyDescriptorPool(device, pool, None))
    descriptor_set = vk.vkAllocateDescriptorSets(device, vk.VkDescriptorSetAllocateInfo(
        descriptorPool=pool, pSetLayouts=[set_layout]))[0]
    return layout, descriptor_set


def _module(owned: _Owned, spirv: bytes):
    device = owned.device
    module = vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(codeSize=len(spirv), pCode=spirv), None)
    owned.add("VkShaderModule", lambda: vk.vkDestroyShaderModule(device, module, None))
    return module


def _pipeline(owned: _Owned, vertex: bytes, fragment: bytes, specialization, layout, render_pass, width, height):
    device = owned.device
    entries, data = encode_specialization(specialization)
    info = vk.VkSpecializationInfo(
        pMapEntries=[vk.VkSpecializationMapEntry(constantID=i, offset=o, size=s) for i, o, s in entries],
        dataSize=len(data), pData=vk.ffi.from_buffer(data)) if entries else None
    stages = [vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_VERTEX_BIT, module=_module(owned, vertex),
                                                 pName="main"),
              vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_FRAGMENT_BIT,
                                                 module=_module(owned, fragment), pName="main",
                                                 pSpecializationInfo=info)]
    create_info = vk.VkGraphicsPipelineCreateInfo(
        pStages=stages, pVertexInputState=vk.VkPipelineVertexInputStateCreateInfo(),
        pInputAssemblyState=vk.VkPipelineInputAssemblyStateCreateInfo(
            topology=vk.VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST),
        pViewportState=vk.VkPipelineViewportStateCreateInfo(
            pViewports=[vk.VkViewport(0, 0, width, height, 0, 1)],
            pScissors=[vk.VkRect2D(vk.VkOffset2D(0, 0), vk.VkExtent2D(width, height))]),
        pRasterizationState=vk.VkPipelineRasterizationStateCreateInfo(
            polygonMode=vk.VK_POLYGON_MODE_FILL, cullMode=vk.VK_CULL_MODE_NONE,
            frontFace=vk.VK_FRONT_FACE_COUNTER_CLOCKWISE, lineWidth=1.0),
        pMultisampleState=vk.VkPipelineMultisampleStateCreateInfo(rasterizationSamples=vk.VK_SAMPLE_COUNT_1_BIT),
        pColorBlendState=vk.VkPipelineColorBlendStateCreateInfo(pAttachments=[
            vk.VkPipelineColorBlendAttachmentState(blendEnable=False, colorWriteMask=0xF)]),
        layout=layout, renderPass=render_pass, subpass=0)
    try:
        pipeline = vk.vkCreateGraphicsPipelines(device, None, 1, [create_info], None)[0]
    except vk.VkError as exc:
        raise CompileError(f"{owned.context.info.name} rejected the graphics pipeline ({type(exc).__name__}); "
                           f"validate its shaders with spirv-val") from exc
    owned.add("VkPipeline", lambda: vk.vkDestroyPipeline(device, pipeline, None))
    return pipeline


def draw_fullscreen(context, vertex_spirv: bytes, fragment_spirv: bytes, width: int, height: int,
                    buffers: Sequence[Buffer], specialization: Mapping[int, SpecializationValue] | None = None,
                    push_constants: bytes = b"") -> np.ndarray:
    """The [height, width, 4] float32 image the draw of three vertices with these shaders leaves (cleared to 0)."""
    if width < 1 or height < 1 or not buffers:
        raise ValueError(f"a draw needs a positive size and at least one buffer, got {width}x{height}, {len(buffers)}")
    _require_graphics(context)
    owned = _Owned(context)
    try:
        image, view = _color_image(owned, width, height)
        render_pass = _render_pass(owned)
        framebuffer = vk.vkCreateFramebuffer(owned.device, vk.VkFramebufferCreateInfo(
            renderPass=render_pass, pAttachments=[view], width=width, height=height, layers=1), None)
        owned.add("VkFramebuffer", lambda: vk.vkDestroyFramebuffer(owned.device, framebuffer, None))
        layout, descriptor_set = _layouts(owned, len(buffers), len(push_constants))
        write_storage_buffers(owned.device, descriptor_set, buffers)
        pipeline = _pipeline(owned, vertex_spirv, fragment_spirv, specialization or {}, layout, render_pass,
                             width, height)
        readback = context.create_buffer(width * height * PIXEL_BYTES, host_access=HostAccess.READ)
        with contextlib.ExitStack() as stack:
            stack.callback(readback.destroy)

            def record(cmd) -> None:
                vk.vkCmdBeginRenderPass(cmd, vk.VkRenderPassBeginInfo(
                    renderPass=render_pass, framebuffer=framebuffer,
                    renderArea=vk.VkRect2D(vk.VkOffset2D(0, 0), vk.VkExtent2D(width, height)),
                    pClearValues=[vk.VkClearValue(color=vk.VkClearColorValue(float32=[0, 0, 0, 0]))]),
                    vk.VK_SUBPASS_CONTENTS_INLINE)
                vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline)
                vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_GRAPHICS, layout, 0, 1, [descriptor_set],
                                           0, None)
                if push_constants:
                    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_FRAGMENT_BIT, 0, len(push_constants),
                                          vk.ffi.from_buffer(push_constants))
                vk.vkCmdDraw(cmd, 3, 1, 0, 0)
                vk.vkCmdEndRenderPass(cmd)
                vk.vkCmdCopyImageToBuffer(cmd, image, vk.VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, readback.handle, 1, [
                    vk.VkBufferImageCopy(bufferOffset=0, bufferRowLength=0, bufferImageHeight=0,
                                         imageSubresource=vk.VkImageSubresourceLayers(
                                             aspectMask=vk.VK_IMAGE_ASPECT_COLOR_BIT, mipLevel=0, baseArrayLayer=0,
                                             layerCount=1),
                                         imageOffset=vk.VkOffset3D(0, 0, 0),
                                         imageExtent=vk.VkExtent3D(width, height, 1))])

            context.submit(record)
            pixels = readback.download(np.float32, width * height * 4).copy()
    finally:
        owned.close()
    return pixels.reshape(height, width, 4)
