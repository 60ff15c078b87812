"""The run engine: the runner's phases, the schedule, settle rounds, one execution supervised in its worker process, the work directory, the live display and the run's summary."""
