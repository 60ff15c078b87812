"""Settled runs: a run's settled rows, a fleet's across labels, the gate."""
