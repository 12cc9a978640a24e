"""Benchmarks that print tables. Run them from the repository root as modules: `python -m loadtests.bench_local`."""
