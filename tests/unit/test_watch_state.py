"""The watcher's memory (harness/watch/state.py) and its reading of a
subject (model.py): each series once, a newer version drops a queued older
one, an older version after a newer one is skipped, a killed watcher's
running series is queued again, the cursor survives a restart."""
from __future__ import annotations

import pytest

from harness.watch.model import PatchRef, Series, parse_subject
from harness.watch.state import State, WatchState


def series(key: str, version: int = 1, name: str = "RDMA/rxe: Fix the counters",
           author: str = "Dev <dev@example.org>", when: str = "2026-12-01T10:00:00",
           patches: int = 2) -> Series:
    return Series(key=key, source="patchwork", name=name, version=version,
                  author=author, submitted=when, msgid=f"<{key}@example.org>",
                  tags=("rdma-next",),
                  patches=tuple(PatchRef(i, f"<{key}.{i}@example.org>", f"p{i}", 100 + i)
                                for i in range(1, patches + 1)))


@pytest.mark.parametrize("subject, expected", [
    ("[PATCH rdma-next v2 3/7] RDMA/rxe: Fix x", ("RDMA/rxe: Fix x", 2, ("rdma-next",))),
    ("[PATCH] mm/hmm: y", ("mm/hmm: y", 1, ())),
    ("[RFC PATCH v3 0/2] z", ("z", 3, ())),
    ("[PATCH for-rc] [PATCH 1/2] w", ("w", 1, ("for-rc",))),
    ("no prefix", ("no prefix", 1, ())),
])
def test_a_subject_gives_name_version_and_tags(subject, expected):
    assert parse_subject(subject) == expected


def test_each_series_is_queued_once_oldest_first(tmp_path):
    state = WatchState(tmp_path / "w.sqlite")
    b, a = series("pw:2", when="2026-12-01T11:00:00", name="b"), series("pw:1", name="a")
    assert state.offer(b) == (State.QUEUED, [])
    assert state.offer(a) == (State.QUEUED, [])
    assert state.offer(a) == (None, [])            # known: never again
    assert [s.key for s in state.queued()] == ["pw:1", "pw:2"]
    assert state.queued()[0] == a                  # the record comes back whole


def test_a_newer_version_drops_the_queued_one_and_an_older_one_is_skipped(tmp_path):
    state = WatchState(tmp_path / "w.sqlite")
    v1, v2 = series("pw:1"), series("pw:2", version=2, when="2026-12-02T10:00:00")
    state.offer(v1)
    assert state.offer(v2) == (State.QUEUED, [v1])
    assert [s.key for s in state.queued()] == ["pw:2"]
    assert not state.start("pw:1")                 # dropped: never started
    late = series("pw:0", version=1, when="2026-11-30T10:00:00")
    late = Series(**{**late.__dict__, "key": "pw:late"})
    assert state.offer(late)[0] == State.SUPERSEDED
    other = series("pw:3", author="Other <o@example.org>")
    assert state.offer(other)[0] == State.QUEUED   # another author: another series


def test_a_running_series_finishes_but_knows_it_was_superseded(tmp_path):
    state = WatchState(tmp_path / "w.sqlite")
    v1 = series("pw:1")
    state.offer(v1)
    assert state.start("pw:1")
    state.offer(series("pw:2", version=2))
    assert state.superseded_by(v1) == "pw:2"
    state.finish("pw:1", "run-1", "pass", "rdma-next", "superseded by pw:2")
    (entry,) = [e for e in state.entries() if e.series.key == "pw:1"]
    assert (entry.state, entry.run_id, entry.reason) == (State.TESTED, "run-1",
                                                         "superseded by pw:2")


def test_a_restart_keeps_the_cursor_and_queues_a_killed_run_again(tmp_path):
    path = tmp_path / "w.sqlite"
    state = WatchState(path)
    assert state.cursor("patchwork") is None
    state.set_cursor("patchwork", "42")
    state.offer(series("pw:1"))
    state.offer(series("pw:2", name="other"))
    state.start("pw:1")
    state.start("pw:2")
    state.finish("pw:2", "run-2", "fail", "rdma-next")
    again = WatchState(path)                       # the watcher was SIGKILLed
    assert again.cursor("patchwork") == "42"
    assert [s.key for s in again.queued()] == ["pw:1"]     # pw:2 is never run again


def test_the_authors_count_for_the_day(tmp_path):
    state = WatchState(tmp_path / "w.sqlite")
    for i in range(3):
        state.offer(series(f"pw:{i}", name=f"s{i}"))
        state.start(f"pw:{i}")
    day = state.entries()[0].series.submitted[:10]
    import datetime
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert state.tested_today("Other <other@example.org>", today) == 0
    assert state.tested_today("dev <DEV@example.org>", today) == 3   # any case
    assert day == "2026-12-01"


def test_the_patch_that_did_not_apply_is_read_from_the_series_stage():
    from harness.results.model import RunResult
    from harness.watch.watcher import not_applied_index
    error = ("series: 0002.patch (series counters) does not apply: \"RDMA/rxe: Count\"\n"
             "  hunk 1 of drivers/infiniband/sw/rxe/rxe_comp.c does not apply")
    assert not_applied_index(RunResult("r", "p", error=error)) == 2
    assert not_applied_index(RunResult("r", "p", error="kconfig: make tinyconfig failed")) is None
    assert not_applied_index(RunResult("r", "p")) is None


def test_a_tested_series_asked_again_is_queued_once_more(tmp_path):
    state = WatchState(tmp_path / "w.sqlite")
    state.offer(series("pw:1"))
    assert state.start("pw:1")
    state.finish("pw:1", "run-1", "fail", "rdma-next")
    assert state.requeue("pw:9") is None                 # never seen
    again = state.requeue("pw:1")
    assert again is not None and again.key == "pw:1"
    assert [s.key for s in state.queued()] == ["pw:1"]
    (entry,) = state.entries()
    assert (entry.state, entry.run_id, entry.verdict) == (State.QUEUED, "", "")
    assert state.start("pw:1")
    assert state.requeue("pw:1") is not None             # running: it stays running
    assert state.queued() == [] and state.entries()[0].state == State.RUNNING
