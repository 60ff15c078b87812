"""Bundles read into rows: the per-sample frame for users (load) and the engine's codes reduced in DuckDB."""
