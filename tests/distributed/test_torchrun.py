"""Data-parallel training on several GPUs of one host (gpu marker; skipped with fewer than two CUDA devices):
`torchrun` starts a rank a GPU (`torchrun_worker.py`), and N ranks at batch B follow one GPU at batch N x B on the
same batches within the training tolerance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import import_torch

torch = import_torch()
WORKER = Path(__file__).with_name("torchrun_worker.py")
TOLERANCE = 1e-3  # relative: N ranks sum the gradient in another order, and Adam carries the difference on


@pytest.mark.gpu
@pytest.mark.slow
def test_n_gpus_at_batch_b_follow_one_gpu_at_n_times_b(coopvec_device, tmp_path):
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        pytest.skip(f"needs two CUDA devices or more; PyTorch sees {count}")
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={count}",
                    str(WORKER), str(out)], check=True, timeout=600)
    result = json.loads(out.read_text())
    assert result["world_size"] == count
    np.testing.assert_allclose(result["losses"], result["expected"], rtol=TOLERANCE, atol=1e-5)
    assert max(result["parameter_difference"].values()) < TOLERANCE, result["parameter_difference"]
