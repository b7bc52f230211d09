"""Benchmark runs as records: queueing, claiming, executing, storing."""
