"""More than one GPU: data-parallel training (`DataParallelTrainer`, one `torchrun` process per GPU, gradients
averaged through `torch.distributed`) and sharded inference (`ShardedModel`, one model per device, one call).

PyTorch is imported only where a `torch.distributed` group is used (`coopnn.distributed.group.TorchGroup`), never by
importing this package; anything with the `ProcessGroup` methods (a test's in-process group) stands in for it.
See docs/distributed.md for the `torchrun` recipe.
"""

from coopnn.distributed.data_parallel import DataParallelTrainer
from coopnn.distributed.group import ProcessGroup, TorchGroup
from coopnn.distributed.sampling import rank_seed
from coopnn.distributed.sharded import ShardedModel

__all__ = ["DataParallelTrainer", "ProcessGroup", "ShardedModel", "TorchGroup", "rank_seed"]
