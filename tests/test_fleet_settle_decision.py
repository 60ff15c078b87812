"""The fleet controller's decision after each round (ccbench.fleet.settling.decide) on known per-round
values: which cases settle, at which round, what the next round runs, and what the limits cut."""

import math
import tomllib

import pytest

from ccbench.analysis.settling.fleet_settle import judge, minimum_rounds, paired_costs
from ccbench.analysis.statistics.sequential import interval, settle
from ccbench.basics.errors import CCBenchError
from ccbench.fleet import settling
from ccbench.planning.plan import plan_from_dict

PLAN = """
name = "two"
[defaults]
repetitions = 1
[[workloads]]
kind = "command"
name = "marked"
command = "true"
[[workloads]]
kind = "command"
name = "same"
command = "true"
"""
MARKED = ("marked", "-", "wall_time", "{}")
SAME = ("same", "-", "wall_time", "{}")
INFO = {case: {"case": "wall_time", "better": "lower", "variant": {}} for case in (MARKED, SAME)}
#: the equal case's values: a spread of a few percent around the same value on both labels
NOISE = [1.00, 1.04, 0.97, 1.02, 0.99, 1.05, 0.96, 1.01, 1.03, 0.98]
#: a noisier equal case: no interval this short can put every 5% cost out, yet one of 6 rounds
#: could if the spread were at the low end of what 3 values allow (it is not given up)
WIDE = [1.00, 1.125, 0.90, 1.075, 0.95, 1.10, 0.925, 1.05, 0.975, 1.025]
#: an equal case far noisier than the target: no interval of the round limit could answer
HOPELESS = [1.00, 2.00, 0.50, 1.80, 0.60, 1.90, 0.55, 1.70, 0.65, 1.60]


def _plan(text=PLAN):
    return plan_from_dict(tomllib.loads(text), "test")


def _record(max_rounds=6, budget_s=None):
    return settling.new_record(
        _plan(), target=0.05, budget_s=budget_s, max_rounds=max_rounds, baseline="plain", labels={"plain", "snp"}
    )


def _table(k, marked_ratio=3.0, same=WIDE):
    """Rounds 1..k: the marked case 3x slower on snp (with a little noise), the same case equal."""
    rounds = range(1, k + 1)
    return {
        MARKED: {
            "plain": {r: 1.0 * NOISE[r - 1] for r in rounds},
            "snp": {r: marked_ratio * NOISE[-r] for r in rounds},
        },
        SAME: {"plain": {r: same[r - 1] for r in rounds}, "snp": {r: same[(r + 3) % len(same)] for r in rounds}},
    }


def _cases(record):
    return {c["workload"]: c for c in record["cases"]}


def test_the_interval_is_finite_from_the_minimum_rounds_on():
    least = minimum_rounds()
    assert least == 3
    assert not math.isfinite(float(interval(least - 1, 0.0, least - 1.0)[1]))
    assert math.isfinite(float(interval(least, 0.0, float(least))[1]))


def test_a_clear_cost_settles_at_the_minimum_and_its_workload_leaves():
    record = _record()
    for k in (1, 2):
        going = settling.decide(record, _table(k), INFO, k, {"plain", "snp"}, elapsed_s=10.0 * k, round_s=10.0)
        assert going == ["marked", "same"]
        assert not any(c.get("settled_at") for c in record["cases"])
    going = settling.decide(record, _table(3), INFO, 3, {"plain", "snp"}, elapsed_s=30.0, round_s=10.0)
    marked = _cases(record)["marked"]
    assert marked["answer"] == "cost" and marked["settled_at"] == 3 and marked["stopped_by"] == "settled"
    assert marked["estimate"] == pytest.approx(math.expm1(sum(paired(MARKED, 3)) / 3))
    assert record["workloads"]["marked"]["stopped_by"] == "settled"
    assert going == ["same"]
    assert _cases(record)["same"]["answer"] is None


def paired(case, k):
    return [v for _, v in paired_costs(_table(k)[case], "plain", "snp", higher=False)]


def test_a_settled_case_keeps_the_answer_of_the_round_it_settled_at():
    record = _record()
    for k in (1, 2, 3):
        settling.decide(record, _table(k), INFO, k, {"plain", "snp"}, 10.0 * k, 10.0)
    before = dict(_cases(record)["marked"])
    # later rounds in which the marked case measured equal would move its interval; its answer stands
    later = _table(5)
    later[MARKED]["snp"].update({4: 1.0, 5: 1.0})
    settling.decide(record, later, INFO, 5, {"plain", "snp"}, 50.0, 10.0)
    assert _cases(record)["marked"] == before
    # and compare's recomputation up to that round gives the same numbers
    settlement, _, last = judge(later, MARKED, "snp", "plain", False, 0.05, until=before["settled_at"])
    assert last == 3 and settlement.estimate == pytest.approx(before["estimate"])


def test_an_equal_case_runs_to_the_round_limit_and_is_cut_by_it():
    record = _record(max_rounds=5)
    going = []
    for k in range(1, 6):
        going = settling.decide(record, _table(k), INFO, k, {"plain", "snp"}, 10.0 * k, 10.0)
    same = _cases(record)["same"]
    assert going == []
    assert same["answer"] is None and same["stopped_by"] == "max rounds" and same["rounds"] == 5
    assert record["ended_by"] == "max rounds"
    # what was computed is what settle() says on the same paired values
    assert settle(paired(SAME, 5), 0.05).state is None


def test_a_case_that_cannot_settle_by_the_round_limit_stops_and_its_workload_leaves():
    record = _record(max_rounds=6)
    for k in (1, 2, 3):
        going = settling.decide(record, _table(k, same=HOPELESS), INFO, k, {"plain", "snp"}, 10.0 * k, 10.0)
    same = _cases(record)["same"]
    assert going == [] and same["answer"] is None and same["stopped_by"] == "cannot settle within the round limit"
    assert record["workloads"]["same"]["stopped_by"] == "cannot settle within the round limit"
    assert record["ended_by"] == "cannot settle within the round limit"
    # the same values with a limit far away are still worth rounds
    patient = _record(max_rounds=60)
    for k in (1, 2, 3):
        going = settling.decide(patient, _table(k, same=HOPELESS), INFO, k, {"plain", "snp"}, 10.0 * k, 10.0)
    assert going == ["same"] and "stopped_by" not in _cases(patient)["same"]


def test_the_budget_ends_the_rounds_when_the_next_round_would_pass_it():
    record = _record(budget_s=45.0)
    for k in (1, 2, 3):
        going = settling.decide(record, _table(k), INFO, k, {"plain", "snp"}, 10.0 * k + 6, 10.0)
    # 36 s spent, a round takes 10 s: the next one would pass 45 s
    assert going == []
    assert _cases(record)["same"]["stopped_by"] == "budget"
    assert _cases(record)["marked"]["stopped_by"] == "settled"
    assert record["workloads"]["same"]["stopped_by"] == "budget"


def test_a_gain_on_a_higher_is_better_metric_and_the_sign_of_the_cost():
    table = {MARKED: {"plain": {1: 100.0, 2: 101.0, 3: 99.0}, "snp": {1: 300.0, 2: 305.0, 3: 296.0}}}
    settlement, p, last = judge(table, MARKED, "snp", "plain", True, 0.05)
    assert settlement.state == "gain" and settlement.estimate < 0 and p <= 0.05 and last == 3
    settlement, _, _ = judge(table, MARKED, "snp", "plain", False, 0.05)
    assert settlement.state == "cost"


def test_rounds_where_one_side_is_missing_are_left_out_of_the_pairs():
    per_label = {"plain": {1: 1.0, 2: 1.0, 4: 1.0}, "snp": {1: 2.0, 3: 2.0, 4: 2.0}}
    assert [r for r, _ in paired_costs(per_label, "plain", "snp", False)] == [1, 4]


def test_the_baseline_failing_ends_the_rounds():
    record = _record()
    settling.decide(record, _table(1), INFO, 1, {"plain", "snp"}, 10.0, 10.0)
    going = settling.decide(record, _table(2), INFO, 2, {"snp"}, 20.0, 10.0)
    assert going == []
    assert {c["stopped_by"] for c in record["cases"]} == {"baseline failed"}
    assert all(w["stopped_by"] == "baseline failed" for w in record["workloads"].values())


def test_a_workload_with_no_case_across_labels_leaves_after_its_minimum():
    record = _record()
    only_baseline = {SAME: {"plain": {1: 1.0, 2: 1.0, 3: 1.0}}, **{MARKED: _table(3)[MARKED]}}
    for k in (1, 2, 3):
        table = {
            case: {label: {r: v for r, v in rounds.items() if r <= k} for label, rounds in per.items()}
            for case, per in only_baseline.items()
        }
        going = settling.decide(record, table, INFO, k, {"plain", "snp"}, 10.0 * k, 10.0)
    assert record["workloads"]["same"]["stopped_by"] == "no case to settle"
    assert going == []


def test_bad_input_is_a_one_line_error():
    with pytest.raises(CCBenchError, match="--max-rounds 2: the anytime-valid interval is finite only from 3"):
        _record(max_rounds=2)
    with pytest.raises(CCBenchError, match="gives marked, same a target of its own"):
        settling.new_record(
            _plan(PLAN.replace("repetitions = 1", 'repetitions = 1\nsettle = "5%"')),
            target=0.05,
            budget_s=None,
            max_rounds=None,
            baseline="plain",
            labels={"plain", "snp"},
        )
    with pytest.raises(CCBenchError, match="every host has that label"):
        settling.new_record(_plan(), target=0.05, budget_s=None, max_rounds=None, baseline="plain", labels={"plain"})


def test_the_first_rounds_run_every_workload_and_later_ones_only_those_left():
    record = _record()
    assert list(record["rounds"]) == ["round-1", "round-2", "round-3"]
    assert all(names == ["marked", "same"] for names in record["rounds"].values())

    class Fleet:  # the two fields only_args reads
        settling = record

    assert settling.only_args(Fleet, "round-1") == []
    record["rounds"]["round-4"] = ["same"]
    assert settling.only_args(Fleet, "round-4") == ["--only", "same"]


def test_a_serving_hosts_bound_covers_every_round_settling_may_run():
    from ccbench.fleet.peers import SETUP_ALLOWANCE_S, plan_bound_s

    plan, record = _plan(), _record(max_rounds=6)
    per_round = sum((w.timeout + w.cooldown) * (1 + w.warmup) for w in plan.workloads)
    assert plan_bound_s(plan, record) == pytest.approx(6 * per_round + SETUP_ALLOWANCE_S)
    assert plan_bound_s(plan) < plan_bound_s(plan, record)
