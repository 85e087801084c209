"""What the coopvec training session decides before it opens a device: the step kernel "auto" takes, the layout its
tape keeps deltas in, and the families' registries (every member answers, every public name has one)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coopnn.backends.coopvec.gradient_methods import AUTO_GRADIENTS, gradient_methods
from coopnn.backends.coopvec.gradient_methods.coopmat import SAMPLE_MAJOR_DELTAS_FROM_LAYERS
from coopnn.backends.coopvec.step_kernels import selectable, step_kernels
from coopnn.backends.coopvec.step_kernels.tiled import AUTO_TILED_FROM_LAYERS
from coopnn.backends.coopvec.training import GRADIENT_METHODS, STEP_METHODS, CoopvecTrainingSession
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.nets.builders import mlp_graph
from coopnn.train.gpu.families import GradientMethod, StepKernel
from coopnn.train.gpu.plan import plan_training
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam


@pytest.mark.parametrize("gradients, layers, step, deltas", [
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS, "coopvec", "samples"),
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS - 1, "coopvec", "features"),
    ("coopmat", SAMPLE_MAJOR_DELTAS_FROM_LAYERS - 1, "tiled", "samples"),
    ("coopvec", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "coopvec", "features"),
    ("coopvec", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "tiled", "features"),
    ("outer_product", SAMPLE_MAJOR_DELTAS_FROM_LAYERS + 1, "coopvec", "features"),
])
def test_deltas_are_sample_major_for_cooperative_matrix_gradients_of_deep_models_or_the_tiled_step(
        gradients, layers, step, deltas):
    session = SimpleNamespace(step_method=step_kernels()[step], plan=SimpleNamespace(layers=[None] * layers),
                              tuning=DEFAULT)
    assert gradient_methods()[gradients].delta_layout(session) == deltas


@pytest.mark.parametrize("deltas", ["features", "samples"])
def test_a_tuning_sets_the_delta_layout_of_cooperative_matrix_gradients(deltas):
    session = SimpleNamespace(step_method=step_kernels()["tiled"], plan=SimpleNamespace(layers=[None] * 5),
                              tuning=Tuning(deltas=deltas))
    assert gradient_methods()["coopmat"].delta_layout(session) == deltas


def _auto_step(hidden, width=64, loss="l2"):
    graph = mlp_graph(3, [width] * hidden, 3, activation="relu")
    session = SimpleNamespace(plan=plan_training(graph), loss_function=get_loss(loss), requested_step="auto",
                              tuning=DEFAULT)
    return CoopvecTrainingSession.choose_step(session).name


def test_auto_takes_the_tiled_step_for_deep_models():
    assert _auto_step(AUTO_TILED_FROM_LAYERS - 1) == "tiled"
    assert _auto_step(AUTO_TILED_FROM_LAYERS - 2) == "coopvec"


def test_auto_takes_the_per_sample_step_where_the_tiled_one_cannot_train():
    assert _auto_step(AUTO_TILED_FROM_LAYERS, width=512) == "coopvec"  # more than 48 KB of workgroup memory


def test_every_public_name_is_a_registered_member():
    assert GRADIENT_METHODS == ("auto", *sorted(gradient_methods()))
    assert AUTO_GRADIENTS in gradient_methods()
    assert STEP_METHODS == ("auto", "tiled", "coopvec_rows", "coopvec")  # in the order "auto" tries them
    assert all(isinstance(m, GradientMethod) and m.name == name for name, m in gradient_methods().items())
    assert all(isinstance(k, StepKernel) and k.name == name for name, k in step_kernels().items())
    assert [k.name for k in selectable()] == list(STEP_METHODS[1:])


@pytest.mark.parametrize("gradients", sorted(gradient_methods()))
def test_every_gradient_method_names_a_registered_step_kernel(gradients):
    method = gradient_methods()[gradients]
    for step in STEP_METHODS:
        try:
            kernel = method.step_for(step)
        except ValueError:
            continue
        assert kernel == "auto" or kernel in step_kernels()


@pytest.mark.parametrize("gradients, step, message", [
    ("outer_product", "tiled", "gradients='outer_product' accumulates in the coopvec step kernel, not the tiled one"),
    ("outer_product_reduced", "tiled", "accumulates in the coopvec step kernel"),
    ("fused", "coopvec", "gradients='fused' forms them in the tiled step kernel, not the coopvec one"),
    ("fused", "coopvec_rows", "gradients='fused' forms them in the tiled step kernel, not the coopvec_rows one"),
    ("outer_product", "coopvec_rows", "accumulates in the coopvec step kernel, not the coopvec_rows one"),
    ("tiles", "auto", "gradients must be one of 'auto', 'coopmat', 'coopvec', 'fused', 'outer_product', "
                      "'outer_product_reduced', not 'tiles'"),
    ("auto", "fused", "step must be 'auto', 'tiled', 'coopvec_rows' or 'coopvec', not 'fused'"),
])
def test_combinations_no_kernel_runs_are_refused_before_any_device_work(gradients, step, message):
    with pytest.raises(ValueError, match=message):
        CoopvecTrainingSession(mlp_graph(3, [32], 3), get_loss("l2"), Adam(), None, gradients=gradients, step=step)
