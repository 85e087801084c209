"""The training backend registry."""

from __future__ import annotations

import pytest

from coopnn.errors import BackendUnavailableError
from coopnn.train import backends
from coopnn.train.numpy_backend import NumpyTrainingBackend


def test_numpy_is_the_first_training_backend():
    assert backends.training_backends()[0] == "numpy"
    assert isinstance(backends.get("numpy"), NumpyTrainingBackend)


def test_registering_a_name_twice_is_refused():
    backends.training_backends()
    with pytest.raises(ValueError, match="registered twice"):
        backends.register(NumpyTrainingBackend())


def test_unknown_backend_lists_those_that_train():
    with pytest.raises(BackendUnavailableError, match="backend 'onnxruntime' cannot train; backends that train: numpy, "
                                                      r"portable, coopvec \(pass backend='numpy' to the Trainer"):
        backends.get("onnxruntime")
