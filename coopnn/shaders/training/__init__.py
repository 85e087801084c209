"""Training kernels: the buffers a training step shares between its dispatches and the shaders that are not per model
(weight gradients from the tape, reduction of partial gradients, the optimizer)."""
