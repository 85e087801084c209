"""A grid's tables on the coopvec training backend without a GPU: the sessions built on a recorded device
(`tools/training_shader_hashes.FakeContext`), every kernel of a grid's step through spirv-val with both table atomics
methods, what each asks of the device and binds, the per-sample kernel "auto" takes, the tiled kernels' refusal, and a
device without float16 vector atomics refused naming the option. `test_grid_training_gpu.py` runs them on the GPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from coopnn.backends import training_backend
from coopnn.backends.base import check_training_options
from coopnn.backends.coopvec.table_atomics import AUTO_TABLE_ATOMICS, TableAtomics, table_atomics_methods
from coopnn.backends.coopvec.table_atomics.float16_pairs import CONTENDED_ELEMENTS, COPIES, contended_elements
from coopnn.graph.encodings.grid import Grid
from coopnn.layouts.formats.fp16 import FORMAT as FP16
from coopnn.backends.coopvec.training import TABLE_ATOMICS, CoopvecTrainingSession
from coopnn.errors import BackendUnavailableError, CompileError
from coopnn.nets.builders import mlp_graph
from coopnn.shaders.spirv import disassemble
from coopnn.shaders.targets.encodings.grid import SCATTER_FEATURES
from coopnn.shaders.training.gradients import widen_lanes
from coopnn.shaders.training.tuning import DEFAULT, Tuning
from coopnn.train.gpu.plan import plan_training
from coopnn.train.losses import get_loss
from coopnn.train.optim import Adam
from tests.backends.coopvec.test_encodings import IMAGE_ENCODING
from tests.backends.portable.test_target import spirv_val
from tools import training_shader_hashes as recorded

GRIDS = [
    ({"otype": "HashGrid", "n_levels": 3, "n_features_per_level": 2, "log2_hashmap_size": 6, "base_resolution": 4,
      "per_level_scale": 2.0}, 2),
    ({"otype": "DenseGrid", "n_levels": 2, "n_features_per_level": 1, "base_resolution": 3, "per_level_scale": 2.0,
      "interpolation": "Nearest"}, 3),
    ({"otype": "TiledGrid", "n_levels": 2, "n_features_per_level": 4, "base_resolution": 4, "per_level_scale": 1.5,
      "interpolation": "Smoothstep"}, 2),
    ({"otype": "HashGrid", "n_levels": 2, "n_features_per_level": 8, "log2_hashmap_size": 7, "base_resolution": 3,
      "per_level_scale": 2.0}, 3),
]
METHODS = sorted(table_atomics_methods())
PER_SAMPLE_GRADIENTS = ("coopmat", "coopvec", "outer_product", "outer_product_reduced")
F16_VECTOR_ATOMICS = "shaderFloat16VectorAtomics"


def _grid_id(case) -> str:
    config, n_in = case
    return f"{config['otype']}-{n_in}d-{config.get('interpolation', 'Linear')}-{config['n_features_per_level']}f"


@pytest.fixture
def recorded_device(monkeypatch):
    """Sessions open a recorded device with every feature (`device.missing`: what it lacks from now on)."""
    from coopnn.backends.coopvec import driver
    from coopnn.runtime.vk import shared

    device = SimpleNamespace(missing=frozenset())
    monkeypatch.setattr(driver, "converted_size", recorded.converted_size)
    monkeypatch.setattr(shared, "open_context", lambda *_, **__: recorded.FakeContext(32, device.missing))
    monkeypatch.setattr(shared, "chosen_device", lambda *_: recorded.FakeContext(32, device.missing).info)
    return device


def _session(config, n_in, hidden=(16,), **options):
    graph = mlp_graph(n_in, list(hidden), 3, encoding=config, seed=3)
    return CoopvecTrainingSession(graph, get_loss("l2"), Adam(), None, **options)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("config, n_in", GRIDS, ids=[_grid_id(case) for case in GRIDS])
def test_every_kernel_of_a_grid_step_passes_spirv_val(recorded_device, config, n_in, method, tmp_path):
    session = _session(config, n_in, table_atomics=method)
    assert session.step_method.name == "coopvec"
    assert table_atomics_methods()[method].features <= session.binary.features <= session.features()
    for binary in session.binaries().values():
        spirv_val(binary.spirv, tmp_path)


@pytest.mark.parametrize("config, n_in", GRIDS, ids=[_grid_id(case) for case in GRIDS])
def test_the_step_reading_the_working_copy_binds_it_and_converts_nothing(recorded_device, config, n_in, tmp_path):
    session = _session(config, n_in, hidden=(32,), step="coopvec_rows")
    assert session.weights_buffer() is session.working
    assert session.step_method.working_steps(session) == []
    assert dict(session.image.entries) == session.layout.entries(FP16)
    spirv_val(session.binary.spirv, tmp_path)
    # (layout, transpose) of every product: row-major forward, column-major (the transpose) backward
    products = set()
    for line in disassemble(session.binary.spirv).splitlines():
        if "MatrixMul" in line:
            words = line.split()
            at = words.index("%false") if "%false" in words else words.index("%true")
            products.add((words[at - 1], words[at]))
    assert products == {("%uint_0", "%false"), ("%uint_1", "%false")}


@pytest.mark.parametrize("options, refusal", [
    ({"hidden": (40,)}, r"step='coopvec_rows' cannot train .*: matrix '.*' starts at byte 720 of the working copy"),
    ({"gradients": "outer_product"}, r"accumulates in the coopvec step kernel, not the coopvec_rows one"),
])
def test_the_step_reading_the_working_copy_refuses_what_it_cannot_read(recorded_device, options, refusal):
    with pytest.raises((CompileError, ValueError), match=refusal):
        _session(*GRIDS[0], step="coopvec_rows", **options)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("gradients", PER_SAMPLE_GRADIENTS)
def test_every_gradient_method_of_the_per_sample_step_trains_a_grid(recorded_device, gradients, method, tmp_path):
    session = _session(*GRIDS[0], gradients=gradients, table_atomics=method)
    assert session.step_method.name == "coopvec"
    if session.gradient_method.accumulates:  # accumulators for the layers only: the step adds the grid's itself
        assert not [name for name in session.accumulators if "encoding" in name]
    for binary in session.binaries().values():
        spirv_val(binary.spirv, tmp_path)


@pytest.mark.parametrize("gradients", PER_SAMPLE_GRADIENTS)
def test_the_step_reads_a_vertex_in_one_load_unless_it_accumulates_into_the_weights(recorded_device, gradients):
    session = _session(*GRIDS[0], gradients=gradients)
    runs = "WeightRuns2" in disassemble(session.binary.spirv)
    assert runs is not session.gradient_method.accumulates


@pytest.mark.parametrize("method", METHODS)
def test_only_a_step_that_trains_a_grid_asks_for_its_atomics(recorded_device, method):
    plain = CoopvecTrainingSession(mlp_graph(2, [16], 3), get_loss("l2"), Adam(), None, table_atomics=method)
    asked = SCATTER_FEATURES | {F16_VECTOR_ATOMICS}
    assert not asked & plain.binary.features
    assert "table gradient 0" not in plain.binaries()
    grid = _session(*GRIDS[0], table_atomics=method)
    other = {"float32": F16_VECTOR_ATOMICS}.get(method, "shaderBufferFloat32AtomicAdd")
    assert other not in grid.binary.features


def test_float32_atomics_add_into_the_tables_part_of_the_gradient(recorded_device):
    session = _session(*GRIDS[0], table_atomics="float32")
    table = session.layout.tables[0]
    assert session.table_gradient_buffer() is session.gradient
    assert session.table_gradient_steps() == [] and len(session.table_gradient_zeroing()) == 1
    assert table.offset == session.layout.layers_size


def test_float16_pairs_add_into_a_table_sized_buffer_widened_into_the_gradient(recorded_device):
    session = _session(*GRIDS[0], table_atomics="float16_pairs")
    table = session.layout.tables[0]
    session._ensure_capacity(1000)
    bound = session._buffers(None)[next(b.index for b in session.binary.bindings if b.role == "table_gradient")]
    shared = contended_elements(session.plan.tables[0].node.attrs["encoding"])
    assert shared == table.size  # every level of this small grid is contended
    assert bound is session.table_halves and session.table_halves.size == 2 * (table.size + (COPIES - 1) * shared)
    (widen,) = session.table_gradient_steps()
    assert widen.buffers == (session.table_halves, session.gradient, session.state)
    # the widening clears the sums, so only a step kernel no widening follows (a loss) is followed by a fill
    assert session.table_gradient_zeroing() == [] and len(session.table_gradient_cleanup()) == 1
    lanes = widen_lanes(table.size, table.offset, shared)  # elements an invocation widens: whole vectors
    assert lanes > 1 and widen.push_constants == session.table_shaders[0].pack_push(
        count=table.size // lanes, first=0, to=table.offset // lanes, shared=shared // lanes)
    # the widening runs beside the loss tiles, and the weight gradients' first dispatch beside both
    commands, _ = session.gradient_commands(1000)
    assert commands[1].kernel is widen.kernel and commands[1].alongside and commands[2].alongside


@pytest.mark.parametrize("tuning", [Tuning(table_copies=128, sample_workgroup=128), Tuning(table_copies=1)],
                         ids=Tuning.describe)
def test_a_tuning_sets_the_copies_of_the_contended_levels_and_the_work_group(recorded_device, tuning, tmp_path):
    session = _session(*GRIDS[0], table_atomics="float16_pairs", tuning=tuning)
    table, shared = session.layout.tables[0], contended_elements(session.plan.tables[0].node.attrs["encoding"])
    assert session.table_atomics.copies == tuning.table_copies
    assert session.table_halves.size == 2 * (table.size + (tuning.table_copies - 1) * shared)
    assert session.binary.workgroup_size[0] == (tuning.sample_workgroup or 64)
    for binary in session.binaries().values():
        spirv_val(binary.spirv, tmp_path)
    with pytest.raises(ValueError, match="table_copies must be a power of two"):
        Tuning(table_copies=24)
    with pytest.raises(ValueError, match="sample_workgroup must be a positive multiple of 32"):
        Tuning(sample_workgroup=48)
    with pytest.raises(ValueError, match="small_batch and small_batch_workgroup go together"):
        Tuning(small_batch=1 << 16)


def test_small_batches_run_the_copy_of_the_step_kernel_their_tuning_gives(recorded_device, tmp_path):
    session = _session(*GRIDS[0], hidden=(32,), tuning=Tuning(small_batch=1 << 12, small_batch_workgroup=256))
    small = session.binaries()["step, small batches"]
    assert small.workgroup_size[0] == 256 and session.binary.workgroup_size[0] == 64
    assert small.push_constants == session.binary.push_constants and small.bindings == session.binary.bindings
    spirv_val(small.spirv, tmp_path)
    kernel, groups = session.step_method.launch(session, 4096)
    assert kernel is session.small_batch_kernel and groups == 16
    assert session.step_method.launch(session, 4160) == (session.step_kernel, 65)
    plain = _session(*GRIDS[0], hidden=(32,))
    assert "step, small batches" not in plain.binaries()


def test_the_contended_levels_are_the_leading_ones_of_at_most_2_to_the_15_elements():
    """tcnn's image grid: its six dense levels (256 to 14,888 entries of 2 features); none at one feature a level."""
    image = Grid.from_config(IMAGE_ENCODING, 2, "encoding")
    assert contended_elements(image) == 2 * sum(level.size for level in image.levels[:6]) == 53008
    assert image.levels[6].size * 2 > CONTENDED_ELEMENTS >= image.levels[5].size * 2
    single = Grid.from_config({**IMAGE_ENCODING, "n_features_per_level": 1}, 2, "encoding")
    assert contended_elements(single) == 0


def test_auto_takes_a_per_sample_step_for_a_grid_even_where_it_would_take_the_tiled_one(recorded_device):
    # the one reading the working copy where it can (hidden widths multiples of 32), else the one converting it
    assert _session(*GRIDS[0], hidden=(64, 64)).step_method.name == "coopvec_rows"
    assert _session(*GRIDS[0], hidden=(40,)).step_method.name == "coopvec"
    assert _session(*GRIDS[0], hidden=(64, 64), gradients="outer_product").step_method.name == "coopvec"
    plain = SimpleNamespace(plan=plan_training(mlp_graph(2, [64, 64], 3)), loss_function=get_loss("l2"),
                            requested_step="auto", tuning=DEFAULT)
    assert CoopvecTrainingSession.choose_step(plain).name == "tiled"


@pytest.mark.parametrize("options, refusal", [
    ({"step": "tiled"}, r"the tiled training step cannot train .*: the tables of its grid 'encoding' train in the "
                        r"per-sample step kernel only \(step='coopvec' or 'auto'\)"),
    ({"gradients": "fused"}, r"gradients='fused' cannot train .*: the tables of its grid 'encoding' train in the "
                             r"per-sample step kernel only"),
])
def test_the_tiled_kernels_refuse_a_grid_naming_it(recorded_device, options, refusal):
    with pytest.raises(CompileError, match=refusal):
        _session(*GRIDS[0], hidden=(64, 64), **options)


def test_a_device_without_float16_vector_atomics_is_refused_naming_the_option(recorded_device):
    recorded_device.missing = frozenset({F16_VECTOR_ATOMICS})
    with pytest.raises(BackendUnavailableError, match=r"table_atomics='float16_pairs' needs shaderFloat16VectorAtomics, "
                                                      r"which recorded device .* lacks; use table_atomics='float32'"):
        _session(*GRIDS[0], table_atomics="float16_pairs")
    _session(*GRIDS[0], table_atomics="float32")  # float32 atomics need nothing it lacks
    assert _session(*GRIDS[0]).table_atomics.name == "float32"  # what "auto" takes there


def test_auto_takes_float16_pairs_where_the_device_offers_them(recorded_device):
    assert _session(*GRIDS[0]).table_atomics.name == "float16_pairs"
    CoopvecTrainingSession(mlp_graph(2, [16], 3), get_loss("l2"), Adam(), None, table_atomics="float16_pairs")


def test_table_atomics_are_the_registered_members_and_a_trainer_option():
    assert TABLE_ATOMICS == ("auto", *METHODS) and METHODS == ["float16_pairs", "float32"]
    assert sorted(AUTO_TABLE_ATOMICS) == METHODS
    assert all(isinstance(m, TableAtomics) and m.name == name for name, m in table_atomics_methods().items())
    for name in TABLE_ATOMICS:
        check_training_options(training_backend("coopvec"), {"table_atomics": name})
    with pytest.raises(ValueError, match=r"table_atomics must be 'auto', 'float16_pairs' or 'float32', not 'f16'"):
        _session(*GRIDS[0], table_atomics="f16")
