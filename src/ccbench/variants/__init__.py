"""Registry of variant axes."""

from __future__ import annotations

from ccbench.variants.base import VariantAxis
from ccbench.variants.storage import StorageAxis
from ccbench.variants.transport import TransportAxis

AXES: dict[str, VariantAxis] = {
    "storage": StorageAxis(),
    "transport": TransportAxis(),
}
