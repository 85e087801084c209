"""The input encodings (`coopnn.graph.encodings`) as SPIR-V for one sample, shared by every target that runs
per-sample code: one module per encoding behind `registry.py`, each emitting with an `EncodingWriter`."""
