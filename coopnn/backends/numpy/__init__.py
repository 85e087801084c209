"""`backend="numpy"`: the numpy interpreter of the graph IR (`inference`) and its reverse mode (`training`)."""

from coopnn.backends import register
from coopnn.backends.numpy.backend import NumpyBackend

register(NumpyBackend())
