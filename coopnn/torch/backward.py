"""`BackwardRunner`: a module's backward pass, on the GPU with coopnn's training kernels (`coopnn.train.gpu.
backward_pass`): given the module's input and the upstream gradient dL/dy, the gradients in the parameter vector
(laid out as `params`) and in the input.

The runner keeps one training session of the model's graph (made on the first backward pass, with the
`UpstreamGradient` loss and an optimizer that never runs, on the model's backend with its sync member's
`BACKWARD_OPTIONS`), whose parameters it sets from `params` whenever torch changed them since (through the host).
The input and the upstream gradient reach the session on the GPU where it shares memory with CUDA (as `Trainer.step`
takes CUDA tensors); the gradients come back through the host, so the hand-off is not yet the GPU-only one the
forward pass has. First-order only (`function.CoopnnForward` refuses double backward).
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from coopnn import backends
from coopnn.errors import CompileError
from coopnn.interop import tensors
from coopnn.train.gpu.backward_pass import backward
from coopnn.train.losses import UpstreamGradient
from coopnn.train.optim import SGD


class BackwardRunner:
    """Backward passes of `model` (a coopnn Model) for a module whose parameters are laid out by `layout`."""

    def __init__(self, model, layout, member):
        self.model = model
        self.layout = layout
        self.options = {} if member is None else dict(member.BACKWARD_OPTIONS)
        self.input_name = model.inputs[0].name
        self._session = None
        self._version: int | None = None
        self._lock = threading.Lock()

    def _session_for(self):
        if self._session is None:
            backend = backends.training_backend(self.model.backend)
            self._session = backend.prepare_training(self.model.graph, UpstreamGradient(), SGD(lr=0.0),
                                                     device=self.model.device, **self.options)
        return self._session

    def run(self, x: torch.Tensor, upstream: torch.Tensor, params: torch.Tensor, version: int,
            input_gradient: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the gradient in `params`, laid out as it is; the gradient in `x`, or None without `input_gradient`),
        with the parameters as of `version` (their `_version` at the forward pass)."""
        with self._lock:
            session = self._session_for()
            if version != self._version:
                session.load_parameters(self.layout.views(params.detach().cpu().numpy()))
                self._version = version
            feeds, upstream_rows = self._batch(session, x, upstream)
            gradients, rows = backward(session, feeds, upstream_rows, input_gradient)
        missing = sorted(set(self.layout.entries) - set(gradients))
        if missing:
            raise CompileError(f"coopnn's training kernels give no gradient in {', '.join(missing)} of model "
                               f"{self.model.graph.name!r} (they train the Linear layers after a fixed input stage); "
                               f"freeze them, or train the model with coopnn.Trainer")
        flat = torch.from_numpy(self.layout.flatten(gradients)).to(params.device)
        return flat, None if rows is None else torch.from_numpy(np.ascontiguousarray(rows)).to(x.device, x.dtype)

    def _batch(self, session, x: torch.Tensor, upstream: torch.Tensor):
        """The input and the upstream gradient as the session reads them: CUDA rows it copies on the GPU (ordered
        after the caller's stream, as `Trainer.step` hands CUDA tensors over) where it shares memory with CUDA,
        else host arrays."""
        if x.is_cuda and upstream.is_cuda and session.steps_take_cuda_arrays:
            return ({self.input_name: tensors.as_cuda_input(self.input_name, x, tuple(x.shape[1:]), "f32")},
                    tensors.as_cuda_input("upstream gradient", upstream, tuple(upstream.shape[1:]), "f32"))
        return {self.input_name: x.detach().float().cpu().numpy()}, upstream.detach().float().cpu().numpy()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
