"""The release and the result-bundle format it writes: a module of its own at the bottom of the
house, so that the bundle writer can name them without importing the package's front door
(``ccbench/__init__``, whose ``load()`` reaches up into analysis)."""

__version__ = "0.1.0"

#: Version of the result-bundle format written by this release (history: ccbench.bundle.FORMAT_HISTORY
#: and docs/bundle-format.md). Older versions are upgraded when read.
BUNDLE_FORMAT_VERSION = 2
