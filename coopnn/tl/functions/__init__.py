"""Functions written in the tensor language used inside models: elementwise activations, input encodings and losses
whose body is fused into the model's kernels (coopnn's extension: a `func` with results, docs/tensor-language.md).

    act = coopnn.tl.activation(TEXT)            # an Activation for coopnn.mlp(..., activation=act)
    enc = coopnn.tl.encoding(TEXT)              # an encoding config for coopnn.mlp(..., encoding=enc)
    loss = coopnn.tl.loss(TEXT)                 # a Loss for coopnn.Trainer(..., loss=loss)

`function.py` reads and checks the text and keeps what may be fused; `evaluate.py` runs it on numpy arrays with the
interpreter (the oracle); `lower.py` writes it with a kernel writer (kernel instructions, or SPIR-V scalars);
`differentiate.py` derives its derivative function; `uses.py` makes the activation, encoding and loss of a text.
"""

from coopnn.tl.functions.uses import activation, encoding, loss

__all__ = ["activation", "encoding", "loss"]
