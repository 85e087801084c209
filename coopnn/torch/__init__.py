"""coopnn networks and encodings as PyTorch modules, with tiny-cuda-nn's interface: `Network`, `Encoding`,
`NetworkWithInputEncoding` and `from_model(model)` (docs/torch.md).

This package imports PyTorch; `import coopnn` never imports it. The modules run on CUDA tensors through coopnn's
CUDA bridge (`coopnn.interop`); on a machine without CUDA the package imports and constructing a module raises
`coopnn.errors.BackendUnavailableError` with the reason.
"""

from __future__ import annotations

from coopnn.torch.modules import (Encoding, Module, Network, NetworkWithInputEncoding, cuda_unavailable_reason,
                                  from_model)

__all__ = ["Encoding", "Module", "Network", "NetworkWithInputEncoding", "cuda_unavailable_reason", "from_model"]
