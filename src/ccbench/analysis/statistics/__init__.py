"""Numbers alone: intervals, the precision rule, repeated measures, the settle rule (anytime-valid), replicas."""
