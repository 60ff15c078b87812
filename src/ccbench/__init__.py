"""ccbench: what confidential computing costs your workload, and which protection layer causes it."""

__version__ = "0.1.0"

#: Version of the result-bundle format written by this release (history: ccbench.bundle.FORMAT_HISTORY
#: and docs/bundle-format.md). Older versions are upgraded when read.
BUNDLE_FORMAT_VERSION = 2


def load(paths, labels=None):
    """Load samples from bundles (or directories of bundles) into one pandas DataFrame.

    Thin re-export of :func:`ccbench.analysis.load.load` so users can write ``ccbench.load(...)``.
    """
    from ccbench.analysis.load import load as _load

    return _load(paths, labels=labels)
