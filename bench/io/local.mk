# checkpoint benchmarks.
