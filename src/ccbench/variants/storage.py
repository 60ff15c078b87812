"""Storage protection variants (issue 4 extends this beyond ``disk``)."""

from __future__ import annotations

from pathlib import Path

from ccbench.variants.base import AxisOptions, PreparedVariant, VariantAxis


class StorageOptions(AxisOptions):
    pass


class StorageAxis(VariantAxis):
    axis = "storage"
    Options = StorageOptions
    default_value = "disk"
    VALUES = ("disk",)

    def validate(self, value: str) -> None:
        if value not in self.VALUES:
            raise ValueError(f"unknown storage variant {value!r}; expected one of: {', '.join(self.VALUES)}")

    def setup(self, value: str, workdir: Path, options: AxisOptions) -> PreparedVariant:
        path = workdir / "storage-disk"
        path.mkdir(parents=True, exist_ok=True)
        return PreparedVariant(axis=self.axis, value=value, info={"storage": "disk"}, path=path)

    def teardown(self, prepared: PreparedVariant) -> None:
        import shutil

        if prepared.path is not None:
            shutil.rmtree(prepared.path, ignore_errors=True)
