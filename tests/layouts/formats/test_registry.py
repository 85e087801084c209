"""The weight-format registry: every module of the package that defines FORMAT is found, names resolve to one
object, objects pass through, and an unknown name is an InputError naming the formats there are."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import coopnn.layouts.formats as formats
from coopnn.errors import InputError
from coopnn.layouts.formats import WeightFormat, format_names, weight_format


def test_every_format_module_is_registered_under_its_name():
    defined = {}
    for module in pkgutil.iter_modules(formats.__path__):
        fmt = getattr(importlib.import_module(f"{formats.__name__}.{module.name}"), "FORMAT", None)
        if fmt is not None:
            defined[module.name] = fmt
    assert {"fp32", "fp16"} <= set(defined)
    assert format_names() == sorted(defined)
    for module_name, fmt in defined.items():
        assert fmt.name == module_name, "a format's module is named after it"
        assert weight_format(module_name) is fmt


def test_a_format_object_passes_through():
    fmt = weight_format("fp16")
    assert isinstance(fmt, WeightFormat) and weight_format(fmt) is fmt


@pytest.mark.parametrize("name", ["int3", "FP16", "", "auto", 16, None])
def test_an_unknown_name_is_a_typed_error_naming_the_formats(name):
    with pytest.raises(InputError, match=f"unknown weight format {name!r}; supported: fp16, fp32"):
        weight_format(name)
