"""The one backend registry: discovery of the backend folders, training backends, targets."""

from __future__ import annotations

import pytest

from coopnn import backends
from coopnn.backends.numpy.backend import NumpyBackend
from coopnn.errors import BackendUnavailableError, CompileError


def test_every_backend_folder_is_registered_by_priority():
    assert [b.name for b in backends.all_backends()] == ["coopvec", "coopmat2", "coopmat", "portable", "numpy"]


def test_numpy_is_the_first_training_backend():
    assert backends.training_backends()[0] == "numpy"
    assert isinstance(backends.training_backend("numpy"), NumpyBackend)


def test_registering_a_name_twice_is_refused():
    backends.training_backends()
    with pytest.raises(ValueError, match="registered twice"):
        backends.register(NumpyBackend())


def test_unknown_backend_lists_those_that_train():
    with pytest.raises(BackendUnavailableError, match="backend 'onnxruntime' cannot train; backends that train: numpy, "
                                                      r"portable, coopvec \(pass backend='numpy' to the Trainer"):
        backends.training_backend("onnxruntime")


def test_targets_are_the_backends_that_compile_kernels():
    assert backends.target_names() == ["coopmat", "coopmat2", "coopvec", "portable"]
    assert backends.target("portable") is backends.get("portable").target
    with pytest.raises(CompileError, match="unknown target 'numpy'; targets: coopmat, coopmat2, coopvec, portable"):
        backends.target("numpy")


@pytest.mark.parametrize("backend", ["auto", "numpy", "portable", "coopvec", "coopmat2", "coopmat"])
@pytest.mark.parametrize("device", [99, "no such gpu"])
def test_a_device_that_matches_none_is_one_error_type_under_every_backend(backend, device):
    import coopnn

    with pytest.raises(BackendUnavailableError) as caught:
        coopnn.mlp(3, [8], 3, backend=backend, device=device)
    if "found no device" not in str(caught.value):  # a machine without Vulkan has no device to list
        assert f"device={device!r}" in str(caught.value)


def test_the_device_in_the_environment_is_checked_under_numpy_too(monkeypatch):
    import coopnn

    monkeypatch.setenv("COOPNN_DEVICE", "no such gpu")
    with pytest.raises(BackendUnavailableError):
        coopnn.mlp(3, [8], 3, backend="numpy")
