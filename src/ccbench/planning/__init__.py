"""The plan model and its loaders (TOML, the seed-000 CSV), and the checks of its fields."""
