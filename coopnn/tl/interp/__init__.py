"""The numpy interpreter of the tensor language, the oracle the compiled kernels are tested against: `interpret`."""

from coopnn.tl.interp.run import interpret

__all__ = ["interpret"]
