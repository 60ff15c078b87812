"""The comparison's rows: which configuration each row stands against, ratios with intervals, the machines behind each side, plausibility, twins, the overhead model and the breakdown."""
