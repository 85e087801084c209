"""`backend="portable"`: plain SPIR-V for any Vulkan 1.3 device: the target (`target`), the record (`backend`) and
the training session (`training`)."""

from coopnn.backends import register
from coopnn.backends.portable.backend import PortableBackend

register(PortableBackend())
