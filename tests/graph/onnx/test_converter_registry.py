"""The converter registry: lookup by opset, explicit family list, and agreement with ONNX's operator versions."""

from pathlib import Path

import onnx.defs
import pytest

from coopnn.graph.onnx import converters, registry
from coopnn.graph.onnx.converters import activations, indexing, normalization
from coopnn.graph.onnx.fuse_encodings import DOMAIN as ENCODING_DOMAIN


def test_every_family_module_is_listed():
    folder = Path(converters.__file__).parent
    on_disk = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert on_disk == {m.__name__.rsplit(".", 1)[1] for m in converters.FAMILIES}


@pytest.mark.parametrize("op_type, opset, expected", [
    ("Clip", 6, activations.clip_with_attributes),
    ("Clip", 10, activations.clip_with_attributes),
    ("Clip", 11, activations.clip_with_inputs),
    ("Clip", 21, activations.clip_with_inputs),
    ("Slice", 9, indexing.slice_with_attributes),
    ("Slice", 10, indexing.slice_with_inputs),
    ("LayerNormalization", 17, normalization.layer_normalization),
])
def test_lookup_picks_the_highest_version_not_above_the_opset(op_type, opset, expected):
    assert registry.lookup("", op_type, opset) is expected


def test_lookup_below_the_first_version_or_of_unknown_operators_finds_nothing():
    assert registry.lookup("", "Clip", 5) is None
    assert registry.lookup("", "LayerNormalization", 16) is None
    assert registry.lookup("", "Conv", 13) is None
    assert registry.lookup("com.example", "Relu", 13) is None
    assert registry.first_version("", "Gemm") == 7
    assert registry.first_version("", "Conv") is None


def test_softmax_versions_differ_in_axis_semantics():
    assert registry.lookup("", "Softmax", 12) is not registry.lookup("", "Softmax", 13)


def test_registering_a_version_twice_is_refused(monkeypatch):
    monkeypatch.setattr(registry, "_TABLE", {})
    registry.converter("Thing", since=(1, 5))(lambda node, ctx: None)
    with pytest.raises(ValueError, match="Thing.*since version 5"):
        registry.converter("Thing", since=5)(lambda node, ctx: None)
    registry.converter("Thing", since=5, domain="com.example")(lambda node, ctx: None)
    assert registry.supported_operators() == ["Thing", "com.example::Thing"]


def test_supported_operators_cover_the_exported_mlp_vocabulary():
    supported = registry.supported_operators()
    assert supported == sorted(supported)
    assert {"Gemm", "MatMul", "Relu", "Softplus", "Gelu", "Concat", "Split", "Slice", "Reshape", "Shape", "Gather",
            "LayerNormalization", "Softmax", "Where", "Cast", "Constant"} <= set(supported)


def _schema_versions(op_type: str, domain: str) -> set[int]:
    return {s.since_version for s in onnx.defs.get_all_schemas_with_history()
            if s.name == op_type and s.domain == domain}


@pytest.mark.parametrize("entry", sorted({(r.domain, r.op_type) for r in registry.registrations()
                                          if r.domain != ENCODING_DOMAIN}), ids=lambda e: e[1])
def test_registered_versions_follow_the_onnx_schema_history(entry):
    """No ONNX version of an operator, from the first one converted on, is left to an older converter by accident
    (coopnn's own domain, which holds the fused encodings, has no ONNX schemas)."""
    domain, op_type = entry
    registered = {r.since for r in registry.registrations() if (r.domain, r.op_type) == entry}
    known = _schema_versions(op_type, domain)
    assert known, f"{op_type} is not an ONNX operator"
    newest_known = max(known)
    assert {v for v in registered if v <= newest_known} <= known
    assert {v for v in known if v >= min(registered)} <= registered
