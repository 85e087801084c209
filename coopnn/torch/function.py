"""The autograd function of `coopnn.torch` modules: the forward pass runs coopnn's kernel on the caller's stream
(`forward.ForwardRunner`); the output dtype is the module's `output_dtype`, whatever the input's.

Backward: this version of `coopnn.torch` computes forward passes only. A backward pass through a module raises
`CompileError` saying so (train with `coopnn.Trainer`, or keep the module's output out of the loss's graph), rather
than giving gradients of zero; double backward is not supported either.
"""

from __future__ import annotations

import torch

from coopnn.errors import CompileError


class CoopnnForward(torch.autograd.Function):
    """y = model(x) with the parameters `params` (their `_version` says whether the kernel must re-read them)."""

    @staticmethod
    def forward(ctx, runner, output_dtype, x, params):
        y = runner.run(x, params._version)
        return y if y.dtype == output_dtype else y.to(output_dtype)

    @staticmethod
    def backward(ctx, grad_output):
        raise CompileError("coopnn.torch modules run forward passes only: gradients through them (for the "
                           "parameters or the inputs) are not computed in this version; train with coopnn.Trainer, "
                           "or call the module under torch.no_grad()")
