"""What an export writes: `Model.export_shader` and `export_shader` write the same files, an export is the same
bytes every time, and a retrained model (same architecture, other weights) changes only the weights file and the
digests that name it, as docs/shader-export.md says."""

from __future__ import annotations

import json

from coopnn.export import export_shader
from tests.export.harness import texture_model


def test_the_model_method_writes_what_the_function_writes(tmp_path):
    model = texture_model()
    by_method = model.export_shader(tmp_path / "method", lang="slang", name="tex")
    by_function = export_shader(model.graph, tmp_path / "function", lang="slang", name="tex")
    assert [p.name for p in by_method.files] == [p.name for p in by_function.files]
    for a, b in zip(by_method.files, by_function.files):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_retraining_changes_only_the_weights(tmp_path):
    first = export_shader(texture_model(seed=1).graph, tmp_path / "first", name="tex")
    second = export_shader(texture_model(seed=2).graph, tmp_path / "second", name="tex")
    assert first.source.read_text() == second.source.read_text()
    assert first.helper.read_text() == second.helper.read_text()
    assert first.weights.read_bytes() != second.weights.read_bytes()
    changed = [a for a, b in zip(first.header.read_text().splitlines(), second.header.read_text().splitlines())
               if a != b]
    assert len(changed) == 1 and changed[0].startswith("#define TEX_WEIGHTS_FNV1A64")
    one, two = (json.loads(e.manifest.read_text()) for e in (first, second))
    for digest in ("sha256", "fnv1a64"):
        assert one["weights"].pop(digest) != two["weights"].pop(digest)
    assert one == two
