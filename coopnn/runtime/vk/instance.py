"""The VkInstance (Vulkan 1.3), optionally with the Khronos validation layer and a messenger collecting its messages.

With validation on, the layer runs with synchronization validation too, and every warning or error it reports is
appended to `Instance.messages` (tests assert that list stays empty). The messenger is also chained into instance
creation so messages from vkCreateInstance and vkDestroyInstance are caught.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coopnn.errors import BackendUnavailableError
from coopnn.runtime.vk.loader import INSTALL_HINT, load_vulkan
from coopnn.runtime.vk.tracking import ObjectTracker

vk = load_vulkan()

API_VERSION_1_3 = (1 << 22) | (3 << 12)
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS_EXTENSION = "VK_EXT_debug_utils"
VALIDATION_HINT = "install the Khronos validation layer, e.g. `apt-get install vulkan-validationlayers`"


@dataclass
class Instance:
    """A live VkInstance; `messages` fills with validation warnings and errors when validation is on."""

    handle: object
    validation: bool
    messages: list[str] = field(default_factory=list)


def available_layers() -> set[str]:
    return {layer.layerName for layer in vk.vkEnumerateInstanceLayerProperties()}


def create_instance(tracker: ObjectTracker, validation: bool) -> Instance:
    """Create the instance (and the debug messenger when `validation`), registering both with `tracker`."""
    if validation and VALIDATION_LAYER not in available_layers():
        raise BackendUnavailableError(f"validation was requested but {VALIDATION_LAYER} is not installed; "
                                      f"{VALIDATION_HINT}")
    instance = Instance(handle=None, validation=validation)
    messenger_info, callback = _messenger_create_info(instance.messages) if validation else (None, None)
    validation_features = vk.VkValidationFeaturesEXT(
        pNext=messenger_info,
        pEnabledValidationFeatures=[vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT]
    ) if validation else None
    create_info = vk.VkInstanceCreateInfo(
        pNext=validation_features,
        pApplicationInfo=vk.VkApplicationInfo(pApplicationName="coopnn", pEngineName="coopnn",
                                              apiVersion=API_VERSION_1_3),
        ppEnabledLayerNames=[VALIDATION_LAYER] if validation else [],
        ppEnabledExtensionNames=[DEBUG_UTILS_EXTENSION] if validation else [])
    try:
        handle = vk.vkCreateInstance(create_info, None)
    except (vk.VkErrorIncompatibleDriver, vk.VkErrorInitializationFailed) as exc:
        raise BackendUnavailableError(
            f"no Vulkan driver could be loaded ({type(exc).__name__}); {INSTALL_HINT}") from exc
    instance.handle = handle

    # The callback is bound as a default so it outlives the instance: the messenger chained at creation reports
    # during vkDestroyInstance.
    def destroy_instance(_callback=callback) -> None:
        vk.vkDestroyInstance(handle, None)

    tracker.add("VkInstance", destroy_instance)
    if validation:
        _create_messenger(tracker, handle, messenger_info, callback)
    return instance


def _messenger_create_info(messages: list[str]):
    """A VkDebugUtilsMessengerCreateInfoEXT whose callback appends to `messages`, and that callback.

    Built with the raw FFI rather than pyvulkan's struct helper, which routes every messenger through one module-level
    callback and so cannot serve two contexts at once.
    """
    ffi = vk.ffi
    severity_names = {vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT: "warning",
                      vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT: "error"}

    @ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT")
    def on_message(severity, _types, data, _user):
        name = ffi.string(data.pMessageIdName).decode(errors="replace") if data.pMessageIdName else "-"
        text = ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else ""
        messages.append(f"[{severity_names.get(severity, severity)}] {name}: {text}")
        return vk.VK_FALSE

    create_info = ffi.new("VkDebugUtilsMessengerCreateInfoEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        "messageSeverity": sum(severity_names),
        "messageType": (vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
                        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT),
        "pfnUserCallback": on_message,
    })
    return create_info[0], on_message


def _create_messenger(tracker: ObjectTracker, instance, create_info, callback) -> None:
    create = vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT")
    destroy = vk.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT")
    messenger = create(instance, create_info, None)

    def destroy_messenger(_callback=callback) -> None:
        destroy(instance, messenger, None)

    tracker.add("VkDebugUtilsMessengerEXT", destroy_messenger)
