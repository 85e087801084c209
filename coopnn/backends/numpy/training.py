"""The numpy training backend: float32 forward and analytic backward passes over the graph IR, numpy optimizers.

It is the oracle other training backends are compared with: the same graph, seed and batches give the loss curve
every backend must reproduce within tolerance.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from coopnn.graph.ir import Graph
from coopnn.train.backward import GradientProgram
from coopnn.train.host_data import HostData, host_steps
from coopnn.train.losses import Loss
from coopnn.train.optim import Optimizer


class NumpyTrainingSession:
    def __init__(self, graph: Graph, loss: Loss, optimizer: Optimizer):
        self.program = GradientProgram(graph)
        self.loss_function = loss
        self.optimizer = optimizer
        self.master = {name: np.array(graph.constants[constant], np.float32)
                       for name, constant in self.program.parameters.items()}
        self.steps_run = 0  # of the last run_steps (`host_steps` counts them)

    def _constants(self) -> dict[str, np.ndarray]:
        constants = dict(self.program.graph.constants)
        constants.update((constant, self.master[name]) for name, constant in self.program.parameters.items())
        return constants

    def loss_and_gradients(self, feeds: Mapping[str, np.ndarray],
                           targets: Mapping[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
        """The batch loss (summed over the targeted outputs) and its gradient for every parameter."""
        tape = self.program.forward(feeds, self._constants())
        outputs = self.program.outputs(tape, _batch(targets))
        total, output_gradients = 0.0, {}
        for name, target in targets.items():
            value, output_gradients[name] = self.loss_function.value_and_gradient(outputs[name], target)
            total += value
        return total, self.program.backward(tape, output_gradients)

    def step(self, feeds, targets) -> float:
        loss, gradients = self.loss_and_gradients(feeds, targets)
        self.optimizer.update(self.master, gradients)
        return loss

    def upload_data(self, feeds, targets) -> HostData:
        return HostData(feeds, targets)

    def run_steps(self, data: HostData, first_step: int, steps: int, batch_size: int, seed: int,
                  on_losses: Callable[[np.ndarray], None] | None = None) -> np.ndarray:
        return host_steps(self, data, first_step, steps, batch_size, seed, on_losses)

    def loss(self, feeds, targets) -> float:
        outputs = self.program.outputs(self.program.forward(feeds, self._constants()), _batch(targets))
        return sum(self.loss_function.value(outputs[name], target) for name, target in targets.items())

    def parameters(self) -> dict[str, np.ndarray]:
        return {name: array.copy() for name, array in self.master.items()}

    def load_parameters(self, values: Mapping[str, np.ndarray]) -> None:
        for name, array in values.items():
            self.master[name][...] = array

    def optimizer_state(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state: Mapping[str, Any]) -> None:
        self.optimizer.load_state_dict(state)

    def close(self) -> None:
        self.master = {}


def _batch(targets: Mapping[str, np.ndarray]) -> int:
    return next(iter(targets.values())).shape[0]
