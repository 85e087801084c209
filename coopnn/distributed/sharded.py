"""`ShardedModel`: one batch run across several devices, each holding its own copy of the model; the batch is cut
into contiguous shards, the shards run at once (a thread each), and the outputs come back in the input's order."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

import numpy as np

from coopnn.distributed.batch_shards import joined, shard_bounds, shard_of
from coopnn.distributed.devices import all_devices
from coopnn.errors import InputError
from coopnn.interop.tensors import is_cuda_array
from coopnn.model import Model


class ShardedModel:
    """Runs `models` (the same network on different devices, or several copies on one) as one model."""

    def __init__(self, models: Sequence[Model]):
        if not models:
            raise InputError("a ShardedModel needs at least one model")
        signatures = {(tuple(m.inputs), tuple(m.outputs)) for m in models}
        if len(signatures) > 1:
            raise InputError(f"the models of a ShardedModel must have the same inputs and outputs, not "
                             f"{sorted(map(str, signatures))}")
        self.models = list(models)
        self._pool = ThreadPoolExecutor(len(self.models), thread_name_prefix="coopnn-shard")

    @classmethod
    def load(cls, path: str | os.PathLike | bytes, devices: str | Sequence[int | str] = "all",
             **load_options: Any) -> "ShardedModel":
        """`coopnn.load(path, device=d, **load_options)` for each of `devices`: "all" (every GPU of the host) or a
        list of device indices or names (one may appear more than once)."""
        from coopnn.model import load

        chosen = all_devices() if devices == "all" else list(devices)
        if not chosen or isinstance(devices, str) and devices != "all":
            raise InputError(f"devices must be 'all' or a non-empty list of devices, not {devices!r}")
        models: list[Model] = []
        try:
            for device in chosen:
                models.append(load(path, device=device, **load_options))
        except BaseException:
            for model in models:
                model.close()
            raise
        return cls(models)

    @property
    def inputs(self):
        return self.models[0].inputs

    @property
    def outputs(self):
        return self.models[0].outputs

    def run(self, x: Any) -> Any:
        """`Model.run` on the batch `x` (an array, or a dict by input name; numpy or PyTorch CUDA tensors), its
        shards on the models at once; what one model's `run` returns for the whole batch."""
        named = self.models[0].named_inputs(x)
        rows = {len(v) for v in named.values()}
        if len(rows) != 1:
            raise InputError(f"the inputs of one batch must have the same number of samples, not {sorted(rows)}")
        jobs = [(m, a, b) for m, (a, b) in zip(self.models, shard_bounds(rows.pop(), len(self.models)))]
        if not jobs:  # an empty batch: one model gives the empty outputs their shapes
            return self.models[0].run(x)
        if any(is_cuda_array(v) for v in named.values()):
            from coopnn.distributed.cuda_shards import run_cuda_shards

            return run_cuda_shards(self._pool, jobs, named, x)
        parts = list(self._pool.map(lambda job: job[0].run(shard_of(named, x, job[1], job[2])), jobs))
        return joined(parts, np.concatenate)

    def close(self) -> None:
        """Close every model; the ShardedModel cannot run after."""
        self._pool.shutdown()
        for model in self.models:
            model.close()

    def __enter__(self) -> "ShardedModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

