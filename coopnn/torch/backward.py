"""`BackwardRunner`: a module's backward pass, on the GPU with coopnn's training kernels: given the module's input
and the upstream gradient dL/dy, the gradients in the parameter vector (laid out as `params`) and in the input.

The runner keeps a training session of the model's graph for each kind of pass it was asked for (made on the first
such pass, with the `UpstreamGradient` loss and an optimizer that never runs, on the model's backend): with the sync
member's `INPUT_GRADIENT_OPTIONS` where the input's gradient is wanted (a step kernel that writes it), with its
`BACKWARD_OPTIONS` where it is not (the backend's fastest step kernel for the model, such as coopvec's tiled one); one
session serves both where the two agree. With the module's parameters in memory CUDA shares (`master`) and CUDA
tensors, every pass runs on the GPU alone (`gpu_backward.GpuBackward`: the parameters reach the session's weights,
and the gradients the caller's stream, in shared memory). Elsewhere (host tensors, as the lavapipe tests pass, or a
session that shares no memory with CUDA) the pass goes through the host (`coopnn.train.gpu.backward_pass.backward`),
the parameters loaded into the session whenever torch changed them. An empty batch's gradients are zero, with
nothing run. First-order only (`function.CoopnnForward` refuses double backward). After `close` a pass raises
ModelClosedError.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from coopnn import backends
from coopnn.errors import CompileError, ModelClosedError
from coopnn.interop import tensors
from coopnn.torch.gpu_backward import GpuBackward
from coopnn.torch.session_regions import trained_parameters
from coopnn.train.gpu.backward_pass import backward, refuse_input_gradients
from coopnn.train.losses import UpstreamGradient
from coopnn.train.optim import SGD


@dataclass
class SessionPasses:
    """One training session of a runner, the GPU pass beside it (`on_gpu`, or why there is none) and the parameters'
    version the session holds through the host."""

    session: Any
    on_gpu: GpuBackward | None = None
    gpu_unavailable: str | None = None
    version: int | None = None

    def close(self) -> None:
        if self.on_gpu is not None:
            self.on_gpu.close()
            self.on_gpu = None
        self.session.close()


class BackwardRunner:
    """Backward passes of `model` (a coopnn Model) for a module whose parameters are laid out by `layout`, held in
    shared memory by `master` (a `MasterWeights`; None: host tensors only)."""

    def __init__(self, model, layout, member, master=None):
        self.model = model
        self.layout = layout
        self.master = master
        self.member = member
        self.input_name = model.inputs[0].name
        self.sessions: dict[tuple, SessionPasses] = {}  # by the options they were made with
        self.last: SessionPasses | None = None  # the one the last pass ran on
        self._closed = False
        self._lock = threading.Lock()

    def options(self, input_gradient: bool) -> dict[str, str]:
        """The training options of the session for passes with or without the input's gradient."""
        if self.member is None:
            return {}
        return dict(self.member.INPUT_GRADIENT_OPTIONS if input_gradient else self.member.BACKWARD_OPTIONS)

    def _passes_for(self, input_gradient: bool) -> SessionPasses:
        options = self.options(input_gradient)
        key = tuple(sorted(options.items()))
        if key not in self.sessions:
            self.sessions[key] = self._made(options)
        return self.sessions[key]

    def _made(self, options: dict[str, str]) -> SessionPasses:
        backend = backends.training_backend(self.model.backend)
        session = backend.prepare_training(self.model.graph, UpstreamGradient(), SGD(lr=0.0),
                                           device=self.model.device, **options)
        missing = sorted(set(self.layout.entries) - trained_parameters(session.plan))
        if missing:
            session.close()
            raise CompileError(f"coopnn's training kernels give no gradient in {', '.join(missing)} of model "
                               f"{self.model.graph.name!r} (they train the Linear layers after a fixed input "
                               f"stage); freeze them, or train the model with coopnn.Trainer")
        made = SessionPasses(session)
        if self.master is not None:
            made.gpu_unavailable = GpuBackward.reason_unavailable(session, self.master)
            if made.gpu_unavailable is None:
                made.on_gpu = GpuBackward(session, self.master, self.input_name)
        return made

    def run(self, x: torch.Tensor, upstream: torch.Tensor, params: torch.Tensor, version: int,
            input_gradient: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the gradient in `params`, laid out as it is; the gradient in `x`, or None without `input_gradient`),
        with the parameters as of `version` (their `_version` at the forward pass)."""
        with self._lock:
            if self._closed:
                raise ModelClosedError("this coopnn.torch module is closed; its backward pass cannot run")
            passes = self.last = self._passes_for(input_gradient)
            session = passes.session
            if input_gradient:
                refuse_input_gradients(session)
            if len(x) == 0:  # torch asks for the gradients of an empty batch too: zero, with nothing to run
                return (torch.zeros(self.layout.size, dtype=torch.float32, device=params.device),
                        torch.zeros_like(x) if input_gradient else None)
            if passes.on_gpu is not None and x.is_cuda and upstream.is_cuda:
                return passes.on_gpu.run(x, upstream, version, input_gradient)
            if version != passes.version:
                session.load_parameters(self.layout.views(params.detach().cpu().numpy()))
                passes.version = version
            gradients, rows = backward(session, {self.input_name: self._host(x)}, self._host(upstream),
                                       input_gradient)
        flat = torch.from_numpy(self.layout.flatten(gradients)).to(params.device)
        return flat, None if rows is None else torch.from_numpy(np.ascontiguousarray(rows)).to(x.device, x.dtype)

    @staticmethod
    def _host(t: torch.Tensor) -> np.ndarray:
        return tensors.to_host("backward input", t).astype(np.float32, copy=False)

    def close(self) -> None:
        """Release the sessions (after a pass in flight on another thread); later passes raise ModelClosedError."""
        with self._lock:
            self._closed = True
            for passes in self.sessions.values():
                passes.close()
            self.sessions.clear()
