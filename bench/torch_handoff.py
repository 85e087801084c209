"""Where a `run()` on PyTorch CUDA tensors spends its time: host work, the CUDA -> Vulkan -> CUDA semaphore round
trip, and GPU time, at small batches, with candidate changes as options of this probe (not library flags).

    python3 bench/torch_handoff.py [--model mlp_32_64x4_16] [--batches 10,12,14] [--calls 300]
                                   [--variants recorded,rerecord] [--out DIR]

Per batch and variant (medians over `--calls` calls, after warm-up):
  host        the Python call alone (it returns before the GPU is done);
  wall        the call and a torch.cuda.synchronize();
  stream      CUDA events on the caller's stream around the call: what the stream sees of it;
  gpu         the dispatch by Vulkan timestamps;
  hand-off    stream - gpu: the copies in, the semaphore signal and wait, and the switches between the CUDA and
              Vulkan work on the GPU.
Also: the hand-off's legs and their alternatives on empty Vulkan submissions (`coopnn.bench.handoff_legs`: the
round trip, each direction alone, host ordering, a memory word polled by cuStreamWaitValue32 instead of the
semaphore), a torch operation's own stream time for scale, and the host work of a call split by function.

Per variant also: back to back, the stream time a call of calls queued without waiting (as a training loop queues
them), and whether its output equals the library's.

Variants: `recorded` is the library as it is (each slot resubmits a recording made once per batch and buffers);
`rerecord` records the command buffer on every call, as the bridge did before; `flag` re-records every call with a
word written into shared memory at the submission's end, which the stream polls (cuStreamWaitValue32) instead of
waiting for the `done` semaphore. Writes
`<device>-<date>-torch-handoff.{json,md}` (default into bench/results/); prints the markdown.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver  # noqa: E402
from coopnn.bench.handoff_legs import PROBES, Legs  # noqa: E402
from coopnn.bench.report import write_results  # noqa: E402
from coopnn.interop import cuda_bridge, slot as slot_module, tensors  # noqa: E402
from coopnn.interop.cuda_driver import CudaDriver, CudaError  # noqa: E402
from coopnn.interop.shared_objects import SharedBuffer  # noqa: E402
from coopnn.runtime.vk.lane import barrier  # noqa: E402
from coopnn.runtime.vk.loader import load_vulkan  # noqa: E402

vk = load_vulkan()

VARIANTS = ("recorded", "rerecord", "flag")
# host work of a call, by the function doing it: (owner, attribute, label)
HOST_PARTS = ((tensors, "as_cuda_input", "read inputs"), (CudaDriver, "copy_rows", "copy rows in"),
              (CudaDriver, "signal", "signal inputs ready"), (slot_module.Slot, "record", "record or reuse"),
              (slot_module.Slot, "submit", "vkQueueSubmit"), (CudaDriver, "wait", "stream waits for done"),
              (tensors, "wrap_output", "wrap outputs"))


def _rerecord(self, kernel, buffers, shared, push, groups, copies, prologue=None):
    """Slot.record as it was: a new recording into the lane's own command buffer on every call."""
    descriptor_set, _ = self.descriptor_set(kernel, buffers)
    cmd = self.lane.begin()
    self._record(cmd, kernel, descriptor_set, shared, push, groups, copies, prologue)
    self.lane.end()


class _Flag:
    """The `flag` variant's word in memory both APIs share: each recording writes the next value at its end, and the
    stream waits (cuStreamWaitValue32) for the last value written."""

    def __init__(self, bridge):
        resources = bridge._resources
        with resources.driver.current(resources.cuda_context):
            self.buffer = SharedBuffer(resources.context, resources.driver, 4)
        resources.context.submit(lambda cmd: vk.lib.vkCmdFillBuffer(cmd, self.buffer.handle, 0, 4, 0))
        self.value = 0

    def record(self, slot, kernel, buffers, shared, push, groups, copies, prologue=None):
        """Slot.record re-recording every call, with the flag's next value written after everything else."""
        descriptor_set, _ = slot.descriptor_set(kernel, buffers)
        cmd = slot.lane.begin()
        slot._record(cmd, kernel, descriptor_set, shared, push, groups, copies, prologue)
        self.value += 1
        barrier(cmd, "after_previous_work")
        vk.lib.vkCmdFillBuffer(cmd, self.buffer.handle, 0, 4, self.value)
        slot.lane.end()

    def wait(self, driver, semaphore, value, stream) -> None:
        """CudaDriver.wait: the stream polls the flag instead of waiting for the semaphore."""
        driver.wait_value(self.buffer.pointer, self.value, stream)


@contextlib.contextmanager
def variant(name: str, flag: _Flag | None = None):
    """The library changed as variant `name` says while active (`flag` for the "flag" variant)."""
    if name == "recorded":
        yield
        return
    saved = [(slot_module.Slot, "record", slot_module.Slot.record), (CudaDriver, "wait", CudaDriver.wait)]
    if name == "flag":
        slot_module.Slot.record = lambda self, *args, **kwargs: flag.record(self, *args, **kwargs)
        CudaDriver.wait = lambda self, *args: flag.wait(self, *args)
    else:
        slot_module.Slot.record = _rerecord
    try:
        yield
    finally:
        for owner, attribute, function in saved:
            setattr(owner, attribute, function)


@contextlib.contextmanager
def host_parts(totals: dict):
    """Add each HOST_PARTS function's time (perf_counter, µs) to `totals` while active."""
    saved = []
    for owner, attribute, label in HOST_PARTS:
        function = getattr(owner, attribute)
        saved.append((owner, attribute, function))

        def timed(*args, _function=function, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                totals[_label] += (time.perf_counter() - start) * 1e6

        setattr(owner, attribute, timed)
    try:
        yield
    finally:
        for owner, attribute, function in saved:
            setattr(owner, attribute, function)


def _median(values) -> float:
    return statistics.median(values)


def measure_calls(torch, bridge, x, calls: int) -> dict:
    """Medians (µs) of host, wall, stream and GPU time of `bridge.run` on `x`."""
    stream = torch.cuda.current_stream()
    host, wall, on_stream, gpu = [], [], [], []
    for _ in range(calls):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        begin.record(stream)
        bridge.run({"x": x})
        end.record(stream)
        called = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
        host.append((called - start) * 1e6)
        wall.append((done - start) * 1e6)
        on_stream.append(begin.elapsed_time(end) * 1e3)
        gpu.append((bridge.last_gpu_ms or 0.0) * 1e3)
    return {"host_us": _median(host), "wall_us": _median(wall), "stream_us": _median(on_stream),
            "gpu_us": _median(gpu), "handoff_us": _median(on_stream) - _median(gpu),
            "back_to_back_us": back_to_back(torch, bridge, x, calls)}


def back_to_back(torch, bridge, x, calls: int) -> float:
    """Stream time a call (µs) of `calls` calls queued back to back, as a training loop queues them."""
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        bridge.run({"x": x})
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) * 1e3 / calls


def measure(model_name: str, batches: list[int], calls: int, variants: list[str]) -> dict:
    import torch

    document = {"environment": describe_environment(), "model": model_name, "calls": calls, "rows": [],
                "host_parts": {}}
    with coopnn.load(ROOT / "models" / f"{model_name}.onnx", backend="coopvec", weights="fp16") as model:
        bridge = cuda_bridge.CudaBridge(model._executable)
        flag = _Flag(bridge)
        for log2 in batches:
            x = torch.rand(1 << log2, model.inputs[0].shape[1], device="cuda") * 2 - 1
            want = bridge.run({"x": x})["y"].clone()
            for name in variants:
                try:
                    with variant(name, flag):
                        measure_calls(torch, bridge, x, 30)  # warm-up: slots, pools and recordings made
                        row = measure_calls(torch, bridge, x, calls)
                        row["same_output"] = bool(torch.equal(bridge.run({"x": x})["y"], want))
                except CudaError as error:  # the flag's wait where stream memory operations are off
                    torch.cuda.synchronize()
                    row = {"refused": str(error)}
                document["rows"].append({"batch": 1 << log2, "variant": name, **row})
            totals = collections.Counter()
            with host_parts(totals):
                measure_calls(torch, bridge, x, calls)
            document["host_parts"][str(1 << log2)] = {k: v / calls for k, v in totals.items()}
        document["legs"] = Legs(torch, bridge).measure(calls)
        bridge.close()
        flag.buffer.release_cuda()
        flag.buffer.release_vulkan()
    return document


def markdown(document: dict) -> str:
    environment = document["environment"]
    lines = [f"# CUDA tensors through the bridge: {document['model']}", "",
             f"{device_name(environment)}, {driver(environment)}, {environment['date']}, coopnn "
             f"{environment['coopnn']}, torch {(environment['torch'] or {}).get('version')}; medians of "
             f"{document['calls']} calls, µs.", "",
             "| batch | variant | host | wall | stream | gpu | hand-off | back to back | same output |",
             "|---" * 9 + "|"]
    for r in document["rows"]:
        if "refused" in r:
            lines.append(f"| 2^{r['batch'].bit_length() - 1} | {r['variant']} | refused: {r['refused']} |")
            continue
        lines.append(f"| 2^{r['batch'].bit_length() - 1} | {r['variant']} | {r['host_us']:.1f} | {r['wall_us']:.1f} "
                     f"| {r['stream_us']:.1f} | {r['gpu_us']:.1f} | {r['handoff_us']:.1f} | "
                     f"{r['back_to_back_us']:.1f} | {'yes' if r['same_output'] else 'no'} |")
    legs = document["legs"]
    lines += ["", "The hand-off's legs on empty Vulkan submissions (`coopnn.bench.handoff_legs`), medians, µs:", "",
              "| " + " | ".join(PROBES) + " |", "|---" * len(PROBES) + "|",
              "| " + " | ".join("refused" if legs[name] is None else f"{legs[name]:.1f}" for name in PROBES) + " |", "",
              "Host work of a call by function (µs, mean; `recorded`):", ""]
    labels = [label for _, _, label in HOST_PARTS]
    lines += ["| batch | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for batch, parts in document["host_parts"].items():
        lines.append(f"| 2^{int(batch).bit_length() - 1} | " + " | ".join(f"{parts.get(k, 0.0):.1f}" for k in labels)
                     + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp_32_64x4_16")
    parser.add_argument("--batches", default="10,12,14", help="log2 of the batch sizes")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; variants: {', '.join(VARIANTS)}")
    document = measure(args.model, [int(b) for b in args.batches.split(",")], args.calls, variants)
    print(write_results(document, Path(args.out), "torch-handoff", markdown(document)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
