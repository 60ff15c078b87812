"""What ccbench watches around each execution: what else ran meanwhile (interference) and the mechanism counters."""
