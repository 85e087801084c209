"""`ForwardRunner`: a module's forward pass on CUDA tensors, through the model's CUDA bridge
(`coopnn.interop.cuda_bridge`), with the model's weights refreshed from the parameter vector whenever torch changed it.

Refresh. torch counts in-place changes of a tensor (`Tensor._version`: an optimizer step, `copy_`, `load_state_dict`
all count). When the count moved since the weights were last refreshed, the run records the backend's refresh
(`coopnn.torch.sync`) in front of its dispatch, in the same submission, which waits for the caller's stream: so it
reads the vector as every earlier operation on that stream left it, and no host wait is added. Where the model holds
a parameter other than unchanged in an entry of its own, or in a layout no member writes, the model takes the vector
through the host instead (read back on the caller's stream, then prepared anew: slow, and said so in
`host_refreshes`).
"""

from __future__ import annotations

import threading

import torch

from coopnn.interop.cuda_bridge import bridge_for
from coopnn.torch import sync
from coopnn.torch.master import MasterWeights


class ForwardRunner:
    """Runs `model` (a coopnn Model on a Vulkan backend, owned by the module) on CUDA tensors with the parameters of
    `master`."""

    def __init__(self, model, master: MasterWeights, member):
        self.model = model
        self.master = master
        self.member = member
        self.input_name = model.inputs[0].name
        self.output_name = model.outputs[0].name
        self.host_refreshes = 0  # times the weights went through the host
        self._synced_version = master.tensor._version
        self._plans: dict[int, object] = {}  # id of an executable -> its refresh prologue (None: through the host)
        self._lock = threading.Lock()

    def _prologue(self, executable):
        key = id(executable)
        if key not in self._plans:
            held = sync.held_parameters(executable, self.model.graph)
            self._plans = {key: None if held is None or self.member is None
                           else self.member.prologue(executable, self.master, held)}
        return self._plans[key]

    def run(self, x: torch.Tensor, version: int) -> torch.Tensor:
        """The model's output for `x` on the current stream, with the parameters as of `version` (their
        `_version`)."""
        with self._lock:
            executable = self.model._current_executable()
            prologue = None
            # an empty batch dispatches nothing, so the bridge would drop the refresh's prologue
            stale = version != self._synced_version and x.numel() > 0
            if stale:
                prologue = self._prologue(executable)
                if prologue is None:
                    self._refresh_through_host()
                    executable = self.model._current_executable()
                elif self.member.READS_HALVES:
                    self.master.refresh_mirror()
            outputs = bridge_for(executable).run({self.input_name: x}, prologue)
            if stale:
                self._synced_version = version
            return outputs[self.output_name]

    def _refresh_through_host(self) -> None:
        values = self.master.layout.views(self.master.tensor.detach().cpu().numpy())
        self.model.set_parameters(values)
        self.host_refreshes += 1
