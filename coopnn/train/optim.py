"""Optimizers over fp32 master weights keyed by parameter name: Adam and SGD with momentum, with state dicts.

The update rules are PyTorch's (torch.optim.Adam, whose weight decay adds an L2 term to the gradient, and
torch.optim.SGD with momentum, dampening and Nesterov), so training here and in PyTorch from the same start agree.
A training backend that updates on the device runs the same rule: it reads `hyperparameters()` and keeps the
per-parameter `slots` in the same shapes, so `state_dict()` means the same whichever backend trained.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from coopnn.errors import InputError, ModelFormatError


class Optimizer(ABC):
    """Updates parameters in place from their gradients; `slots` name the per-parameter state it keeps."""

    name: ClassVar[str]
    slots: ClassVar[tuple[str, ...]]

    def __init__(self) -> None:
        self.step_count = 0
        self.state: dict[str, dict[str, np.ndarray]] = {slot: {} for slot in self.slots}

    @abstractmethod
    def hyperparameters(self) -> dict[str, Any]:
        """The settings that define the update rule, as `__init__` takes them."""

    @abstractmethod
    def update_one(self, name: str, parameter: np.ndarray, gradient: np.ndarray) -> None:
        """Move one parameter (in place) along its gradient, keeping its slots."""

    def update(self, parameters: Mapping[str, np.ndarray], gradients: Mapping[str, np.ndarray]) -> None:
        """One optimizer step: every parameter (float32, changed in place) moves along its gradient."""
        self.step_count += 1
        for name, parameter in parameters.items():
            self.update_one(name, parameter, np.asarray(gradients[name], dtype=parameter.dtype))

    def slot(self, slot: str, name: str, like: np.ndarray) -> np.ndarray:
        """The `slot` state of parameter `name`, zeros shaped like it on first use."""
        return self.state[slot].setdefault(name, np.zeros_like(like))

    def state_dict(self) -> dict[str, Any]:
        """The optimizer type, its hyperparameters, its step count and copies of every slot array."""
        return {
            "type": self.name,
            "hyperparameters": self.hyperparameters(),
            "step": self.step_count,
            "slots": {slot: {k: v.copy() for k, v in arrays.items()} for slot, arrays in self.state.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take over a state from `state_dict()` of an optimizer of the same type, hyperparameters included."""
        if state.get("type") != self.name:
            raise ModelFormatError(f"optimizer state of type {state.get('type')!r} cannot load into {self.name!r}")
        slots = state.get("slots", {})
        if set(slots) - set(self.slots):
            raise ModelFormatError(f"{self.name} keeps the slots {list(self.slots)}, not {sorted(slots)}")
        try:
            restored = type(self)(**state["hyperparameters"])
            step = int(state["step"])
        except (KeyError, TypeError, ValueError, InputError) as e:
            raise ModelFormatError(f"malformed {self.name} optimizer state: {e}") from e
        self.__dict__.update(restored.__dict__)
        self.step_count = step
        self.state = {slot: {k: np.array(v, np.float32) for k, v in slots.get(slot, {}).items()} for slot in self.slots}


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InputError(message)


def _names(no_decay: Sequence[str]) -> tuple[str, ...]:
    _check(not isinstance(no_decay, str) and all(isinstance(n, str) for n in no_decay),
           f"no_decay must be a list of parameter names, not {no_decay!r}")
    return tuple(no_decay)


class Adam(Optimizer):
    """Adam (Kingma and Ba 2015) with bias correction; `weight_decay` adds weight_decay * w to each gradient of the
    parameters not named in `no_decay` (tiny-cuda-nn decays its MLP's matrices, not a grid's entries)."""

    name = "adam"
    slots = ("m", "v")

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, no_decay: Sequence[str] = ()):
        _check(lr >= 0, f"Adam lr must be >= 0, not {lr}")
        _check(len(betas) == 2 and all(0 <= b < 1 for b in betas),
               f"Adam betas must be two numbers in [0, 1), not {betas}")
        _check(eps >= 0 and weight_decay >= 0, f"Adam eps and weight_decay must be >= 0, not {eps}, {weight_decay}")
        super().__init__()
        self.lr, self.betas = float(lr), (float(betas[0]), float(betas[1]))
        self.eps, self.weight_decay, self.no_decay = float(eps), float(weight_decay), _names(no_decay)

    def hyperparameters(self) -> dict[str, Any]:
        return {"lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay,
                "no_decay": list(self.no_decay)}

    def update_one(self, name, parameter, gradient):
        beta1, beta2 = self.betas
        if self.weight_decay and name not in self.no_decay:
            gradient = gradient + self.weight_decay * parameter
        m, v = self.slot("m", name, parameter), self.slot("v", name, parameter)
        m += (1 - beta1) * (gradient - m)
        v *= beta2
        v += (1 - beta2) * gradient * gradient
        step_size = self.lr / (1 - beta1**self.step_count)
        denominator = np.sqrt(v) / np.sqrt(1 - beta2**self.step_count) + self.eps
        parameter -= step_size * m / denominator


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (PyTorch's form: the first step seeds the buffer); weight
    decay skips the parameters named in `no_decay`, as Adam's does."""

    name = "sgd"
    slots = ("momentum",)

    def __init__(self, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, no_decay: Sequence[str] = ()):
        _check(lr >= 0 and momentum >= 0 and weight_decay >= 0,
               f"SGD lr, momentum and weight_decay must be >= 0, not {lr}, {momentum}, {weight_decay}")
        _check(not nesterov or (momentum > 0 and dampening == 0), "SGD nesterov needs momentum > 0 and no dampening")
        super().__init__()
        self.lr, self.momentum, self.dampening = float(lr), float(momentum), float(dampening)
        self.weight_decay, self.nesterov, self.no_decay = float(weight_decay), bool(nesterov), _names(no_decay)

    def hyperparameters(self) -> dict[str, Any]:
        return {"lr": self.lr, "momentum": self.momentum, "dampening": self.dampening,
                "weight_decay": self.weight_decay, "nesterov": self.nesterov, "no_decay": list(self.no_decay)}

    def update_one(self, name, parameter, gradient):
        if self.weight_decay and name not in self.no_decay:
            gradient = gradient + self.weight_decay * parameter
        if self.momentum:
            buffer = self.state["momentum"].get(name)
            if buffer is None:
                buffer = self.state["momentum"][name] = gradient.copy()
            else:
                buffer *= self.momentum
                buffer += (1 - self.dampening) * gradient
            gradient = gradient + self.momentum * buffer if self.nesterov else buffer
        parameter -= self.lr * gradient


OPTIMIZERS: Mapping[str, type[Optimizer]] = {cls.name: cls for cls in (Adam, SGD)}


def get_optimizer(optimizer: str | Optimizer | None) -> Optimizer:
    """The optimizer registered as `optimizer`, with its default settings (an Optimizer is returned as it is; None
    gives Adam's defaults)."""
    if optimizer is None:
        return Adam()
    if isinstance(optimizer, Optimizer):
        return optimizer
    try:
        return OPTIMIZERS[optimizer]()
    except (KeyError, TypeError):
        raise InputError(f"unknown optimizer {optimizer!r}; optimizers: {', '.join(OPTIMIZERS)}, or an Optimizer "
                         f"such as coopnn.train.optim.Adam(lr=1e-2)") from None
