"""Graph passes: functions from graph IR to graph IR, one per module, run by name through `pipeline`."""

from coopnn.graph.passes.pipeline import DEFAULT_PIPELINE, PASSES, get_pass, optimize, run_pass

__all__ = ["DEFAULT_PIPELINE", "PASSES", "get_pass", "optimize", "run_pass"]
