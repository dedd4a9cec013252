"""tools/bench_dtr.py's judging: which points are feasible, whose peak kept to the rule,
and the summary over the zoo (pure functions over the children's records; no training)."""
import os
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
if not os.path.isdir(TOOLS):
    pytest.skip("tools/ is not here (an installed wheel)", allow_module_level=True)
sys.path.insert(0, TOOLS)
import bench_dtr  # noqa: E402

MIB = 2 ** 20
BASE = {"losses": [2.0, 1.5], "step_s": 0.1, "peak": 100 * MIB, "op_outputs": 4 * MIB}


def point(step_s=0.12, peak=50 * MIB, floor=None, losses=(2.0, 1.5)):
    """A point's record as paired_record makes it, beside a run stepping at BASE's pace."""
    return {"losses": list(losses), "reference_losses": list(BASE["losses"]),
            "ratio": step_s / BASE["step_s"], "step_s": step_s, "peak": peak, "floor": floor,
            "evictions": 3, "recomputes": 5, "recompute_ms": 2.5, "swap_outs": 0,
            "overshoots": 0, "bookkeeping": 0.01, "repeats": 0, "first_repeats": 0}


def test_bytes_of_reads_a_profiles_output_description():
    assert bench_dtr.bytes_of("float32(2, 3), int32(4)") == 2 * 3 * 4 + 4 * 4
    assert bench_dtr.bytes_of("float32()") == 4
    assert bench_dtr.bytes_of("") == 0


def test_a_feasible_point_keeps_to_the_budget_plus_one_ops_outputs():
    judged = bench_dtr.judge(point(peak=53 * MIB, floor=30 * MIB), BASE, 50 * MIB)
    assert judged["feasible"] and judged["peak_ok"] and judged["identical"]
    assert judged["ratio"] == pytest.approx(1.2)
    assert not bench_dtr.judge(point(peak=55 * MIB, floor=30 * MIB), BASE, 50 * MIB)["peak_ok"]


def test_an_infeasible_point_keeps_to_the_floor_plus_one_ops_outputs():
    judged = bench_dtr.judge(point(peak=63 * MIB, floor=60 * MIB), BASE, 50 * MIB)
    assert judged["feasible"] is False and judged["peak_ok"]
    assert not bench_dtr.judge(point(peak=65 * MIB, floor=60 * MIB), BASE, 50 * MIB)["peak_ok"]


def test_without_the_floor_stat_feasibility_is_unknown_and_the_budget_rules():
    judged = bench_dtr.judge(point(peak=55 * MIB), BASE, 50 * MIB)
    assert judged["feasible"] is None and not judged["peak_ok"]
    assert not bench_dtr.judge(point(losses=(2.0, 1.25)), BASE, 50 * MIB)["identical"]


def model(*points):
    return {"points": [dict(p, policy=policy, fraction=0.5) for policy, p in points]}


def test_the_summary_skips_infeasible_points_counts_storms_and_compares_the_hybrid():
    results = {
        "a": model(("dtr_eq", bench_dtr.judge(point(step_s=0.11), BASE, 50 * MIB)),
                   ("dtr_eq+swap", bench_dtr.judge(point(step_s=0.121), BASE, 50 * MIB))),
        "b": model(("dtr_eq", bench_dtr.judge(point(step_s=0.5, floor=60 * MIB), BASE, 50 * MIB))),
        "c": model(("dtr_eq", {"timed_out": True})),
    }
    row = bench_dtr.summarize(results)[0.5]
    assert (row["points"], row["feasible"]) == (3, 2)        # b's budget is below its floor
    assert row["worst"] == (float("inf"), "c")
    assert row["hybrid"] == (pytest.approx(1.1), "a")
    met = bench_dtr.targets_met({0.5: row})
    assert met["median@0.5P<=1.15x"] is False and met["hybrid"] is False
    assert met["identical"] is False
    assert bench_dtr.storms_named(row)["worst"] == ["storm", "c"]


def test_the_bookkeeping_target_is_judged_at_the_feasible_points_and_all_are_shown():
    def costly(share, floor=None):
        return dict(bench_dtr.judge(point(floor=floor), BASE, 50 * MIB), bookkeeping=share)
    results = {"a": model(("dtr_eq", costly(0.02))),
               "b": model(("dtr_eq", costly(0.06, floor=60 * MIB)))}     # below its floor
    row = bench_dtr.summarize(results)[0.5]
    assert (row["bookkeeping"], row["bookkeeping_all"]) == (0.02, 0.06)
    assert bench_dtr.targets_met({0.5: row})["bookkeeping"] is True


def steps(seconds, losses, floor=30 * MIB):
    return [dict(loss=loss, seconds=s, peak=40 * MIB + i, floor=floor, evictions=2, recomputes=4,
                 recompute_seconds=0.002 + i * 1e-3, swap_outs=0, budget_overshoots=0,
                 eviction_seconds=0.001, recomputes_repeated=6 if i == 0 else i % 2)
            for i, (s, loss) in enumerate(zip(seconds, losses))]


def test_a_paired_point_is_the_median_of_its_per_step_ratios_against_the_run_beside_it():
    # the machine slowed down during steps 2 and 3: both runs alike, so the ratios hold
    budgeted = steps([9.0, 0.12, 0.36, 0.24, 0.12], [4.0, 3.0, 2.0, 1.0, 0.5])
    beside = steps([1.0, 0.10, 0.30, 0.20, 0.10], [4.0, 3.0, 2.0, 1.0, 0.5])
    point = bench_dtr.paired_record([budgeted], [beside])
    assert point["ratio"] == pytest.approx(1.2)          # the warm-up step is left out
    assert point["step_s"] == pytest.approx(0.18) and point["peak"] == 40 * MIB + 4
    assert point["recompute_ms"] == pytest.approx(4.5)  # the median of steps 1-4's 3-6 ms
    assert point["first_repeats"] == 6 and point["repeats"] == pytest.approx(0.5)
    assert "0/6" in bench_dtr.point_row("dtr_eq", "0.5 P", bench_dtr.judge(point, BASE, 50 * MIB))
    judged = bench_dtr.judge(point, dict(BASE, step_s=0.01), 50 * MIB)
    assert judged["ratio"] == pytest.approx(1.2) and judged["identical"] and judged["feasible"]
    other = bench_dtr.paired_record([budgeted], [steps([1.0] * 5, [4.0, 3.0, 2.0, 1.0, 0.25])])
    assert not bench_dtr.judge(other, BASE, 50 * MIB)["identical"]


def test_a_policy_is_a_name_and_optionally_swap():
    assert bench_dtr.parse_policy("dtr_eq") == ("dtr_eq", False)
    assert bench_dtr.parse_policy("lru+swap") == ("lru", True)
    with pytest.raises(ValueError, match="only '\\+swap'"):
        bench_dtr.parse_policy("dtr_eq+disk")


@pytest.mark.parametrize("flags, known, unknown, where", [
    ([], "gru", "grue", "the zoo"),
    (["--unseen"], "lstm", "learned_opt", "tests/unseen_models.py"),
])
def test_an_unknown_model_is_a_usage_error_naming_it_before_any_run(flags, known, unknown,
                                                                     where):
    run = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_dtr.py"), *flags,
                          "--models", f"{known},{unknown}"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert f"no model named {unknown} in {where}" in run.stderr
    assert "its models: " in run.stderr and "Traceback" not in run.stderr


def test_a_point_keeps_both_processes_peak_rss_and_the_summary_counts_the_lower_ones():
    budgeted = [dict(r, rss=(80 + i) * MIB) for i, r in enumerate(steps([1.0, 0.1, 0.1],
                                                                         [2.0, 1.0, 0.5]))]
    beside = [dict(r, rss=(95 + i) * MIB) for i, r in enumerate(steps([1.0, 0.1, 0.1],
                                                                       [2.0, 1.0, 0.5]))]
    p = bench_dtr.paired_record([budgeted], [beside])
    assert (p["rss"], p["reference_rss"]) == (82 * MIB, 97 * MIB)   # the runs' peaks
    assert bench_dtr.rss_pair(p) == "82/97"
    higher = dict(point(), rss=99 * MIB, reference_rss=97 * MIB)
    row = bench_dtr.summarize({"a": model(("dtr_eq", bench_dtr.judge(dict(point(), **{
        "rss": p["rss"], "reference_rss": p["reference_rss"]}), BASE, 50 * MIB))),
        "b": model(("dtr_eq", bench_dtr.judge(higher, BASE, 50 * MIB))),
        "c": model(("dtr_eq", bench_dtr.judge(point(), BASE, 50 * MIB)))})[0.5]
    assert (row["rss_lower"], row["rss_known"]) == (1, 2)        # c's processes said nothing
    assert bench_dtr.rss_pair(point()) == "n/a"


def test_pairs_of_processes_pool_their_timed_steps_and_each_warm_up_is_left_out():
    first = steps([9.0, 0.2, 0.2], [4.0, 3.0, 2.0])
    second = steps([9.0, 0.3, 0.3], [4.0, 3.0, 2.0])
    beside = steps([1.0, 0.1, 0.1], [4.0, 3.0, 2.0])
    point = bench_dtr.paired_record([first, second], [beside, beside])
    assert point["ratio"] == pytest.approx(2.5)          # the median of 2, 2, 3, 3
    assert point["losses"] == point["reference_losses"] == [4.0, 3.0, 2.0] * 2


@pytest.mark.parametrize("model_set, model", [("unseen", "shared"), ("fresh", "canvas"),
                                              ("novel", "fpn")])
def test_the_outside_models_run_paired_under_a_budget(tmp_path, async_level, model_set, model):
    """`--unseen`, `--fresh`, `--novel`: a model of tests/<set>_models.py, measured and
    stepped beside its unconstrained run (the demo's runs given that set's trainer, which
    the processes they start must be able to unpickle), bit-identical."""
    if async_level == 0:
        pytest.skip("the bench's processes run at the default level: once is enough")
    import json
    import subprocess
    out = tmp_path / f"{model_set}.json"
    subprocess.run([sys.executable, os.path.join(TOOLS, "bench_dtr.py"), f"--{model_set}",
                    "--models", model, "--budgets", "0.5", "--steps", "1", "--pairs", "1",
                    "--policies", "dtr_eq", "--json", str(out)], check=True,
                   capture_output=True, timeout=300)
    record = json.loads(out.read_text())["models"][model]
    assert record["about"].startswith(f"{model} (tests/{model_set}_models.py")
    (p,) = record["points"]
    assert p["identical"] and p["peak_ok"] and p["ratio"] > 0


def test_a_floor_above_the_unconstrained_peak_is_no_floor():
    """A storm's pins can measure a 'floor' above P, which the run beside never needed:
    feasibility is then unknown, and the peak is held to the budget (plus one op's
    outputs) as where no floor is known."""
    judged = bench_dtr.judge(point(peak=100 * MIB, floor=110 * MIB), BASE, 50 * MIB)
    assert judged["feasible"] is None and not judged["peak_ok"]
    judged = bench_dtr.judge(point(peak=53 * MIB, floor=110 * MIB), BASE, 50 * MIB)
    assert judged["feasible"] is None and judged["peak_ok"]
    assert bench_dtr.judge(point(peak=99 * MIB, floor=96 * MIB), BASE, 50 * MIB)["peak_ok"]
