"""results/compare.py on copies of the real results.json files, each changed in
one way: what the comparison lists, and whether it counts as regressed."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from harness.results.codec import to_plain
from harness.results.compare import compare, row_key
from harness.results.model import RunResult

DATA = Path(__file__).parent.parent / "data" / "results"
FULL = json.loads((DATA / "full-every-suite.json").read_text())
BROKEN = json.loads((DATA / "series-demo-broken.json").read_text())
BW = "test_rdma[ib_write_bw]"


def copy_of(data: dict, run_id: str = "20261202-000000-later-0001", **changes) -> dict:
    out = copy.deepcopy(data)
    out.update(run_id=run_id, **changes)
    return out


def load(data: dict) -> RunResult:
    return RunResult.from_dict(data)


def first(data: dict, status: str, suite: str | None = None) -> dict:
    return next(t for t in data["tests"] if t["status"] == status
                and (suite is None or t["suite"] == suite))


def key(row: dict) -> tuple[str, str, str, str]:
    return (row["suite"], row["name"], row["provider"], row["node"])


def keys(rows) -> list[tuple[str, str, str, str]]:
    return [(r.suite, r.name, r.provider, r.node) for r in rows]


def test_a_run_against_an_identical_one_lists_nothing():
    result = compare(load(copy_of(FULL)), load(FULL))
    assert not (result.new_failures or result.fixed or result.appeared or result.disappeared
                or result.new_crashes or result.perf_drops or result.kconfig
                or result.kernel or result.series or result.other_changes)
    assert result.perf_compared == 10
    assert not result.regressed and result.reasons == []


def test_a_pass_that_fails_now_is_a_new_failure():
    now = copy_of(FULL)
    row = first(now, "pass", "verbs")
    row.update(status="fail", message="ibv_post_send: -ENOMEM")
    result = compare(load(now), load(FULL))
    assert keys(result.new_failures) == [key(row)]
    change = result.new_failures[0]
    assert (change.before, change.now, change.message) == ("pass", "fail",
                                                           "ibv_post_send: -ENOMEM")
    assert result.regressed and result.reasons == ["1 new failure(s)"]


def test_an_error_and_a_skip_that_fails_now_are_new_failures_too():
    now = copy_of(FULL)
    errored, skipped = first(now, "pass", "pyverbs"), first(now, "skip")
    errored["status"] = "error"
    skipped["status"] = "fail"
    result = compare(load(now), load(FULL))
    assert sorted(keys(result.new_failures)) == sorted([key(errored), key(skipped)])


def test_a_new_failure_of_a_flaky_row_is_flaky_not_a_regression():
    now = copy_of(FULL)
    row = first(now, "pass", "verbs")
    row["status"] = "fail"
    result = compare(load(now), load(FULL), flaky={key(row)})
    assert result.new_failures == []
    assert keys(result.flaky) == [key(row)]
    assert not result.regressed


def test_flaky_applies_to_its_row_only():
    now = copy_of(FULL)
    rows = [t for t in now["tests"] if t["status"] == "pass"][:2]
    for row in rows:
        row["status"] = "fail"
    result = compare(load(now), load(FULL), flaky={key(rows[0])})
    assert keys(result.flaky) == [key(rows[0])]
    assert keys(result.new_failures) == [key(rows[1])]
    assert result.regressed


def test_rows_with_the_same_name_on_another_node_or_provider_are_separate():
    before = copy_of(FULL, run_id=FULL["run_id"])
    row = first(before, "pass", "pyverbs")
    before["tests"] += [dict(row, provider="siw"), dict(row, node="node9")]
    now = copy_of(before)
    flipped = first(now, "pass", "pyverbs")
    flipped["status"] = "fail"
    result = compare(load(now), load(before))
    assert keys(result.new_failures) == [key(row)]


def test_a_failure_that_passes_now_is_fixed_and_not_a_regression():
    before = BROKEN
    failing = first(before, "fail")
    now = copy_of(BROKEN, verdict="pass", crashes=[])
    next(t for t in now["tests"] if key(t) == key(failing))["status"] = "pass"
    result = compare(load(now), load(before))
    assert keys(result.fixed) == [key(failing)]
    assert result.fixed[0].message == failing["message"]
    assert len(result.vanished_crashes) == 1
    assert not result.regressed


def test_rows_that_appeared_or_disappeared_are_listed_but_do_not_regress():
    now = copy_of(FULL)
    gone = now["tests"].pop(0)
    added = dict(first(now, "pass"), name="test_brand_new")
    now["tests"].append(added)
    result = compare(load(now), load(FULL))
    assert keys(result.disappeared) == [key(gone)]
    assert result.disappeared[0].before == "pass" and result.disappeared[0].now == ""
    assert keys(result.appeared) == [key(added)]
    assert not result.regressed


def test_other_status_changes_are_apart():
    now = copy_of(FULL)
    row = first(now, "pass")
    row["status"] = "skip"
    result = compare(load(now), load(FULL))
    assert keys(result.other_changes) == [key(row)]
    assert not result.regressed


def test_a_row_seen_twice_keeps_its_failure():
    now = copy_of(FULL)
    row = first(now, "pass")
    now["tests"].insert(0, dict(row, status="fail"))
    result = compare(load(now), load(FULL))
    assert keys(result.new_failures) == [key(row)]


def test_a_new_crash_signature_regresses_once_for_both_nodes():
    now = copy_of(FULL, crashes=copy.deepcopy(BROKEN["crashes"]))
    result = compare(load(now), load(FULL))
    assert len(result.new_crashes) == 1
    crash = result.new_crashes[0]
    assert crash.signature == "warning|rxe_requester|rxe_sender|do_work"
    assert crash.title == "WARNING in rxe_requester" and crash.nodes == ["node1", "node2"]
    assert result.regressed and result.reasons == ["1 new crash signature(s)"]
    back = compare(load(FULL), load(now))
    assert len(back.vanished_crashes) == 1 and back.new_crashes == []
    assert not back.regressed


def test_a_crash_both_runs_have_is_not_new():
    now = copy_of(BROKEN)
    result = compare(load(now), load(BROKEN))
    assert result.new_crashes == [] and result.vanished_crashes == []


def test_a_waived_new_crash_is_listed_but_not_a_regression():
    crashes = copy.deepcopy(BROKEN["crashes"])
    for crash in crashes:
        crash["waived"] = "known rxe WARNING, fixed upstream"
    result = compare(load(copy_of(FULL, crashes=crashes)), load(FULL))
    assert result.new_crashes[0].waived == "known rxe WARNING, fixed upstream"
    assert not result.regressed


def test_a_crash_without_a_signature_matches_on_its_title():
    def unsigned(data):
        crashes = copy.deepcopy(data["crashes"])
        for crash in crashes:
            crash["signature"] = ""
        return crashes
    before = copy_of(BROKEN, run_id="before", crashes=unsigned(BROKEN))
    assert compare(load(copy_of(BROKEN, crashes=unsigned(BROKEN))),
                   load(before)).new_crashes == []
    other = unsigned(BROKEN)
    other[0]["title"] = "BUG: KASAN: use-after-free in rxe_comp_queue_pkt"
    result = compare(load(copy_of(BROKEN, crashes=other)), load(before))
    assert [c.signature for c in result.new_crashes] == [other[0]["title"]]


def set_metric(data: dict, name: str, metric: str, value: float) -> None:
    next(t for t in data["tests"] if t["suite"] == "perf" and t["name"] == name
         )["metrics"][metric] = value


def test_a_perf_drop_beyond_the_threshold_regresses():
    now = copy_of(FULL)
    set_metric(now, BW, "throughput_mbit_s", 60.0)        # 124.8 before: -52%
    result = compare(load(now), load(FULL))
    assert [(w.test, w.metric) for w in result.perf_drops] == [(BW, "throughput_mbit_s")]
    assert result.perf_drops[0].baseline_run == FULL["run_id"]
    assert result.regressed
    assert not compare(load(now), load(FULL), threshold_percent=60).regressed


def test_a_small_perf_drop_and_a_gain_are_not_listed():
    now = copy_of(FULL)
    set_metric(now, BW, "throughput_mbit_s", 110.0)                 # -12%
    set_metric(now, "test_rdma[ib_read_lat]", "latency_usec_avg", 100.0)   # faster
    result = compare(load(now), load(FULL))
    assert result.perf_drops == [] and not result.regressed


def test_a_verdict_that_went_from_pass_to_fail_regresses():
    result = compare(load(copy_of(FULL, verdict="fail")), load(FULL))
    assert result.regressed and result.reasons == ["verdict pass -> fail"]
    assert not compare(load(copy_of(FULL, verdict="error")), load(FULL)).regressed


def test_kconfig_from_the_requested_symbols():
    now = copy_of(FULL)
    now["kconfig"]["requested"][0]["got"] = "n"
    symbol = now["kconfig"]["requested"][0]["symbol"]
    result = compare(load(now), load(FULL))
    assert [(c.symbol, c.old, c.new) for c in result.kconfig] == [(symbol, "y", "n")]
    assert result.kconfig_from == "requested"
    assert not result.regressed


def test_kconfig_from_the_config_files_when_given(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.write_text("CONFIG_RDMA_RXE=m\nCONFIG_KASAN=y\n# CONFIG_SIW is not set\n")
    new.write_text("CONFIG_RDMA_RXE=y\n# CONFIG_KASAN is not set\nCONFIG_SIW=m\n")
    result = compare(load(copy_of(FULL)), load(FULL), current_config=new,
                     baseline_config=old)
    assert [(c.symbol, c.old, c.new) for c in result.kconfig] == [
        ("KASAN", "y", "n"), ("RDMA_RXE", "m", "y"), ("SIW", "n", "m")]
    assert result.kconfig_from == ".config"


def test_kernel_and_series_differences():
    now = copy_of(FULL)
    now["kernel"].update(commit="0123456789abcdef0123456789abcdef01234567", accel="kvm")
    patches = now["series"][0]["patches"]
    patches[0]["commit"] = "1111111111111111111111111111111111111111"
    dropped = patches.pop()
    result = compare(load(now), load(FULL))
    assert [(k.field, k.before, k.now) for k in result.kernel] == [
        ("commit", FULL["kernel"]["commit"], "0123456789abcdef0123456789abcdef01234567"),
        ("accel", "tcg", "kvm")]
    assert [(p.subject, p.change) for p in result.series] == [
        (patches[0]["subject"], "commit"), (dropped["subject"], "removed")]
    assert not result.regressed


def test_the_quickstart_before_typed_results_compares_with_the_full_run():
    old = json.loads((DATA / "quickstart-before-typed-results.json").read_text())
    result = compare(load(FULL), load(old))
    assert result.appeared and not result.new_failures
    assert json.loads(json.dumps(to_plain(result)))["baseline"] == old["run_id"]


def test_row_key_is_the_history_key():
    row = load(FULL).tests[0]
    assert row_key(row) == (row.suite, row.name, row.provider, row.node)
