"""Runnable examples: `python -m coopnn.examples.NAME`, also reachable from the `coopnn` command line."""
