"""The public API contract of coopnn.load and coopnn.Model, and input checking."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

import coopnn
from tests.conftest import ROOT

MLP = ROOT / "models" / "mlp_32_64x4_16.onnx"
NERF = ROOT / "models" / "nerf_skip_two_heads.onnx"


@pytest.fixture
def mlp():
    with coopnn.load(MLP, backend="numpy") as model:
        yield model


def test_the_public_names_are_exactly_those_documented():
    import types

    public = [name for name in dir(coopnn) if not name.startswith("_")]
    assert public == sorted(name for name in coopnn.__all__ if not name.startswith("_"))
    assert all(hasattr(coopnn, name) for name in coopnn.__all__)
    # every name bound in the package that is not a subpackage imported on the way is documented
    stray = {name for name, value in vars(coopnn).items() if not name.startswith("_") and name not in coopnn.__all__
             and not (isinstance(value, types.ModuleType) and value.__name__ == f"coopnn.{name}")}
    assert not stray  # `annotations` was one, from `from __future__ import annotations`


def test_load_accepts_path_string_bytes_and_proto():
    x = np.random.default_rng(0).uniform(-1, 1, (5, 32)).astype(np.float32)
    results = []
    for source in (MLP, str(MLP), MLP.read_bytes(), onnx.load(MLP)):
        with coopnn.load(source, backend="numpy") as model:
            results.append(model.run(x))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_single_input_single_output_takes_and_returns_arrays(mlp):
    x = np.zeros((3, 32), np.float32)
    y = mlp.run(x)
    assert isinstance(y, np.ndarray) and y.shape == (3, 16) and y.dtype == np.float32
    np.testing.assert_array_equal(mlp(x), y)
    np.testing.assert_array_equal(mlp.run({mlp.inputs[0].name: x}), y)


def test_inputs_outputs_backend_graph(mlp):
    assert len(mlp.inputs) == 1 and mlp.inputs[0].shape == (None, 32) and mlp.inputs[0].dtype == np.float32
    assert mlp.outputs[0].shape == (None, 16)
    assert mlp.backend == "numpy" and mlp.backend_reason == "requested; weights='auto' on numpy: float32"
    assert mlp.weights == "fp32"
    assert mlp.graph.parameter_count() == 32 * 64 + 64 + 3 * (64 * 64 + 64) + 64 * 16 + 16
    assert "mlp_32_64x4_16" in repr(mlp) or "numpy" in repr(mlp)


def test_accepts_lists_float16_and_float64(mlp):
    x = np.random.default_rng(1).uniform(-1, 1, (4, 32))
    want = mlp.run(x.astype(np.float32))
    np.testing.assert_allclose(mlp.run(x), want, rtol=1e-6)
    np.testing.assert_allclose(mlp.run(x.tolist()), want, rtol=1e-6)
    np.testing.assert_allclose(mlp.run(x.astype(np.float16)), mlp.run(x.astype(np.float16).astype(np.float32)))


def test_empty_batch(mlp):
    assert mlp.run(np.zeros((0, 32), np.float32)).shape == (0, 16)


@pytest.mark.parametrize(
    "x, match",
    [
        (np.zeros((2, 31), np.float32), r"shape \[2, 31\]; expected \[batch, 32\]"),
        (np.zeros((32,), np.float32), r"add a batch axis"),
        (np.zeros((2, 32), np.int64), r"dtype int64"),
        (np.zeros((2, 32), np.complex64), r"dtype complex64"),
        ({"nope": np.zeros((2, 32), np.float32)}, r"missing .* unknown \['nope'\]"),
        ("text", r"dtype <U4|shape"),
    ],
)
def test_wrong_inputs_raise_input_error(mlp, x, match):
    with pytest.raises(coopnn.InputError, match=match):
        mlp.run(x)


def test_nan_propagates_and_is_not_hidden(mlp):
    x = np.zeros((3, 32), np.float32)
    x[1, 5] = np.nan
    y = mlp.run(x)
    assert np.isnan(y[1]).any() and not np.isnan(y[0]).any() and not np.isnan(y[2]).any()


def test_several_inputs_or_outputs_use_dicts():
    with coopnn.load(NERF, backend="numpy") as model:
        assert len(model.outputs) >= 2
        feeds = {t.name: np.zeros((2,) + t.shape[1:], np.float32) for t in model.inputs}
        out = model.run(feeds if len(model.inputs) > 1 else feeds[model.inputs[0].name])
        assert isinstance(out, dict) and set(out) == {t.name for t in model.outputs}
        if len(model.inputs) > 1:
            with pytest.raises(coopnn.InputError, match="pass a dict"):
                model.run(np.zeros((2, 3), np.float32))


def test_mismatched_batches_raise():
    with coopnn.load(NERF, backend="numpy") as model:
        if len(model.inputs) < 2:
            pytest.skip("the NeRF model has a single input")
        feeds = {t.name: np.zeros((2 + i,) + t.shape[1:], np.float32) for i, t in enumerate(model.inputs)}
        with pytest.raises(coopnn.InputError, match="batch"):
            model.run(feeds)


def test_closed_model_refuses_to_run(mlp):
    mlp.close()
    mlp.close()
    with pytest.raises(coopnn.InputError, match="closed"):
        mlp.run(np.zeros((1, 32), np.float32))


def test_backends_lists_numpy_and_unknown_backend_errors():
    statuses = {s.name: s for s in coopnn.backends.statuses()}
    assert statuses["numpy"].available
    for s in statuses.values():
        assert s.available or s.reason
    with pytest.raises(coopnn.BackendUnavailableError, match="unknown backend 'tpu'"):
        coopnn.load(MLP, backend="tpu")


def test_unknown_weight_format_is_a_typed_error():
    with pytest.raises(coopnn.InputError, match="unknown weight format .int3.; supported: fp16, fp32"):
        coopnn.load(MLP, backend="numpy", weights="int3")


def test_fp16_weights_on_numpy_round_the_weights():
    x = np.random.default_rng(2).uniform(-1, 1, (64, 32)).astype(np.float32)
    with coopnn.load(MLP, backend="numpy") as exact, coopnn.load(MLP, backend="numpy", weights="fp16") as half:
        a, b = exact.run(x), half.run(x)
    assert not np.array_equal(a, b)
    np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-2)


def test_auto_notice_is_one_short_warning_line_when_falling_back_to_numpy():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with coopnn.load(MLP) as model:
            backend, reason = model.backend, model.backend_reason
    notices = [w for w in caught if issubclass(w.category, coopnn.BackendNotice)]
    if backend != "numpy":
        assert not notices
        return
    [notice] = notices
    text = str(notice.message)
    assert len(text) <= 100 + len(MLP.stem) and "\n" not in text and "model.backend_reason" in text
    assert notice.filename == __file__  # it points at the caller's line
    assert "skipped" in reason and len(reason) > len(text)  # the detail is the model's


def test_the_auto_notice_is_silenced_by_naming_a_backend_or_by_its_category():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        coopnn.load(MLP, backend="numpy").close()
        warnings.simplefilter("ignore", coopnn.BackendNotice)
        coopnn.load(MLP).close()
    assert not [w for w in caught if issubclass(w.category, coopnn.BackendNotice)]


def test_huge_batch_runs_in_chunks():
    x = np.zeros((1 << 20, 32), np.float32)
    with coopnn.load(MLP, backend="numpy") as model:
        y = model.run(x)
    assert y.shape == (1 << 20, 16)
    np.testing.assert_array_equal(y[0], y[-1])


def test_a_device_asked_for_must_exist_whatever_the_backend(monkeypatch):
    from coopnn.errors import BackendUnavailableError

    model_path = ROOT / "models" / "mlp_3_64x2_3.onnx"
    for backend in ("auto", "numpy", "portable"):
        with pytest.raises(BackendUnavailableError, match=r"device='no such gpu'"):
            coopnn.load(model_path, backend=backend, device="no such gpu")
    monkeypatch.setenv("COOPNN_DEVICE", "no such gpu")
    for backend in ("auto", "numpy"):
        with pytest.raises(BackendUnavailableError, match=r"COOPNN_DEVICE='no such gpu'"):
            coopnn.load(model_path, backend=backend)


def test_big_endian_inputs_are_converted_once_with_the_same_results():
    x = np.random.default_rng(3).uniform(-1, 1, (7, 3))
    with coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="numpy") as model:
        for dtype in (">f4", ">f8", ">f2"):
            np.testing.assert_array_equal(model.run(x.astype(dtype)), model.run(x.astype("=" + dtype[1:])))


def test_run_after_close_is_its_own_error_type():
    model = coopnn.load(ROOT / "models" / "mlp_3_64x2_3.onnx", backend="numpy")
    model.close()
    with pytest.raises(coopnn.ModelClosedError, match="closed; load it again"):
        model.run(np.zeros((1, 3), np.float32))
    assert issubclass(coopnn.ModelClosedError, coopnn.InputError)  # code catching InputError keeps working


def test_help_of_run_states_dtypes_layouts_outputs_out_and_threads():
    from coopnn.dtypes import ACCEPTED_INPUT_NUMPY

    doc = " ".join(coopnn.Model.run.__doc__.split())
    assert all(dtype.name in doc for dtype in ACCEPTED_INPUT_NUMPY)
    for promise in ("either byte order", "Fortran", "new float32 arrays", "`out`", "the same arrays are returned",
                    "many threads at once", "ModelClosedError"):
        assert promise in doc
