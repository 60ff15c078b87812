"""Results as data: others' results turned into bundles (``importers``)."""
