"""The turn after (plpgsql/queues/embedding_queue.sql, _queue_turns_before): input version 2 embeds a memory
with the turns before and after its first evidence. A worker running beside a conversation embeds a memory
while its turn is still the latest one, with no turn after it; when the reply comes, the memory is queued
again and embedded with it, as a memory loaded after the whole conversation would be.

Real PostgreSQL, real all-MiniLM-L6-v2 embeddings computed by the real worker.
"""

from pgrecall.embedder import get_embedder, to_literal
from pgrecall.worker import Worker

QUESTION = "I joined a zqpottery class last month."
REPLY = "The Thursday zqkiln class, we made two bowls."


def drain(conninfo) -> None:
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


def said(mem, text: str, actor: str, **kw) -> int:
    offset = mem.append(text, role="user", actor=actor, **kw)
    got = mem.remember(text, evidence=[offset], purposes=["converse"], **kw)
    assert got.created, got
    return got.memory_id


def embedded_input(db, memory_id: int) -> str:
    return db.execute("select acme._embedding_input(%s, 2)", (memory_id,)).fetchone()[0]


def window_words(db, memory_id: int) -> set[str]:
    row = db.execute("select array(select u.lexeme from unnest(window_tsv) u) from acme.memory_embedding "
                     "where memory_id = %s and input_version = 2", (memory_id,)).fetchone()
    return set(row[0]) if row else set()


def stored_vector(db, memory_id: int) -> str | None:
    row = db.execute("select embedding::text from acme.memory_embedding where memory_id = %s", (memory_id,)).fetchone()
    return row[0] if row else None


def test_a_memory_embedded_before_the_reply_came_is_embedded_again_with_it(acme, conninfo, db):
    question = said(acme, QUESTION, "ana")
    drain(conninfo)
    alone = stored_vector(db, question)
    assert alone is not None and "zqkiln" not in window_words(db, question)

    reply = said(acme, REPLY, "ben")
    status = acme.embedding_status()
    assert status.queued == 2, "the reply's memory, and the question's again: its text now has a turn after it"
    drain(conninfo)
    assert acme.embedding_status().queued == 0
    assert REPLY in embedded_input(db, question)
    assert "zqkiln" in window_words(db, question)
    assert stored_vector(db, question) != alone, "the vector was computed again, with the reply"
    assert {i.memory_id for i in acme.recall("zqkiln", mode="lexical").items} == {reply}

    # a third turn borders the reply, not the question: only the reply's memory is queued again
    said(acme, "Lovely, see you Thursday", "ana")
    queued = {r[0] for r in db.execute("select memory_id from acme.embedding_job")}
    assert reply in queued and question not in queued


def test_a_reply_the_memorys_audience_may_not_all_see_does_not_queue_it(acme, conninfo, db):
    s = acme.create_session("ana and the bot")
    acme.add_session_peers(s, ["ana", "bot"])
    [turn] = acme.add_messages(s, [{"actor": "ana", "body": "I keep bees behind the barn"}])
    bees = acme.remember("Ana keeps bees", evidence=[turn.offset], purposes=["converse"], audience="ana",
                         principal="ana").memory_id
    drain(conninfo)
    before = stored_vector(db, bees)
    # a note only the bot may see: a text ana may read may not hold it
    acme.add_messages(s, [{"actor": "bot", "body": "zqhives: ask how many", "audience": ["bot"]}])
    assert db.execute("select count(*) from acme.embedding_job where memory_id = %s", (bees,)).fetchone()[0] == 0
    drain(conninfo)
    assert stored_vector(db, bees) == before and "zqhive" not in window_words(db, bees)


def test_a_worker_holding_the_text_without_the_reply_stores_nothing(acme, conninfo, db):
    question = said(acme, QUESTION, "ana")
    with conninfo.connect(user="pgrecall_acme_worker") as worker:
        [job] = worker.execute("select * from acme.claim_embedding_jobs('worker-a', 10)").fetchall()
        assert job[0] == question and REPLY not in job[2]
        said(acme, REPLY, "ben")  # comes while worker-a embeds the question alone
        vec = to_literal(get_embedder().embed([job[2]])[0])
        stored = worker.execute("select acme.complete_embedding_jobs('worker-a', %s, %s, %s, %s, %s)",
                                ([question], [job[1]], [vec], job[3], job[4])).fetchone()[0]
    assert stored == 0, "its generation is an old one"
    drain(conninfo)
    assert REPLY in embedded_input(db, question) and "zqkiln" in window_words(db, question)


def test_turns_appended_together_queue_only_the_memory_of_the_turn_before_them(acme, conninfo, db):
    s = acme.create_session("a batch")
    acme.add_session_peers(s, ["ana", "ben", "bot"])
    [first, second] = acme.add_messages(s, [{"actor": "ana", "body": "I sail on Saturdays"},
                                            {"actor": "ben", "body": "I row on Sundays"}])
    sails = acme.remember("Ana sails on Saturdays", evidence=[first.offset], purposes=["converse"],
                          audience="ana").memory_id
    rows = acme.remember("Ben rows on Sundays", evidence=[second.offset], purposes=["converse"],
                         audience="ben").memory_id
    drain(conninfo)
    acme.add_messages(s, [{"actor": "ana", "body": "zqregatta next week?"},
                          {"actor": "ben", "body": "Yes, the zqregatta."}])
    assert {r[0] for r in db.execute("select memory_id from acme.embedding_job")} == {rows}
    drain(conninfo)
    assert "zqregatta" in window_words(db, rows) and "zqregatta" not in window_words(db, sails)


def switch(conninfo, model: str, version: int) -> int:
    with conninfo.connect(user="pgrecall_acme_admin") as admin:
        return admin.execute("select acme.set_embedding_version(%s, %s)", (model, version)).fetchone()[0]


def test_setting_the_version_in_force_keeps_the_reply_s_re_embedding(acme, conninfo, db):
    """`pgrecall embeddings rebuild --input-version 2` on a tenant already at 2 switched to the stamp in
    force: it took the question's job as done (its vector has that stamp) and the reply never reached it."""
    question = said(acme, QUESTION, "ana")
    drain(conninfo)
    said(acme, REPLY, "ben")
    switch(conninfo, "all-MiniLM-L6-v2", 2)
    assert question in {r[0] for r in db.execute("select memory_id from acme.embedding_job")}
    drain(conninfo)
    assert "zqkiln" in window_words(db, question)


def test_switching_away_and_back_keeps_the_reply_s_re_embedding(acme, conninfo, db):
    """A switch back to a stamp drops the jobs that were queued only because of the switch away (their
    vectors are current again), not a job queued because a reply came after the vector was made."""
    question = said(acme, QUESTION, "ana")
    drain(conninfo)
    assert switch(conninfo, "all-MiniLM-L6-v2", 1) >= 1
    said(acme, REPLY, "ben")  # the question's v2 vector now lacks its turn after
    switch(conninfo, "all-MiniLM-L6-v2", 2)
    queued = {r[0] for r in db.execute("select memory_id from acme.embedding_job")}
    assert question in queued
    drain(conninfo)
    assert "zqkiln" in window_words(db, question)


def _waiting_on_a_lock(db, call: str) -> bool:
    return db.execute("select count(*) from pg_stat_activity where wait_event_type = 'Lock' and query like %s",
                      (f"%{call}%",)).fetchone()[0] == 1


def test_a_switch_while_a_worker_stores_under_the_old_version_leaves_nothing_stale(acme, conninfo, db):
    """A worker checked the version in force, then a switch committed before it locked its job: it stored a
    version-2 vector in a tenant now at version 1, and the switch had not queued the memory (its vector had
    the new stamp then). The drain that followed did nothing; the vector stayed stale until a rebuild."""
    import threading

    import psycopg

    from conftest import wait_until

    memory = said(acme, "I keep bees on the roof of the workshop.", "ana")
    admin = psycopg.connect(conninfo.dsn(user="pgrecall_acme_admin"), autocommit=True)
    model = acme.embedding_status().model
    admin.execute("select acme.set_embedding_version(%s, 1)", (model,))
    drain(conninfo)
    # A job queued for more than the stamp (--all here; a reply after a lease, elsewhere) is not dropped by
    # a switch back to the stamp of the memory's vector.
    admin.execute("select acme.set_embedding_version(%s, 2)", (model,))
    admin.execute("select acme.rebuild_embeddings(true)")
    worker = psycopg.connect(conninfo.dsn(user="pgrecall_acme_worker"), autocommit=True)
    job = worker.execute("select memory_id, generation, input, model, input_version, text_input"
                         " from acme.claim_embedding_jobs('w1', 10) where memory_id = %s", (memory,)).fetchone()
    assert job is not None and job[4] == 2
    vector, text_vector = get_embedder().embed([job[2], job[5]])
    stored: dict = {}

    def complete() -> None:
        stored["count"] = worker.execute(
            "select acme.complete_embedding_jobs('w1', array[%s::bigint], array[%s::bigint], array[%s::halfvec],"
            " %s, 2, array[%s::halfvec])", (memory, job[1], to_literal(vector), job[3], to_literal(text_vector))
        ).fetchone()[0]

    def switch() -> None:
        admin.execute("select acme.set_embedding_version(%s, 1)", (model,))

    with psycopg.connect(conninfo.dsn()) as holder:
        # the job row held a moment, so that the worker has checked the version and waits to lock its job
        holder.execute("select 1 from acme.embedding_job where memory_id = %s for update", (memory,))
        storing = threading.Thread(target=complete)
        storing.start()
        wait_until(lambda: _waiting_on_a_lock(db, "complete_embedding_jobs"), what="the worker to wait for its job")
        switching = threading.Thread(target=switch)
        switching.start()
        switching.join(2)  # it may wait for the job too
        holder.commit()
    storing.join(30)
    switching.join(30)
    assert not storing.is_alive() and not switching.is_alive()
    drain(conninfo)
    status = acme.embedding_status()
    assert (status.input_version, status.current, status.stale, status.queued) == (1, 1, 0, 0), status
    assert db.execute("select input_version from acme.memory_embedding where memory_id = %s",
                      (memory,)).fetchone() == (1,)


def test_a_reply_in_a_transaction_still_open_when_the_worker_claims_reaches_the_vector(acme, conninfo, db):
    """The reply's append found the question's memory queued and not yet claimed, and left it: its job
    would read the turns when it ran. It ran before the reply's transaction committed, without the reply,
    and nothing queued it again: the vector and its window never held the reply, with nothing queued or
    stale to say so."""
    question = said(acme, QUESTION, "ana")
    with conninfo.connect(user="pgrecall_acme_app") as replying, replying.transaction():
        replying.execute("select acme.append_observation('ben', array['default'], 'default', %s, 'user')", (REPLY,))
        drain(conninfo)  # the reply is not committed yet
    drain(conninfo)
    status = acme.embedding_status()
    assert (status.current, status.stale, status.queued) == (1, 0, 0), status
    assert REPLY in embedded_input(db, question)
    assert "zqkiln" in window_words(db, question)


def test_under_input_version_1_a_reply_queues_nothing_again(acme, conninfo, db):
    """Version 1 embeds a memory's own title and body: a reply changes no memory's text, so it must not
    bump the question's job (a worker holding it would drop its vector and embed the same text again)."""
    switch(conninfo, "all-MiniLM-L6-v2", 1)
    question = said(acme, QUESTION, "ana")
    generation = db.execute("select generation from acme.embedding_job where memory_id = %s",
                            (question,)).fetchone()[0]
    said(acme, REPLY, "ben")
    assert db.execute("select generation from acme.embedding_job where memory_id = %s",
                      (question,)).fetchone()[0] == generation
    drain(conninfo)
    said(acme, "Lovely, see you Thursday", "ana")
    queued = {r[0] for r in db.execute("select memory_id from acme.embedding_job")}
    assert queued == {max(queued)}, "only the newest memory waits: no earlier one was queued again"


def _two_embedded_memories_of_one_turn(acme, conninfo) -> tuple[int, int, int]:
    """A session, and two memories citing its one turn, embedded: (session, first memory, second memory)."""
    s = acme.create_session("ana and the bot")
    acme.add_session_peers(s, ["ana", "bot"])
    [turn] = acme.add_messages(s, [{"actor": "ana", "body": "I keep bees and I sail on Saturdays"}])
    bees, sails = (acme.remember(body, evidence=[turn.offset], purposes=["converse"], audience="ana").memory_id
                   for body in ("Ana keeps bees", "Ana sails on Saturdays"))
    assert bees < sails
    drain(conninfo)
    return s, bees, sails


def _one_after_another(db, conninfo, held_job: int, calls) -> dict:
    """Each call (name, what it runs, the function it waits in) started while another session holds one
    embedding job, and only once the call before it waits for a lock; then the job is let go. What failed,
    by name."""
    import threading

    import psycopg

    from conftest import wait_until

    failed: dict = {}

    def running(name, call):
        def run() -> None:
            try:
                call()
            except psycopg.Error as e:
                failed[name] = e
        return threading.Thread(target=run)

    threads = []
    with psycopg.connect(conninfo.dsn()) as holder:
        holder.execute("select 1 from acme.embedding_job where memory_id = %s for update", (held_job,))
        for name, call, waits_in in calls:
            threads.append(running(name, call))
            threads[-1].start()
            wait_until(lambda waits_in=waits_in: _waiting_on_a_lock(db, waits_in), what=f"{name} to wait for a job")
        holder.commit()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return failed


def _reply(conninfo, session: int):
    import psycopg

    def append() -> None:
        with psycopg.connect(conninfo.dsn(user="pgrecall_acme_app"), autocommit=True) as app:
            app.execute("select acme.append_observation('bot', array['default'], 'default', %s, 'assistant',"
                        " 'message', 'bot', %s)", ("Bees and boats, lovely", session))
    return append


def test_an_append_and_a_storing_worker_take_a_turns_jobs_in_one_order(acme, conninfo, db):
    """Two memories of one turn, embedded, queued again and leased; a worker stores them while the next turn's
    append queues them again. The worker locks their jobs by memory id; the append locked them in the order
    it read them, the second first once the first had been rewritten (its row moved). Each then held
    a job the other waited for, and PostgreSQL broke the deadlock by failing one of them (40P01)."""
    import psycopg

    s, bees, sails = _two_embedded_memories_of_one_turn(acme, conninfo)
    db.execute("update acme.memory set confidence = confidence where id = %s", (bees,))  # its row moves
    admin = psycopg.connect(conninfo.dsn(user="pgrecall_acme_admin"), autocommit=True)
    admin.execute("select acme.rebuild_embeddings(true)")
    worker = psycopg.connect(conninfo.dsn(user="pgrecall_acme_worker"), autocommit=True)
    jobs = worker.execute("select memory_id, generation, input, model, input_version, text_input"
                          " from acme.claim_embedding_jobs('w1', 10) order by memory_id").fetchall()
    assert [j[0] for j in jobs] == [bees, sails]
    vectors = [to_literal(v) for v in get_embedder().embed([j[2] for j in jobs])]

    def complete() -> None:
        worker.execute("select acme.complete_embedding_jobs('w1', %s, %s, %s::halfvec[], %s, %s)",
                       ([j[0] for j in jobs], [j[1] for j in jobs], vectors, jobs[0][3], jobs[0][4]))

    # the second job held a moment: the append comes to it, then the worker
    failed = _one_after_another(db, conninfo, sails, [("append", _reply(conninfo, s), "append_observation"),
                                                      ("worker", complete, "complete_embedding_jobs")])
    assert failed == {}, failed
    drain(conninfo)
    assert acme.embedding_status().queued == 0


def test_an_append_and_a_switch_back_take_a_turns_jobs_in_one_order(acme, conninfo, db):
    """A switch away and back: the switch back drops the jobs the switch away queued only for the stamp. It
    deleted them in the order it read them; an append queueing the same memories again (the turn after) locks
    them by memory id. With the first job's row moved, each held a job the other waited for (40P01)."""
    import psycopg

    s, bees, sails = _two_embedded_memories_of_one_turn(acme, conninfo)
    admin = psycopg.connect(conninfo.dsn(user="pgrecall_acme_admin"), autocommit=True)
    model, version = db.execute("select (select value #>> '{}' from acme.setting where key = 'embedding_model'),"
                                " (select (value #>> '{}')::int from acme.setting"
                                "   where key = 'embedding_input_version')").fetchone()
    admin.execute("select acme.set_embedding_version(%s, %s)", (model, 3 - version))  # away: both queued
    db.execute("update acme.embedding_job set enqueued_at = enqueued_at where memory_id = %s", (bees,))  # moves

    def switch_back() -> None:
        admin.execute("select acme.set_embedding_version(%s, %s)", (model, version))

    # the second job held a moment: the switch comes to it first, then the append
    failed = _one_after_another(db, conninfo, sails, [("switch", switch_back, "set_embedding_version"),
                                                      ("append", _reply(conninfo, s), "append_observation")])
    assert failed == {}, failed
    drain(conninfo)
    assert acme.embedding_status().queued == 0
    assert {r[0] for r in db.execute("select memory_id from acme.memory_embedding where model = %s"
                                      " and input_version = %s", (model, version))} >= {bees, sails}
