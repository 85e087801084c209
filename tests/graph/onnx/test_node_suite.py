"""The node test cases shipped with onnx, for the operators coopnn imports, run through run_graph.

Each case is tried as written; when that form is unsupported (node tests feed weights, bounds and indices as inputs,
which coopnn treats as batched), it is tried again with every input after the first frozen into an initializer, the
way a real model holds its parameters. A case passes when its outputs match the expected ones; it counts as
unsupported when both forms raise UnsupportedOperatorError. A wrong answer fails the test.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from coopnn.errors import ModelFormatError, UnsupportedOperatorError
from coopnn.graph.onnx import import_model, supported_operators
from coopnn.graph.verify import verify
from coopnn.backends.numpy.inference import run_graph

# At the time of writing 299 of about 650 cases pass; the floor leaves room for cases onnx adds or changes.
MIN_PASSED = 250


def _array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def _frozen(model: onnx.ModelProto, inputs: list[np.ndarray]) -> onnx.ModelProto:
    """`model` with every input after the first turned into an initializer holding the case's data."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    frozen.ir_version = max(frozen.ir_version, 4)  # initializers need not be listed as inputs from IR version 4
    for info, value in zip(list(frozen.graph.input)[1:], inputs[1:]):
        frozen.graph.initializer.append(numpy_helper.from_array(value, info.name))
    del frozen.graph.input[1:]
    return frozen


@dataclass
class Tally:
    passed: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    unequal_batches: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)


def _run_case(case, tally: Tally) -> None:
    inputs = [_array(a) for a in case.data_sets[0][0]]
    expected = [_array(a) for a in case.data_sets[0][1]]
    forms = [(case.model, inputs)] + ([(_frozen(case.model, inputs), inputs[:1])] if len(inputs) > 1 else [])
    for number, (model, feeds_in) in enumerate(forms):
        try:
            graph = verify(import_model(model))
            break
        except UnsupportedOperatorError:
            continue
        except ModelFormatError:
            if number == 0:
                raise
            continue  # freezing made an initializer of a type coopnn does not read (int4, strings, ...)
    else:
        tally.unsupported.append(case.name)
        return
    feeds = {v.name: a.astype(np.bool_ if v.dtype == "bool" else np.float32) for v, a in zip(graph.inputs, feeds_in)}
    if len({a.shape[0] for a in feeds.values()}) > 1:
        tally.unequal_batches.append(case.name)  # coopnn feeds every input with one batch size
        return
    got = run_graph(graph, feeds)
    for value, want in zip(graph.outputs, expected):
        result = got[value.name]
        if want.dtype == np.bool_:
            ok = result.shape == want.shape and np.array_equal(result, want)
        else:
            ok = result.shape == want.shape and np.allclose(
                result, want.astype(np.float32), rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5), equal_nan=True)
        if not ok:
            tally.wrong.append(f"{case.name}:{value.name}")
            return
    tally.passed.append(case.name)


def test_onnx_node_cases():
    loader = pytest.importorskip("onnx.backend.test.loader")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = loader.load_model_tests(kind="node")
    supported = set(supported_operators())
    selected = [c for c in cases if {n.op_type for n in c.model.graph.node} <= supported]
    tally = Tally()
    with np.errstate(all="ignore"):
        for case in selected:
            _run_case(case, tally)
    attempted = len(tally.passed) + len(tally.unsupported) + len(tally.wrong)
    print(f"onnx node tests: {len(tally.passed)} passed / {attempted} attempted ({len(tally.unsupported)} unsupported,"
          f" {len(tally.unequal_batches)} with inputs of unequal batch sizes left out)")
    assert not tally.wrong, f"wrong answers: {tally.wrong}"
    assert len(tally.passed) >= MIN_PASSED
