"""The kernel level: a tensor-language program per model, lowered from the graph IR and compiled by the targets."""
