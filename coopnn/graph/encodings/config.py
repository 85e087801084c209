"""Reading one encoding's tiny-cuda-nn config: typed keys with defaults, each checked, and an InputError naming the
key (with its path inside a Composite) for a wrong type, a value out of range or a key the encoding does not take."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from coopnn.errors import InputError


def is_finite_number(value: Any) -> bool:
    """Whether a config's `value` is an int or float (not a bool) that float holds: not NaN, an infinity or an int
    past float's range."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and abs(value) <= sys.float_info.max


class ConfigReader:
    """The keys of one encoding config, read one at a time; `finish()` refuses the keys nobody read."""

    # keys every encoding config may hold: its name, and the input range a Composite gives it
    COMMON = ("otype", "n_dims_to_encode", "dims_to_encode_begin")

    def __init__(self, config: Mapping[str, Any], where: str):
        if not isinstance(config, Mapping):
            raise InputError(f"{where}: an encoding config is a JSON object (a dict), not {config!r}")
        self.config = config
        self.where = where
        self.read: set[str] = set(self.COMMON)

    def fail(self, key: str, message: str) -> None:
        raise InputError(f"{self.where}: key {key!r} {message}")

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        self.read.add(key)
        value = self.config.get(key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be a whole number, not {value!r}")
        if not low <= value <= high:
            self.fail(key, f"is {value}; supported: {low} to {high}")
        return int(value)

    def number(self, key: str, default: float, positive: bool = False) -> float:
        self.read.add(key)
        value = self.config.get(key, default)
        if not is_finite_number(value):
            self.fail(key, f"must be a finite number, not {value!r}")
        if positive and not value > 0:
            self.fail(key, f"must be > 0, not {value!r}")
        return float(value)

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        """One of `choices`, matched case-insensitively as tiny-cuda-nn matches names; returned as spelt there."""
        self.read.add(key)
        value = self.config.get(key, default)
        for choice in choices:
            if isinstance(value, str) and value.lower() == choice.lower():
                return choice
        self.fail(key, f"is {value!r}; supported: {', '.join(choices)}")

    def flag(self, key: str, default: bool) -> bool:
        self.read.add(key)
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {value!r}")
        return value

    def has(self, key: str) -> bool:
        return key in self.config

    def raw(self, key: str) -> Any:
        self.read.add(key)
        return self.config.get(key)

    def finish(self) -> None:
        unknown = sorted(set(self.config) - self.read)
        if unknown:
            self.fail(unknown[0], f"is not a key this encoding takes (it takes: {', '.join(sorted(self.read))})")
