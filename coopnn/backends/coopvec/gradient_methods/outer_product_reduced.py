"""Reduce-first outer products: the per-sample step kernel adds workgroup sums row by row to row-major float16
accumulators already in the flat parameter order (`coopnn.backends.coopvec.accumulate`), widened where they are."""

from __future__ import annotations

from coopnn.backends.coopvec.outer_product import OuterProducts

METHOD = OuterProducts("outer_product_reduced", "row_major")
