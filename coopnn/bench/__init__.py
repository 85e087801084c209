"""The benchmark harness behind `coopnn bench` and `bench/run.py`: every coopnn backend and the baselines a user
would pick instead (PyTorch, onnxruntime), timed in one run on the same models and inputs.

- `runners`: what can be benchmarked (the backend registry plus the baselines) and `select_runners`;
- `models`: a model's graph, FLOPs and bytes per sample, inputs; `measure`: warm-up, timed runs, statistics, budget;
- `suite`: `run_suite` over models and runners, first calls with cold and warm caches (`caches`);
- `report`: speed-up ratios, terminal and markdown tables, JSON; `plot`: the throughput PNG (matplotlib optional);
- `peaks`: known GPUs' fp16 peak and bandwidth; `environment`: device, driver, date and versions;
- `torch_graph`, `torch_runners`, `ort_runners`: the baselines (PyTorch and onnxruntime are optional).
"""
