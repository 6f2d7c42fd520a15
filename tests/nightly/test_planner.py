"""How a night's pending sessions become batches (`pipeline.nightly.planner`)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.nightly.planner import batch_id_for, home_of, plan


def entry(sid: str, cwd: str | None, first: str, *, slug: str | None = None, size: int = 100) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": cwd, "slug": slug or (cwd or "").replace("/", "-"), "firstAt": first,
            "sizeBytes": size}


@pytest.mark.parametrize(
    ("cwd", "home"),
    [
        ("/home/ana/src/ledger", "/home/ana"),
        ("/Users/liza", "/Users/liza"),
        ("C:\\Users\\namma\\.claude", "C:\\Users\\namma"),
        ("c:/users/Namma/work", "c:/users/Namma"),
        ("/root/x", "/root"),
        # outside every home: the drive, then the first two folders
        ("C:\\WeGameApps\\rail_apps\\OasisEraEditor\\UGCProjects\\HunHuan", "C:\\WeGameApps\\rail_apps"),
        ("/local/nick/vsim", "/local/nick"),
        ("/tmp", "/tmp"),
        (None, None),
        ("", None),
    ],
)
def test_home_of(cwd: str | None, home: str | None) -> None:
    assert home_of(cwd) == home


def test_one_home_s_projects_share_batches_in_the_order_they_started() -> None:
    # Two projects of one machine, and a third machine: the unitree home's `not a git repository` in
    # two projects was split across two batches that each saw it once.
    entries = [
        entry("b1", "/home/u/catkin_ws/src/launch", "2026-06-10T12:00:00Z"),
        entry("a1", "/home/u", "2026-06-10T10:00:00Z"),
        entry("a2", "/home/u", "2026-06-11T08:00:00Z"),
        entry("z1", "/Users/other/app", "2026-06-09T00:00:00Z"),
    ]
    batches = plan(entries)  # homes in name order
    assert [b.session_ids for b in batches] == [["z1"], ["a1", "b1", "a2"]]
    assert batches[1].slug is None and batches[1].home == "/home/u"  # several projects
    assert batches[0].slug == "-Users-other-app" and batches[0].home == "/Users/other"
    assert [b.batch_id for b in batches] == [batch_id_for(["z1"]), batch_id_for(["a1", "b1", "a2"])]
    assert plan(list(reversed(entries))) == batches  # deterministic whatever the order given


def test_batches_stay_bounded_and_sessions_without_a_folder_keep_to_their_project() -> None:
    entries = [entry(f"s{i}", "/home/u/p", f"2026-01-0{i}T00:00:00Z") for i in range(1, 6)]
    entries += [entry("n1", None, "2026-01-01T00:00:00Z", slug="-x"), entry("n2", None, "2026-01-02T00:00:00Z", slug="-x")]
    by_count = plan(entries, max_sessions=2)
    assert [b.session_ids for b in by_count] == [["s1", "s2"], ["s3", "s4"], ["s5"], ["n1", "n2"]]
    by_bytes = plan(entries[:3], {"s1": 50}, max_bytes=120)  # s1 has 50 new bytes, the others 100
    assert [(b.session_ids, b.new_bytes) for b in by_bytes] == [(["s1"], 50), (["s2"], 100), (["s3"], 100)]
    # a session that does not know its folder goes where its project's sessions went
    lost = entry("x9", None, "2026-01-09T00:00:00Z", slug="-home-u-p")
    assert [b.session_ids for b in plan([*entries[:2], lost])] == [["s1", "s2", "x9"]]
    with pytest.raises(ValueError):
        plan(entries, max_sessions=0)
