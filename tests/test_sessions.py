"""Sessions and their peers: flags, the peer limit (also under concurrent joins), messages, the turn log."""

import itertools
import threading
from datetime import UTC, datetime, timedelta

import pytest

import pgrecall
from conftest import run_together, table_counts
from pgrecall import errors
from pgrecall.driver import PeerConfig


def setting(db, key, value):
    db.execute("select pgrecall.set_tenant_setting('acme', %s, %s)", (key, value))


def tasks(db):
    return sorted(db.execute("""
        select t.task_type, s.name, o.name, t.message_offset
          from acme.work_task t left join acme.peer s on s.id = t.sender_id left join acme.peer o on o.id = t.observer_id
    """).fetchall(), key=lambda r: (r[0], r[1] or "", r[2] or "", r[3]))


@pytest.mark.parametrize("globally,observed,observes", list(itertools.product([True, False], repeat=3)))
def test_the_flags_decide_exactly_which_tasks_are_queued(acme, db, globally, observed, observes):
    acme.add_peer("cy", "human")
    acme.add_peer("dee", "human")
    acme.set_peer_config("ana", observed_globally=globally)
    s = acme.create_session("matrix")
    acme.add_session_peers(s, [{"peer": "ana", "observed_by_others": observed},
                               {"peer": "ben", "observe_others": observes},
                               "bot",                                         # defaults: observes no one
                               {"peer": "cy", "observe_others": True},        # observes, but leaves first
                               {"peer": "dee", "observe_others": True, "observed_by_others": False}])
    acme.remove_session_peers(s, ["cy"])
    added = acme.add_messages(s, [{"actor": "ana", "body": "I live in Lisbon"}])
    expected = []
    if globally:
        expected.append(("representation", "ana", None, 1))
    if observed and observes:
        expected.append(("representation", "ana", "ben", 1))
    if observed:
        expected.append(("representation", "ana", "dee", 1))     # dee observes; dee not being observed is irrelevant
    assert tasks(db) == sorted(expected, key=lambda r: (r[0], r[1] or "", r[2] or "", r[3]))
    assert added == [pgrecall.driver.MessageAdded(1, len(expected))]
    # dee is not observed by others: its message is only for its global representation (and ana, who does
    # not observe, gets nothing); ben's view of dee is not formed.
    db.execute("delete from acme.projection_dependency where kind = 'work_task'")
    db.execute("delete from acme.work_task")
    acme.add_messages(s, [{"actor": "dee", "body": "hello"}])
    assert tasks(db) == [("representation", "dee", None, 2)]


def test_tenant_defaults_and_call_defaults_fill_the_flags(acme, db):
    s = acme.create_session("defaults")
    rows = acme.add_session_peers(s, ["ana", {"peer": "ben", "observed_by_others": False}],
                                  defaults={"observe_others": True})
    assert [(r.peer, r.observe_others, r.observed_by_others) for r in rows] == [
        ("ana", True, True), ("ben", True, False)]
    setting(db, "observe_others", "true")
    setting(db, "observed_by_others", "false")
    acme.add_session_peers(s, ["bot"])
    assert acme.session_peer_config(s, "bot").observe_others is True
    assert acme.session_peer_config(s, "bot").observed_by_others is False
    # set one key, the other stays
    cfg = acme.set_session_peer_config(s, "ana", {"observe_others": False})
    assert (cfg.observe_others, cfg.observed_by_others, cfg.active) == (False, True, True)
    # re-adding without flags keeps what was set
    acme.add_session_peers(s, ["ana"])
    assert acme.session_peer_config(s, "ana").observe_others is False
    # the peer-level flag follows the tenant default until set
    assert acme.peer_config("ana") == PeerConfig(peer="ana", kind="human", observed_globally=True,
                                                 follows_tenant_default=True)
    setting(db, "observed_globally", "false")
    assert acme.peer_config("ana").observed_globally is False
    assert acme.set_peer_config("ana", observed_globally=True).follows_tenant_default is False


def test_bad_session_calls_name_the_problem_and_write_nothing(acme, db):
    s = acme.create_session("bad")
    acme.add_session_peers(s, ["ana"])
    before = table_counts(db)
    cases = [
        (errors.UnknownSession, lambda: acme.add_messages(999, [{"actor": "ana", "body": "x"}])),
        (errors.NotInSession, lambda: acme.add_messages(s, [{"actor": "ana", "body": "x"}, {"actor": "ben", "body": "y"}])),
        (errors.UnknownPeer, lambda: acme.add_messages(s, [{"actor": "zed", "body": "x"}])),
        (errors.InvalidArgument, lambda: acme.add_messages(s, [{"body": "no actor"}])),
        (errors.InvalidArgument, lambda: acme.add_messages(s, [{"actor": "ana", "body": "x", "session_id": 3}])),
        (errors.UnknownPeer, lambda: acme.add_session_peers(s, ["ana", "zed"])),
        (errors.InvalidArgument, lambda: acme.add_session_peers(s, [{"peer": "ben", "observe_others": "yes"}])),
        (errors.InvalidArgument, lambda: acme.add_session_peers(s, ["ben", "ben"])),
        (errors.InvalidArgument, lambda: acme.add_session_peers(s, ["ben"], defaults={"observe_other": True})),
        (errors.NotInSession, lambda: acme.session_peer_config(s, "ben")),
        (errors.NotInSession, lambda: acme.remove_session_peers(s, ["ben"])),
        (errors.ScopeNotAuthorised, lambda: acme.session_peers(s, scopes=["other"])),
        (errors.InvalidArgument, lambda: acme.set_peer_config("ana", observed_globally="no")),
        # a plain append may name only an existing session of its own scope
        (errors.UnknownSession, lambda: acme.append("x", role="user", session_id=999)),
        (errors.UnknownSession, lambda: acme.append("x", role="user", session_id=s, scope="other",
                                                    scopes=["default", "other"])),
    ]
    for cls, call in cases:
        with pytest.raises(cls) as info:
            call()
        assert str(info.value)
    assert "not in session" in str(pytest.raises(errors.NotInSession, cases[1][1]).value)
    assert "(row 2)" in str(pytest.raises(errors.NotInSession, cases[1][1]).value)
    assert table_counts(db) == before


def test_a_plain_append_into_a_session_is_kept_but_queues_nothing(acme, db):
    s = acme.create_session("plain")
    assert acme.append("x", role="user", session_id=s) == 1
    assert tasks(db) == []


def test_the_peer_limit_is_enforced_by_the_database(acme, db):
    setting(db, "max_peers_in_session", "2")
    s = acme.create_session("small")
    acme.add_session_peers(s, ["ana", "ben"])
    before = table_counts(db)
    with pytest.raises(errors.SessionFull) as info:
        acme.add_session_peers(s, ["bot"])
    assert "at most 2 peers" in str(info.value)
    assert table_counts(db) == before
    # leaving frees a place; coming back needs one
    acme.remove_session_peers(s, ["ben"])
    acme.add_session_peers(s, ["bot"])
    with pytest.raises(errors.SessionFull):
        acme.add_session_peers(s, ["ben"])
    # even a direct insert by the owner is refused
    acme.add_peer("cy", "human")
    with pytest.raises(Exception) as raw:
        db.execute("insert into acme.session_peer (session_id, peer_id, observe_others, observed_by_others) "
                   "select %s, id, false, true from acme.peer where name = 'cy'", (s,))
    assert raw.value.sqlstate == "PR121"
    assert db.execute("select active_peers from acme.session where id = %s", (s,)).fetchone()[0] == 2


def test_concurrent_joins_never_exceed_the_limit(acme, db, conninfo):
    names = [f"p{i:02d}" for i in range(14)]
    for n in names:
        acme.add_peer(n, "human")
    s = acme.create_session("crowd")
    barrier = threading.Barrier(len(names))
    outcomes = {}

    def join(name):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                              scopes=["default"]) as mem:
            barrier.wait()
            try:
                mem.add_session_peers(s, [name])
                outcomes[name] = "joined"
            except errors.SessionFull:
                outcomes[name] = "full"

    run_together(join, names, barrier)
    assert sorted(outcomes.values()).count("joined") == 10
    assert sorted(outcomes.values()).count("full") == 4
    assert db.execute("select count(*) from acme.session_peer where session_id = %s and left_at is null",
                      (s,)).fetchone()[0] == 10
    assert db.execute("select active_peers from acme.session where id = %s", (s,)).fetchone()[0] == 10


def test_messages_take_the_session_scope_and_a_role_from_the_peer_kind(acme, db):
    s = acme.create_session("roles")
    acme.add_session_peers(s, ["ana", "bot"])
    at = datetime(2026, 1, 1, tzinfo=UTC)
    added = acme.add_messages(s, [{"actor": "ana", "body": "hi", "occurred_at": at},
                                  {"actor": "bot", "body": "hello"},
                                  {"actor": "bot", "body": "[tool output]", "source_role": "tool"}])
    assert [a.offset for a in added] == [1, 2, 3]
    rows = db.execute("select session_id, source_role, kind, occurred_at = %s from acme.observation order by log_offset",
                      (at,)).fetchall()
    assert rows == [(s, "user", "message", True), (s, "assistant", "message", False), (s, "tool", "message", False)]
    assert acme.add_messages(s, []) == []


T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_turn_log_gap_of_exactly_two_hours_stays_in_the_session(acme, db):
    first = acme.log_turn("support:ana", "ana", "hello", occurred_at=T0)
    assert first.opened
    same = acme.log_turn("support:ana", "bot", "hi ana", occurred_at=T0 + timedelta(hours=2))
    assert (same.session_id, same.opened) == (first.session_id, False)
    # the gap is measured from the session's last turn, not its first
    later = acme.log_turn("support:ana", "ana", "still there?", occurred_at=T0 + timedelta(hours=4))
    assert (later.session_id, later.opened) == (first.session_id, False)
    assert [p.peer for p in acme.session_peers(first.session_id)] == ["ana", "bot"]


def test_turn_log_gap_of_two_hours_and_a_second_opens_a_new_session(acme, db):
    first = acme.log_turn("support:ana", "ana", "hello", occurred_at=T0)
    nxt = acme.log_turn("support:ana", "ana", "back again", occurred_at=T0 + timedelta(hours=2, seconds=1))
    assert nxt.opened and nxt.session_id != first.session_id
    # the bot that logs the conversation joins it with the speaker: it hears every turn
    assert [p.peer for p in acme.session_peers(nxt.session_id)] == ["ana", "bot"]
    # another log has its own sessions
    other = acme.log_turn("support:ben", "ben", "hi", occurred_at=T0 + timedelta(hours=2, seconds=2))
    assert other.opened and other.session_id not in (first.session_id, nxt.session_id)
    names = db.execute("select turn_log, count(*) from acme.session group by 1 order by 1").fetchall()
    assert names == [("support:ana", 2), ("support:ben", 1)]
    # the gap follows the tenant setting
    setting(db, "turn_gap_seconds", "60")
    again = acme.log_turn("support:ben", "ben", "and again", occurred_at=T0 + timedelta(hours=2, seconds=63))
    assert again.opened


def test_concurrent_turns_of_one_log_open_one_session(acme, conninfo):
    barrier = threading.Barrier(4)
    turns = []

    def turn(i):
        with pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="bot",
                              scopes=["default"]) as mem:
            barrier.wait()
            turns.append(mem.log_turn("support:ana", "ana", f"turn {i}", occurred_at=T0))

    run_together(turn, range(4), barrier)
    assert len({t.session_id for t in turns}) == 1
    assert sum(t.opened for t in turns) == 1


def test_session_ids_used_before_sessions_existed_become_sessions(db, conninfo):
    from pgrecall import sources

    before = [m.version for m in sources.migrations() if m.version < 9][-1]
    db.execute("select pgrecall.create_tenant('legacy', %s)", (before,))
    db.execute("insert into legacy.scope (name) values ('default'), ('other')")
    db.execute("insert into legacy.peer (name, kind) values ('ana', 'human')")
    db.execute("""insert into legacy.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, session_id, body)
                  select 'default', n, 'message', now(), 'user', 1, s, 'turn ' || n
                    from (values (1, 7), (2, 7), (3, 3), (4, null)) v(n, s)""")
    db.execute("update legacy.scope set log_watermark = 4 where name = 'default'")
    db.execute("select * from pgrecall.upgrade_tenant('legacy')")
    assert db.execute("select id, scope, name, messages from legacy.session order by id").fetchall() == [
        (3, "default", "session 3", 1), (7, "default", "session 7", 2)]
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_legacy_app"), tenant="legacy", principal="ana",
                           scopes=["default", "other"])
    assert mem.create_session("new") == 8
    assert mem.append("turn 5", role="user", session_id=7) == 5
    with pytest.raises(errors.UnknownSession):
        mem.append("turn 6", role="user", session_id=5)
    mem.close()
