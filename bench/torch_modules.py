"""coopnn networks as PyTorch modules (`coopnn.torch`) against the same networks in PyTorch AMP, in one run, with
tiny-cuda-nn's figures from `bench/results/nvidia-h200-2026-12-01-anchors.md` beside them.

    python3 bench/torch_modules.py [--models a,b] [--batches 14,16,18] [--calls 200] [--out DIR]

Models: the three benchmark MLPs (`models/*.onnx`) and `image_hashgrid`, tiny-cuda-nn's image configuration (a
16-level hash grid into a 64-wide MLP, 2 -> 3: `coopnn.examples.image_models.TCNN_IMAGE_CONFIG`), on inputs in [0, 1].

Per model and batch, in ms per call:
  forward         back-to-back calls on one stream, by CUDA events (what the stream sees: copies in, the hand-off
                  to Vulkan and back, the kernel);
  forward, wall   one call and a torch.cuda.synchronize(), by the host clock;
  after update    forward after an in-place change of the parameters each call (the refresh of the kernel's weights
                  in the run's own submission, as in a training loop);
  PyTorch AMP     the same network (`coopnn.bench.torch_graph`) under float16 autocast, eager, same stream timing;
  step            coopnn.torch forward, MSE, backward (coopnn's training kernels, on the GPU) and torch's fused Adam
                  on `params` (blank where the backward pass is refused: the reason is in the JSON), the input
                  without requires_grad (coopvec: the tiled step kernel where it takes the model);
  step, x.grad    the same with an input that requires grad (coopvec: the per-sample step kernel, which writes the
                  input's gradient; blank where input gradients are refused, behind an encoding);
  step, wall      one such step and a torch.cuda.synchronize(), by the host clock;
  forward+backward  the step without the optimizer;
  AMP step        PyTorch AMP forward, MSE, backward and fused Adam with a GradScaler;
  AMP / step      how many times faster the coopnn.torch step is. Writes
`<device>-<date>-torch-modules.{json,md}` (default into bench/results/); prints the markdown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing coopnn

import coopnn  # noqa: E402
from coopnn.bench.environment import describe_environment, device_name, driver  # noqa: E402
from coopnn.bench.report import write_results  # noqa: E402

MODELS = ("mlp_3_64x2_3", "mlp_32_64x4_16", "mlp_64_128x4_16", "image_hashgrid")
ANCHORS = ROOT / "bench" / "results" / "nvidia-h200-2026-12-01-anchors.md"


def tcnn_anchors(path: Path = ANCHORS) -> dict[tuple[str, int], dict[str, float]]:
    """tiny-cuda-nn's GPU times (ms) by (model, batch) from the anchors file's table: "infer fused", "infer JIT",
    "train fused", "train JIT", where it measured them (same machine kind, float16 in and out, native C++ API)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model | batch | infer fused"))
    columns = [c.strip() for c in lines[start].strip("|").split("|")]
    found = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
        batch = 1 << int(cells["batch"].removeprefix("2^"))
        times = {k: float(v.split()[0]) for k, v in cells.items() if k not in ("model", "batch") and v}
        found[(cells["model"].split()[0], batch)] = times
    return found | _image_anchors(lines)


def _image_anchors(lines: list[str]) -> dict[tuple[str, int], dict[str, float]]:
    """tiny-cuda-nn's image configuration from the anchors file's table of it ("| | fused | JIT |": rows "training
    step, 2^N" and "inference, 2^N"), as `tcnn_anchors` keys them, under "image_hashgrid"."""
    start = next(i for i, line in enumerate(lines) if line.replace(" ", "") == "||fused|JIT|")
    found: dict[tuple[str, int], dict[str, float]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        what, fused, jit = (c.strip() for c in line.strip("|").split("|"))
        kind = "train" if what.startswith("training") else "infer"
        batch = 1 << int(what.rsplit("2^", 1)[1])
        found.setdefault(("image_hashgrid", batch), {}).update(
            {f"{kind} fused": float(fused.split()[0]), f"{kind} JIT": float(jit.split()[0])})
    return found


def stream_ms(torch, call, calls: int) -> float:
    """Mean stream time of `calls` back-to-back calls of `call()`, by CUDA events, after a warm-up."""
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(calls):
        call()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / calls


def wall_ms(torch, call, calls: int) -> float:
    """Median host time of one call and a synchronize."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _amp_step(torch, net, optimizer, scaler, x, target):
    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(net({"x": x})["y"].float(), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return step


def _module_step(torch, module, optimizer, x, target):
    def step():
        module.params.grad = x.grad = None  # as zero_grad(set_to_none=True) leaves them
        torch.nn.functional.mse_loss(module(x), target).backward()
        if optimizer is not None:
            optimizer.step()
    return step


def load_model(name: str):
    """The benchmark model `name` on the coopvec backend with float16 weights."""
    if name == "image_hashgrid":
        from coopnn.examples.image_models import TCNN_IMAGE_CONFIG
        from coopnn.nets.tcnn_config import network_layers

        hidden, activation, output_activation = network_layers(TCNN_IMAGE_CONFIG["network"])
        return coopnn.mlp(2, hidden, 3, activation=activation, output_activation=output_activation,
                          encoding=TCNN_IMAGE_CONFIG["encoding"], initialisation="xavier", backend="coopvec",
                          weights="fp16")
    return coopnn.load(ROOT / "models" / f"{name}.onnx", backend="coopvec", weights="fp16")


def measure_steps(torch, module, x, target, calls: int) -> dict:
    """The coopnn.torch step's columns, or the reason its backward pass is refused."""
    from coopnn.errors import CoopnnError

    module_optimizer = torch.optim.Adam([module.params], lr=1e-4, fused=True)
    try:
        found = {"step_ms": stream_ms(torch, _module_step(torch, module, module_optimizer, x, target), calls),
                 "step_wall_ms": wall_ms(torch, _module_step(torch, module, module_optimizer, x, target), calls),
                 "forward_backward_ms": stream_ms(torch, _module_step(torch, module, None, x, target), calls)}
    except CoopnnError as error:
        return {"step_refused": str(error)}
    try:
        wants = x.detach().requires_grad_()
        found["input_gradient_step_ms"] = stream_ms(torch, _module_step(torch, module, module_optimizer, wants,
                                                                        target), calls)
    except CoopnnError as error:
        found["input_gradient_refused"] = str(error)
    return found


def measure_model(torch, name: str, batches: list[int], calls: int, anchors: dict) -> list[dict]:
    from coopnn.bench.torch_graph import TorchGraph
    import coopnn.torch

    rows = []
    with load_model(name) as model:
        module = coopnn.torch.from_model(model)
        reference = TorchGraph(model.graph, torch.float32, "cuda")
        parameters = [t.requires_grad_() for t in reference.constants.values() if t.is_floating_point()]
        optimizer = torch.optim.Adam(parameters, lr=1e-4, fused=True)
        scaler = torch.amp.GradScaler("cuda")
        for batch in batches:
            x = torch.rand(batch, model.inputs[0].shape[1], device="cuda")
            if name != "image_hashgrid":  # the grid's domain is [0, 1]
                x = x * 2 - 1
            target = torch.rand(batch, model.outputs[0].shape[1], device="cuda")

            def updated():
                with torch.no_grad():
                    module.params.mul_(1.0)
                return module(x)

            def amp():
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
                    return reference({"x": x})

            with torch.no_grad():
                rows.append({
                    "model": name, "batch": batch, "forward_ms": stream_ms(torch, lambda: module(x), calls),
                    "forward_wall_ms": wall_ms(torch, lambda: module(x), calls),
                    "after_update_ms": stream_ms(torch, updated, calls),
                    "amp_forward_ms": stream_ms(torch, amp, calls),
                    "host_refreshes": module._runner.host_refreshes})
            rows[-1].update(measure_steps(torch, module, x, target, calls))
            rows[-1]["amp_step_ms"] = stream_ms(torch, _amp_step(torch, reference, optimizer, scaler, x, target),
                                                calls)
            rows[-1]["tcnn"] = anchors.get((name, batch), {})
        module.close()
    return rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (tuple, list)):
        return " / ".join(f"{v:.3f}" for v in value)
    return f"{value:.3f}"


def markdown(document: dict) -> str:
    environment = document["environment"]
    lines = ["# coopnn.torch modules against PyTorch AMP", "",
             f"{device_name(environment)}, {driver(environment)}, {environment['date']}, coopnn "
             f"{environment['coopnn']}, torch {(environment['torch'] or {}).get('version')}; ms per call, "
             f"{document['calls']} calls; tcnn (fused / JIT, GPU time) from {ANCHORS.name}.", "",
             "| model | batch | forward | forward, wall | after update | PyTorch AMP | step | step, wall | "
             "forward+backward | step, x.grad | AMP step | AMP / step | tcnn infer | tcnn train |", "|---" * 14 + "|"]
    for r in document["rows"]:
        tcnn = r["tcnn"]
        infer = [tcnn[k] for k in ("infer fused", "infer JIT") if k in tcnn] or None
        train = [tcnn[k] for k in ("train fused", "train JIT") if k in tcnn] or None
        step = r.get("step_ms")
        cells = [r["forward_ms"], r["forward_wall_ms"], r["after_update_ms"], r["amp_forward_ms"], step,
                 r.get("step_wall_ms"), r.get("forward_backward_ms"), r.get("input_gradient_step_ms"), r["amp_step_ms"],
                 None if step is None else r["amp_step_ms"] / step, infer, train]
        lines.append(f"| {r['model']} | 2^{r['batch'].bit_length() - 1} | " + " | ".join(map(_cell, cells)) + " |")
    refused = sorted({(r["model"], r["step_refused"]) for r in document["rows"] if "step_refused" in r})
    lines += [""] + [f"{model}: the step is refused: {reason}" for model, reason in refused] if refused else []
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="14,16,18", help="log2 of the batch sizes")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        parser.error("PyTorch sees no CUDA device")
    batches = [1 << int(b) for b in args.batches.split(",")]
    document = {"environment": describe_environment(), "calls": args.calls, "rows": []}
    for name in args.models.split(","):
        document["rows"] += measure_model(torch, name, batches, args.calls, tcnn_anchors())
    print(write_results(document, Path(args.out), "torch-modules", markdown(document)).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
