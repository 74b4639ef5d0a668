"""Peers of the benchmarks that run as separate programs (built outside the repository)."""
