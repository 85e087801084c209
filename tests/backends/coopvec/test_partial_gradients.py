"""The weight-gradient products of the coopvec session write each chunk's partial gradients at the stride the partial
sum reads them and the partials buffer is sized by: the layers' parameters, not a trained grid's table after them
(which the step kernel adds into the gradient itself). Checked on the push constants, with no device."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from coopnn.backends.coopvec.gradient_methods import coopmat, coopvec
from coopnn.shaders.training.layout import ParameterLayout
from coopnn.shaders.training.tuning import Tuning

LAYOUT = ParameterLayout.of([("w0", "b0", 32, 8), ("w1", "b1", 16, 32)], [("encoding.params", 1024)])


class PushRecorder:
    """Stands in for a compiled gradient shader: packs nothing, keeps the push constants asked for."""

    def __init__(self):
        self.values = {}

    def pack_push(self, **values) -> bytes:
        self.values = values
        return struct.pack("<I", 0)


class Kernel:
    @staticmethod
    def group_count_for(invocations: int) -> int:
        return -(-invocations // 64)


@pytest.mark.parametrize("method", [coopvec.METHOD, coopmat.METHOD], ids=lambda m: m.name)
def test_the_chunk_stride_is_the_layers_parameters(method):
    shader = PushRecorder()
    session = SimpleNamespace(layout=LAYOUT, gradient_shaders=[shader], gradient_kernels=[Kernel()], capacity=4096,
                              tuning=Tuning(), tape_buffer=None, partials=None, ones=None, state=None)
    method.products(session, 4096, 4096)
    assert LAYOUT.layers_size < LAYOUT.size
    assert shader.values["parameters"] == LAYOUT.layers_size
