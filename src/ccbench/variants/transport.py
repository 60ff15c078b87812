"""Transport protection variants: which transport a transport-bound workload measures."""

from __future__ import annotations

from pathlib import Path

from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis


class TransportAxis(VariantAxis):
    axis = "transport"
    default_value = "plain"
    VALUES = ("plain", "tls", "securechannel")

    def validate(self, value: str) -> None:
        if value not in self.VALUES:
            raise ValueError(f"unknown transport variant {value!r}; expected one of: {', '.join(self.VALUES)}")

    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant:
        return PreparedVariant(axis=self.axis, value=value, info={"transport": value})
