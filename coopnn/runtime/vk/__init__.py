"""The Vulkan executor: device discovery, memory, pipelines and dispatch, on the `vulkan` (cffi) package.

Importing this package imports nothing else: the `vulkan` package is loaded only when a submodule that needs it is
imported (see `loader`; importing such a submodule without a loader raises BackendUnavailableError), so `import coopnn`
and the numpy backend work on machines without Vulkan. `probe.vulkan_unavailable_reason()` asks without raising.

Modules, one job each:
  loader          import `vulkan` lazily; a missing package or loader becomes BackendUnavailableError
  probe           whether a usable device exists, as a reason string instead of an exception
  nv_ffi          a second cffi FFI for VK_NV_cooperative_vector / VK_NV_cooperative_matrix2 structs and functions
  tracking        the live-object registry that makes close() and garbage collection destroy everything
  instance        VkInstance, optional Khronos validation layer and a debug messenger that collects messages
  chain           the pNext chains of feature and property structs (one table for query and enable)
  device_info     physical-device queries into a plain `DeviceInfo`
  selection       choosing a physical device (discrete first; `device=` or COOPNN_DEVICE)
  device          the logical device with exactly the features and extensions asked for, and its compute queue
  coopvec         VK_NV_cooperative_vector matrix conversion (host and command-buffer forms)
  memory          `Buffer`: direct host-visible memory or device-local memory with a staging buffer
  pipeline_cache  the on-disk pipeline cache, keyed by device, driver and SPIR-V hash
  pipeline        `ComputeKernel`: shader module, descriptor layout and sets, pipeline layout, compute pipeline
  commands        `Dispatcher`: command buffer, fence, barriers, timestamp queries; one submission per run
  context         `VulkanContext`: owns the instance and device and everything created on them
"""
