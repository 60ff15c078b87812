"""ccbench: what confidential computing costs your workload, and which protection layer causes it."""

from ccbench.basics.version import BUNDLE_FORMAT_VERSION, __version__

__all__ = ["BUNDLE_FORMAT_VERSION", "__version__", "load"]


def load(paths, labels=None):
    """Load samples from bundles (or directories of bundles) into one pandas DataFrame.

    Thin re-export of :func:`ccbench.analysis.samples.load.load` so users can write ``ccbench.load(...)``.
    """
    from ccbench.analysis.samples.load import load as _load

    return _load(paths, labels=labels)
