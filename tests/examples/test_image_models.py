"""The models of `coopnn fit-image --encoding`: a JSON file that cannot be read, or whose optimizer is not an
object, is a one-line CoopnnError, with or without --lr."""

from __future__ import annotations

import pytest

from coopnn.errors import CoopnnError
from coopnn.examples.image_models import image_model


def _model(encoding, lr=None):
    return image_model(str(encoding), hidden=(16,), octaves=2, lr=lr, seed=0, backend="numpy", weights="fp32")


@pytest.mark.parametrize("text, message", [("[" * 100000, "neither frequency, hashgrid nor a readable JSON file"),
                                           ("{bad", "readable JSON file"), ("[1]", "holds list")],
                         ids=["deep", "malformed", "list"])
def test_an_unreadable_config_file_is_a_coopnn_error(tmp_path, text, message):
    config = tmp_path / "config.json"
    config.write_text(text)
    with pytest.raises(CoopnnError, match=message):
        _model(config)


def test_a_directory_or_a_missing_file_is_a_coopnn_error(tmp_path):
    for path in (tmp_path, tmp_path / "missing.json"):
        with pytest.raises(CoopnnError, match="readable JSON file"):
            _model(path)


@pytest.mark.parametrize("optimizer", ['"Adam"', "null", "[1]"])
@pytest.mark.parametrize("lr", [None, 0.01])
def test_an_optimizer_that_is_not_an_object_is_refused_by_key(tmp_path, optimizer, lr):
    config = tmp_path / "config.json"
    config.write_text(f'{{"optimizer": {optimizer}}}')
    with pytest.raises(CoopnnError, match="key 'optimizer' must be a JSON object"):
        _model(config, lr)
