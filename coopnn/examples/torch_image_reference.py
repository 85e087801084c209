"""The PyTorch reference of `coopnn fit-image --encoding hashgrid`: tiny-cuda-nn's image configuration (hash grid
from `coopnn.bench.torch_encodings`, a 64-wide bias-free ReLU MLP of 2 hidden layers as tcnn's, RelativeL2, Adam
with tcnn's learning rate, betas and epsilon, without its l2_reg of 1e-6) trained in plain PyTorch on the same image
and the same pixel centres, reporting the GPU time a step and the PSNR at the steps asked for:
`python -m coopnn.examples.torch_image_reference --steps 1000 10000 [--device cuda] [-o DIR]` writes
DIR/torch_reference.csv.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from coopnn.cli_format import HelpFormatter
from coopnn.examples.fit_image import pixel_centres, psnr, square
from coopnn.examples.image_models import TCNN_IMAGE_CONFIG, megapixel_image_path
from coopnn.examples.images import read_image
from coopnn.graph.encodings.registry import from_config


def _network(torch, encoding, device):
    """The grid's parameters and the MLP's bias-free layers (tcnn's Xavier-uniform start)."""
    grid = torch.nn.Parameter(torch.empty(encoding.n_parameters, device=device).uniform_(-1e-4, 1e-4))
    widths = [encoding.n_output_dims, 64, 64, 3]
    layers = [torch.nn.Linear(a, b, bias=False, device=device) for a, b in zip(widths[:-1], widths[1:])]
    for layer in layers:
        torch.nn.init.xavier_uniform_(layer.weight)
    return grid, layers


def train(steps: list[int], batch: int, device: str, seed: int = 0, image: str | None = None,
          seconds: float | None = None, size: int | None = None) -> list[tuple[int, float, float]]:
    """(step, PSNR, mean ms a step so far) at each of `steps`, learning `image` (default: the megapixel one) whole, or
    box-filtered to `size` as `fit_image` does; with `seconds`, it stops at a step of `steps` after which the next, at
    the pace so far, would end later."""
    import torch

    from coopnn.bench.torch_encodings import encode

    torch.manual_seed(seed)
    pixels = read_image(megapixel_image_path() if image is None else image)
    target = square(pixels, min(pixels.shape[:2]) if size is None else size)
    coordinates = torch.from_numpy(pixel_centres(target.shape[0])).to(device)
    colours = torch.from_numpy(target.reshape(-1, 3)).to(device)
    encoding = from_config(TCNN_IMAGE_CONFIG["encoding"], 2)
    grid, layers = _network(torch, encoding, device)

    def model(x):
        h = encode(encoding, x, grid)
        for i, layer in enumerate(layers):
            h = layer(h) if i == len(layers) - 1 else torch.relu(layer(h))
        return h

    parameters = [grid] + [layer.weight for layer in layers]
    optimizer = torch.optim.Adam(parameters, lr=1e-2, betas=(0.9, 0.99), eps=1e-15)
    generator = torch.Generator(device=device).manual_seed(seed)
    results, elapsed, begun = [], 0.0, time.perf_counter()
    for step in range(1, max(steps) + 1):
        index = torch.randint(0, len(coordinates), (batch,), device=device, generator=generator)
        started = time.perf_counter()
        prediction = model(coordinates[index])
        loss = ((prediction - colours[index]) ** 2 / (prediction.detach() ** 2 + 0.01)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed += time.perf_counter() - started
        if step in steps:
            with torch.no_grad():
                image = torch.cat([model(part) for part in coordinates.split(1 << 18)]).cpu().numpy()
            results.append((step, psnr(image, target.reshape(-1, 3)), 1000 * elapsed / step))
            later = [s for s in steps if s > step]
            if seconds is not None and later and time.perf_counter() - begun + elapsed / step * (later[0] - step) \
                    > seconds:
                break
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coopnn.examples.torch_image_reference",
                                     description=__doc__.split("\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000], help="steps at which to report PSNR")
    parser.add_argument("--batch-size", type=int, default=1 << 18, help="pixels per step (tcnn's sample: 2^18)")
    parser.add_argument("--device", default="cuda", help="PyTorch device")
    parser.add_argument("--output-dir", "-o", default="torch_reference", help="folder for the CSV")
    args = parser.parse_args(argv)
    rows = train(sorted(set(args.steps)), args.batch_size, args.device)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["step,psnr_db,ms_per_step"] + [f"{s},{p:.4f},{ms:.4f}" for s, p, ms in rows]
    (out / "torch_reference.csv").write_text("\n".join(lines) + "\n")
    for s, p, ms in rows:
        print(f"step {s}: PSNR {p:.2f} dB, {ms:.3f} ms a step (wall clock, synchronised)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
