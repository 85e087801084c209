"""Training: losses, optimizers, reverse mode over the graph IR, the GPU training sessions' kernels and bookkeeping
(`gpu`), and checkpoint files. The public names are re-exported by `coopnn`; the `Trainer` that drives a backend's
session is `coopnn.trainer`, above the backends and `coopnn.model` it imports.

Nothing is imported by this file, so importing a module here loads only what that module needs.
"""
