"""Both languages and both variants of an export compile with the packaged compilers (glslang and Slang from the
slangpy wheel) in every stage the tests use, and every module passes spirv-val."""

from __future__ import annotations

import pytest

from coopnn.errors import CompileError
from coopnn.export import export_shader
from coopnn.export.compilers import versions
from coopnn.export.render import texture_shaders
from tests.export.harness import LANGUAGES, compute_shader, require_compilers, spirv_val, texture_model

VARIANTS = ("portable", "coopvec")


@pytest.fixture(scope="module", autouse=True)
def _compilers():
    require_compilers()


def test_the_compilers_are_the_packaged_versions():
    found = versions()
    assert found["slangpy"] == "0.43.1"
    major, minor = map(int, found["glslang"].split(".")[:2])
    assert (major, minor) >= (15, 1)  # GL_NV_cooperative_vector arrived in glslang 15.1
    assert found["slang"].startswith("2026.")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("weights", ["fp16", "fp32"])
def test_every_variant_compiles_and_validates(tmp_path, lang, variant, weights):
    exported = export_shader(texture_model().graph, tmp_path / "export", lang=lang, name="tex", weights=weights)
    if variant == "coopvec" and weights == "fp32":
        with pytest.raises(CompileError, match="cooperative-vector variant reads fp16"):
            compute_shader(exported, variant)
        return
    modules = [compute_shader(exported, variant), *texture_shaders(exported.manifest, variant)]
    for words in modules:
        spirv_val(words, tmp_path)
    if weights == "fp16":
        assert ("coopVecMatMulAddNV" if lang == "glsl" else "coopVecMatMulAdd") in exported.source.read_text()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_coopvec_variant_uses_cooperative_vectors_and_specialised_offsets(tmp_path, lang):
    import subprocess

    from tests.devices import spirv_tool

    exported = export_shader(texture_model().graph, tmp_path / "export", lang=lang, name="tex")
    words = compute_shader(exported, "coopvec")
    (tmp_path / "m.spv").write_bytes(words)
    text = subprocess.run([spirv_tool("spirv-dis"), str(tmp_path / "m.spv")], capture_output=True, text=True,
                          check=True).stdout
    assert text.count("OpCooperativeVectorMatrixMulAddNV") == 3
    assert text.count("SpecId") == 6
    assert "ReplicatedComposites" not in text  # the zero tail is filled element by element


def test_symbols_of_two_exports_do_not_clash(tmp_path):
    from coopnn.export.compilers import compile_glsl

    export_shader(texture_model().graph, tmp_path, lang="glsl", name="albedo")
    export_shader(texture_model(seed=2).graph, tmp_path, lang="glsl", name="normal")
    text = """#version 460
#extension GL_GOOGLE_include_directive : require
#define NORMAL_WEIGHTS_BINDING 1
#define NORMAL_SPEC_ID 6
#include "albedo.glsl"
#include "normal.glsl"
layout(location = 0) out vec4 color;
void main() {
    float uv[2] = float[2](gl_FragCoord.y, gl_FragCoord.x);
    float a[3];
    float n[3];
    albedo_eval(uv, a);
    normal_eval(uv, n);
    color = vec4(a[0] * n[0], a[1] * n[1], a[2] * n[2], 1.0);
}
"""
    spirv_val(compile_glsl(text, "fragment", path=tmp_path / "both.frag"), tmp_path)
