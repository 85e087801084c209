"""The autograd function of `coopnn.torch` modules: the forward pass runs coopnn's kernel on the caller's stream
(`forward.ForwardRunner`), the backward pass coopnn's training kernels (`backward.BackwardRunner`), giving the
gradients in the parameters and, where the input requires them, in the input. The output dtype is the module's
`output_dtype`, whatever the input's.

Gradients are first order: double backward (differentiating the backward pass, as training through a loss on an
input gradient would) is not supported; a backward pass asked to build a graph (`create_graph=True`) raises
`CompileError` saying so.
"""

from __future__ import annotations

import torch

from coopnn.errors import CompileError


class CoopnnForward(torch.autograd.Function):
    """y = model(x) with the parameters `params` (their `_version` says whether the kernel must re-read them)."""

    @staticmethod
    def forward(ctx, runner, backward_runner, output_dtype, x, params):
        version = params._version
        y = runner.run(x, version)
        ctx.backward_runner, ctx.version = backward_runner, version
        ctx.save_for_backward(x, params)  # torch refuses the backward pass if either changed in place since
        return y if y.dtype == output_dtype else y.to(output_dtype)

    @staticmethod
    def backward(ctx, grad_output):
        if torch.is_grad_enabled():
            raise CompileError("coopnn.torch modules give first-order gradients: their backward pass cannot be "
                               "differentiated again (create_graph=True, double backward)")
        x, params = ctx.saved_tensors
        wants_input = ctx.needs_input_grad[3]
        grad_params, grad_x = ctx.backward_runner.run(x, grad_output, params, ctx.version, wants_input)
        return None, None, None, grad_x, grad_params if ctx.needs_input_grad[4] else None
