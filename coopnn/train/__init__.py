"""Training: losses, optimizers, reverse mode over the graph IR, training backends, the Trainer, `mlp` models built
without ONNX, ONNX export, and weight and checkpoint files. The public names are re-exported by `coopnn`.

Modules import lazily from here (nothing is imported by this file) because `coopnn.model` reads
`coopnn.graph.parameters` while `coopnn.train.trainer` reads `coopnn.model`.
"""
