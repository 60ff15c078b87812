"""What goes into the fleet's wheelhouse: the Python packages of the components hosts need, read
from the controller's installed distributions (no SSH needed)."""

from importlib import metadata

import pytest

from ccbench.fleet import wheelhouse


def _missing(*distributions: str) -> list[str]:
    absent = []
    for name in distributions:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def test_a_plans_datascience_workloads_bring_their_python_packages():
    """A notebook in the plan puts the datascience extra's packages in the wheelhouse without the
    inventory naming it; torch (ml) and OpenFL (federated) only when a host asks for them."""
    absent = _missing("nbclient", "nbformat", "ipykernel", "pyperformance")
    if absent:
        pytest.skip(
            f"the datascience component is not installed here ({', '.join(absent)}): "
            "bash scripts/setup.sh --with datascience"
        )
    chosen, left_out = wheelhouse.wheelhouse_components([], ["core", "datascience", "federated", "ml"])
    assert chosen == ["datascience"] and left_out == {}
    pins = wheelhouse.closure(wheelhouse.component_requirements(chosen))
    assert {"nbclient", "nbformat", "ipykernel", "pyperformance"} <= set(pins)
    chosen, _ = wheelhouse.wheelhouse_components(["ml"], ["core"])
    assert chosen == ["ml"]


def test_a_planned_extra_the_controller_lacks_is_left_out_with_the_reason(monkeypatch):
    real = wheelhouse.component_requirements

    def requirements(components):
        # the controller as if datascience's set-up had never run here: one of its packages absent
        return ["ccbench-absent-package"] if components == ["datascience"] else real(components)

    monkeypatch.setattr(wheelhouse, "component_requirements", requirements)
    chosen, left_out = wheelhouse.wheelhouse_components(["storage"], ["datascience", "storage"])
    assert chosen == ["storage"]
    reason = left_out["datascience"]
    assert "ccbench-absent-package is not installed on the controller" in reason
    assert "bash scripts/setup.sh --with datascience" in reason and "skip" in reason


def test_scipy_goes_to_hosts_only_for_a_plan_with_a_precision_or_detect_target(tmp_path):
    """scipy (more than half of what a host installs) serves only the precision rule's t intervals;
    pip goes in always (hosts run it from its wheel: no ensurepip)."""
    from ccbench.plan import load_plan

    base = 'name = "p"\n[[workloads]]\nkind = "command"\ncommand = "true"\n'
    fixed, precise, detecting = (tmp_path / f"{n}.toml" for n in ("fixed", "precise", "detect"))
    fixed.write_text(base)
    precise.write_text(base + 'precision = "2%"\n')
    detecting.write_text(base + 'detect = "5%"\n')
    needs = [wheelhouse.plan_needs_precision(load_plan(str(p))) for p in (fixed, precise, detecting)]
    assert needs == [False, True, True]
    without = wheelhouse.closure(wheelhouse.host_requirements([], precision=False))
    assert "scipy" not in without and {"numpy", "pip", "cryptography"} <= set(without)
    assert "scipy" in wheelhouse.closure(wheelhouse.host_requirements([], precision=True))
