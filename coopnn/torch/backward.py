"""`BackwardRunner`: a module's backward pass, on the GPU with coopnn's training kernels: given the module's input
and the upstream gradient dL/dy, the gradients in the parameter vector (laid out as `params`) and in the input.

The runner keeps one training session of the model's graph (made on the first backward pass, with the
`UpstreamGradient` loss and an optimizer that never runs, on the model's backend with its sync member's
`BACKWARD_OPTIONS`). With the module's parameters in memory CUDA shares (`master`) and CUDA tensors, every pass runs
on the GPU alone (`gpu_backward.GpuBackward`: the parameters reach the session's weights, and the gradients the
caller's stream, in shared memory). Elsewhere (host tensors, as the lavapipe tests pass, or a session that shares no
memory with CUDA) the pass goes through the host (`coopnn.train.gpu.backward_pass.backward`), the parameters loaded
into the session whenever torch changed them. An empty batch's gradients are zero, with nothing run. First-order
only (`function.CoopnnForward` refuses double backward). After `close` a pass raises ModelClosedError.
"""

from __future__ import annotations

import threading

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


class BackwardRunner:
    """Backward passes of `model` (a coopnn Model) for a module whose parameters are laid out by `layout`, held in
    shared memory by `master` (a `MasterWeights`; None: host tensors only)."""

    def __init__(self, model, layout, member, master=None):
        self.model = model
        self.layout = layout
        self.master = master
        self.options = {} if member is None else dict(member.BACKWARD_OPTIONS)
        self.input_name = model.inputs[0].name
        self.on_gpu: GpuBackward | None = None  # made with the session where it can run
        self.gpu_unavailable: str | None = None  # why not, where it cannot
        self._session = None
        self._version: int | None = None
        self._closed = False
        self._lock = threading.Lock()

    def _session_for(self):
        if self._session is None:
            backend = backends.training_backend(self.model.backend)
            session = backend.prepare_training(self.model.graph, UpstreamGradient(), SGD(lr=0.0),
                                               device=self.model.device, **self.options)
            missing = sorted(set(self.layout.entries) - trained_parameters(session.plan))
            if missing:
                session.close()
                raise CompileError(f"coopnn's training kernels give no gradient in {', '.join(missing)} of model "
                                   f"{self.model.graph.name!r} (they train the Linear layers after a fixed input "
                                   f"stage); freeze them, or train the model with coopnn.Trainer")
            self._session = session
            if self.master is not None:
                self.gpu_unavailable = GpuBackward.reason_unavailable(session, self.master)
                if self.gpu_unavailable is None:
                    self.on_gpu = GpuBackward(session, self.master, self.input_name)
        return self._session

    def run(self, x: torch.Tensor, upstream: torch.Tensor, params: torch.Tensor, version: int,
            input_gradient: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the gradient in `params`, laid out as it is; the gradient in `x`, or None without `input_gradient`),
        with the parameters as of `version` (their `_version` at the forward pass)."""
        with self._lock:
            if self._closed:
                raise ModelClosedError("this coopnn.torch module is closed; its backward pass cannot run")
            session = self._session_for()
            if input_gradient:
                refuse_input_gradients(session)
            if len(x) == 0:  # torch asks for the gradients of an empty batch too: zero, with nothing to run
                return (torch.zeros(self.layout.size, dtype=torch.float32, device=params.device),
                        torch.zeros_like(x) if input_gradient else None)
            if self.on_gpu is not None and x.is_cuda and upstream.is_cuda:
                return self.on_gpu.run(x, upstream, version, input_gradient)
            if version != self._version:
                session.load_parameters(self.layout.views(params.detach().cpu().numpy()))
                self._version = version
            gradients, rows = backward(session, {self.input_name: self._host(x)}, self._host(upstream),
                                       input_gradient)
        flat = torch.from_numpy(self.layout.flatten(gradients)).to(params.device)
        return flat, None if rows is None else torch.from_numpy(np.ascontiguousarray(rows)).to(x.device, x.dtype)

    @staticmethod
    def _host(t: torch.Tensor) -> np.ndarray:
        return tensors.to_host("backward input", t).astype(np.float32, copy=False)

    def close(self) -> None:
        """Release the session (after a pass in flight on another thread); later passes raise ModelClosedError."""
        with self._lock:
            self._closed = True
            if self.on_gpu is not None:
                self.on_gpu.close()
                self.on_gpu = None
            if self._session is not None:
                self._session.close()
                self._session = None
