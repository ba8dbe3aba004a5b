"""Passages: the chunking rule, partitions per scope, erasure, embedding by the worker, and message search."""


import psycopg
import pytest

from conftest import table_counts, wait_until
from pgrecall import errors, sources
from pgrecall.embedder import get_embedder, to_literal
from pgrecall.worker import Worker

LONG = (
    "Lisboa é a capital de Portugal. As ruas de Alfama sobem até ao castelo! Há elétricos amarelos, "
    "miradouros e fado ao fim da tarde. O rio Tejo é largo; chamam-lhe mar da palha… "
) * 6 + "\n\n" + (
    "日本の首都は東京です。 The second paragraph switches to English. It talks about tea, trains and temples. "
    "Kyoto has more than a thousand temples. Some are very old. "
) * 5 + "\n" + "x" * 1500


def spans(db, text, max_chars=1000, target=700, overlap=200):
    return db.execute("select ordinal, start_byte, end_byte, body from acme._passage_spans(%s, %s, %s, %s)",
                      (text, max_chars, target, overlap)).fetchall()


def passages(db, where="true", params=()):
    return db.execute(f"select p.scope, o.log_offset, p.ordinal, p.start_byte, p.end_byte, p.body, o.body "
                      f"from acme.passage p join acme.observation o on o.id = p.observation_id where {where} "
                      f"order by p.id", params).fetchall()


def worker(conninfo, **kw):
    return Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker"), **kw)


# -- the chunking rule ----------------------------------------------------------------------------------------------

def test_a_short_message_is_one_passage_without_its_surrounding_whitespace(acme, db):
    assert spans(db, "  Olá, João! 🙂 Where is the café?\n") == [(1, 2, 2 + len("Olá, João! 🙂 Where is the café?".encode()),
                                                                 "Olá, João! 🙂 Where is the café?")]
    assert spans(db, " \n\t ") == [] and spans(db, "") == []


def test_long_text_is_split_on_sentences_and_paragraphs_with_exact_byte_spans(acme, db):
    rows = spans(db, LONG)
    raw = LONG.encode()
    assert len(rows) >= 5
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    for _, start, end, body in rows:
        assert raw[start:end].decode() == body          # the span decodes to exactly the passage's text
        assert body == body.strip() and len(body) <= 700 + 200
    # every sentence of the text is inside some passage: nothing is lost at a boundary
    for sentence in ["O rio Tejo é largo; chamam-lhe mar da palha…", "日本の首都は東京です。", "Some are very old."]:
        assert any(sentence in r[3] for r in rows), sentence
    # no passage crosses the paragraph break, and neighbours within a paragraph overlap by a sentence
    assert not any("palha…" in r[3] and "日本" in r[3] for r in rows)
    first, second = rows[0], rows[1]
    assert second[1] < first[2], "the second passage starts inside the first (overlap)"
    # a word longer than the target is cut hard, in pieces no longer than the target
    assert any(set(r[3]) == {"x"} for r in rows) and all(len(r[3]) <= 700 for r in rows if set(r[3]) == {"x"})


def test_sizes_are_tenant_settings(acme, db):
    db.execute("select pgrecall.set_tenant_setting('acme', 'passage_max_chars', '100')")
    db.execute("select pgrecall.set_tenant_setting('acme', 'passage_target_chars', '60')")
    text = "One short sentence here. " * 8
    off = acme.append(text, role="user", actor="ana")
    rows = passages(db, "o.log_offset = %s", (off,))
    assert len(rows) > 2 and all(len(r[5]) <= 60 + 200 for r in rows)
    with pytest.raises(psycopg.Error) as caught:
        db.execute("select pgrecall.set_tenant_setting('acme', 'passage_max_chars', '5')")
    assert isinstance(errors.translate(caught.value), errors.InvalidSetting)


# -- written with the append -----------------------------------------------------------------------------------------

def test_single_and_batched_appends_write_registered_queued_passages(acme, db):
    session = acme.create_session("chat")
    one = acme.append("I live in Lisbon", role="user", actor="ana", session_id=session)
    batch = acme.append_many([{"body": "hello there", "source_role": "user", "actor": "ben"},
                              {"body": LONG, "source_role": "document", "kind": "document"},
                              {"body": "   ", "source_role": "user"}])
    rows = passages(db)
    assert [(r[1], r[2]) for r in rows][:2] == [(one, 1), (batch[0], 1)]
    assert {r[1] for r in rows} == {one, batch[0], batch[1]}  # a blank body has no passage
    for _, _, _, start, end, body, source in rows:
        assert source.encode()[start:end].decode() == body
    n = len(rows)
    assert db.execute("select count(*) from acme.projection_dependency where kind = 'passage'").fetchone()[0] == n
    # queued for the worker: the messages' passages (the tenant's passage_embedding is 'messages')
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 2
    assert db.execute("select passages from acme.passage_stat where scope = 'default'").fetchone()[0] == n
    s, a = db.execute("select session_id, actor_id from acme.passage p where p.body = 'I live in Lisbon'").fetchone()
    assert s == session and a == db.execute("select id from acme.peer where name = 'ana'").fetchone()[0]


def test_a_refused_batch_writes_no_passage(acme, db):
    acme.append("before", role="user")
    before = table_counts(db)
    with pytest.raises(errors.UnknownPeer):
        acme.append_many([{"body": "fine", "source_role": "user"},
                          {"body": "bad", "source_role": "user", "actor": "mallory"}])
    assert table_counts(db) == before


# -- partitions -----------------------------------------------------------------------------------------------------

def partition_of(db, passage_body):
    return db.execute("select tableoid::regclass::text from acme.passage where body = %s", (passage_body,)).fetchone()[0]


def test_each_scope_gets_a_partition_and_searches_prune_to_it(acme, db):
    acme.add_scope("project.x:1")
    acme.append("a note in the new scope", role="user", scope="project.x:1", scopes=["project.x:1"])
    acme.append("a note in default", role="user")
    assert partition_of(db, "a note in the new scope").startswith("acme.passage_project_x_1_")
    assert partition_of(db, "a note in default").startswith("acme.passage_default_")
    assert db.execute("select count(*) from acme.passage_unprovisioned").fetchone()[0] == 0
    # each partition carries the HNSW and full-text indexes
    kinds = db.execute("""select c.relname, am.amname from pg_inherits i join pg_class c on c.oid = i.inhrelid
                          join pg_index x on x.indrelid = c.oid join pg_class ic on ic.oid = x.indexrelid
                          join pg_am am on am.oid = ic.relam
                          where i.inhparent = 'acme.passage'::regclass""").fetchall()
    per_partition = {}
    for rel, am in kinds:
        per_partition.setdefault(rel, set()).add(am)
    assert len(per_partition) == 4 and all({"hnsw", "gin", "btree"} <= a for a in per_partition.values())
    plan = "\n".join(r[0] for r in db.execute(
        "explain select * from acme.passage where scope = any (array['other']) and tsv @@ 'note'::tsquery"))
    assert "passage_other_" in plan and "passage_default_" not in plan and "unprovisioned" not in plan


def test_a_scope_older_than_passages_lands_in_the_default_partition_and_is_erased_from_it(db, conninfo):
    import pgrecall

    versions = [m.version for m in sources.migrations()]
    before = versions[versions.index(10) - 1]
    db.execute("select pgrecall.create_tenant('acme', %s)", (before,))
    db.execute("insert into acme.scope (name) values ('legacy')")
    db.execute("insert into acme.peer (name, kind) values ('ana', 'human')")
    db.execute("""insert into acme.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body,
                                                data_subject_id)
                  select 'legacy', g, 'message', now(), 'user', (select id from acme.peer), 'zqlegacy turn ' || g,
                         'subject-' || (g % 2) from generate_series(1, 4) g""")
    db.execute("update acme.scope set log_watermark = 4 where name = 'legacy'")
    db.execute("select * from pgrecall.upgrade_tenant('acme')")
    # the observations already in the log got their passages, in the DEFAULT partition
    assert db.execute("select count(*) from acme.passage_unprovisioned where scope = 'legacy'").fetchone()[0] == 4
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 4
    mem = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal="ana", scopes=["legacy"])
    admin = pgrecall.connect(conninfo.dsn(user="pgrecall_acme_admin"), tenant="acme")
    try:
        hits = mem.search_messages("zqlegacy", mode="lexical")
        assert len(hits.items) == 4 and {h.scope for h in hits.items} == {"legacy"}
        receipt = admin.erase({"data_subject": "subject-1"}, reason="asked", actor="dpo")
        assert receipt.rows_erased["passage"] == 2 and set(receipt.residual.values()) == {0}
        assert "passage" in receipt.residual
        left = db.execute("select body from acme.passage_unprovisioned order by body").fetchall()
        assert left == [("zqlegacy turn 2",), ("zqlegacy turn 4",)]
        assert db.execute("select passages from acme.passage_stat where scope = 'legacy'").fetchone()[0] == 2
        # a scope added now gets its own partition; the old one stays in the default
        mem.add_scope("fresh")
        mem.append("new words", role="user", scope="fresh", scopes=["fresh"])
        assert partition_of(db, "new words").startswith("acme.passage_fresh_")
    finally:
        mem.close()
        admin.close()


def test_erasure_residual_counts_a_passage_left_in_the_default_partition(db, conninfo):
    """The residual sees the DEFAULT partition: a passage that survives there is a visible failure."""
    versions = [m.version for m in sources.migrations()]
    db.execute("select pgrecall.create_tenant('acme', %s)", (versions[versions.index(10) - 1],))
    db.execute("insert into acme.scope (name) values ('legacy')")
    db.execute("insert into acme.peer (name, kind) values ('ana', 'human')")
    db.execute("""insert into acme.observation (scope, log_offset, kind, occurred_at, source_role, actor_id, body,
                                                data_subject_id)
                  values ('legacy', 1, 'message', now(), 'user', (select id from acme.peer), 'zqgone', 's')""")
    db.execute("select * from pgrecall.upgrade_tenant('acme')")
    # sabotage: the DEFAULT partition silently refuses to delete
    db.execute("create function acme.zz_keep() returns trigger language plpgsql as $$ begin return null; end $$")
    db.execute("create trigger zz_keep before delete on acme.passage_unprovisioned for each row "
               "execute function acme.zz_keep()")
    with pytest.raises(psycopg.errors.ForeignKeyViolation) as refused:  # the passage stands: its observation stays
        db.execute("select acme.erase('dpo', '{\"data_subject\": \"s\"}', 'x')")
    assert refused.value.diag.constraint_name == "passage_observation_id_fkey"
    assert refused.value.diag.table_name == "passage"
    db.execute("alter table acme.passage drop constraint passage_observation_id_fkey")
    receipt = db.execute("select residual from acme.erase('dpo', '{\"data_subject\": \"s\"}', 'x')").fetchone()[0]
    assert receipt["passage"] == 1


# -- erasure ---------------------------------------------------------------------------------------------------------

def test_erasing_a_peer_removes_their_passages_and_vectors(acme, db, conninfo, acme_admin):
    session = acme.create_session("chat")
    acme.append("zqbenword one", role="user", actor="ben", session_id=session)
    acme.append("ana keeps this", role="user", actor="ana", session_id=session)
    worker(conninfo).drain(refresh_stats=False)
    receipt = acme_admin.erase({"peer": "ben"}, reason="account closed", actor="dpo")
    assert set(receipt.residual.values()) == {0} and receipt.rows_erased["passage"] == 1
    assert [r[5] for r in passages(db)] == ["ana keeps this"]
    assert db.execute("select count(*) from acme.passage where embedding is not null").fetchone()[0] == 1


# -- the embedding worker ---------------------------------------------------------------------------------------------

def admin(conninfo, sql, params=()):
    with conninfo.connect(user="pgrecall_acme_admin") as conn:
        return conn.execute(sql, params).fetchall()


def embedded(db):
    return db.execute("select o.kind, count(*) from acme.passage p join acme.observation o on o.id = p.observation_id "
                      "where p.embedding is not null group by 1 order by 1").fetchall()


def test_by_default_a_documents_passages_are_not_embedded_and_a_scope_may_choose_all(acme, db, conninfo):
    # A document is cut into many passages; its memory carries its meaning for recall. Embedding every
    # passage too made storing a document cost several vectors instead of one.
    acme.add_scope("papers")
    acme.append("I adopted a puppy named Rex", role="user", actor="ana")
    acme.append(LONG, role="document", kind="document")
    acme.append(LONG, role="document", kind="document", scope="papers", scopes=["papers"])
    cut = db.execute("select count(*) from acme.passage where scope = 'papers'").fetchone()[0]
    assert cut > 3
    w = worker(conninfo)
    assert w.drain(refresh_stats=False).passages_stored == 1
    assert embedded(db) == [("message", 1)]
    # the document's passages keep their lexical index: message search finds them
    assert any("Kyoto" in h.body for h in acme.search_messages("kyoto temples", mode="lexical").items)
    # one scope chooses every passage: its document is queued at once, the other scope's is not
    assert admin(conninfo, "select * from acme.set_scope_passage_embedding('papers', 'all')") == [
        ("papers", "all", cut, 0)]
    assert worker(conninfo).drain(refresh_stats=False).passages_stored == cut
    assert db.execute("select count(*) from acme.passage where scope = 'papers' and embedding is not null"
                      ).fetchone()[0] == cut
    assert db.execute("select count(*) from acme.passage where scope = 'default' and embedding is null"
                      ).fetchone()[0] > 3
    found = acme.search_messages("temples in Kyoto", mode="semantic", scopes=["papers"])
    assert found.semantic_available and any("Kyoto" in h.body for h in found.items)
    # back to the tenant's rule (NULL): nothing more is queued, the stored vectors stay
    assert admin(conninfo, "select * from acme.set_scope_passage_embedding('papers', null)") == [
        ("papers", "messages", 0, 0)]


def test_the_tenant_setting_decides_for_scopes_without_their_own(acme, db, conninfo):
    acme.add_scope("quiet")
    admin(conninfo, "select * from acme.set_scope_passage_embedding('quiet', 'none')")
    acme.append("I adopted a puppy named Rex", role="user", actor="ana")
    acme.append("a quiet message", role="user", actor="ana", scope="quiet", scopes=["quiet"])
    acme.append(LONG, role="document", kind="document")
    assert db.execute("select j.scope from acme.passage_embedding_job j join acme.passage p on p.id = j.passage_id"
                      ).fetchall() == [("default",)]
    admin(conninfo, "select acme.set_setting('passage_embedding', '\"all\"')")
    queued = db.execute("select scope, count(*) from acme.passage_embedding_job group by 1").fetchall()
    assert queued == [("default", db.execute("select count(*) from acme.passage where scope = 'default'").fetchone()[0])]
    admin(conninfo, "select acme.set_setting('passage_embedding', '\"none\"')")
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0
    # set_embedding_version re-queues by the same rule: nothing here
    admin(conninfo, "select acme.set_embedding_version('all-MiniLM-L6-v2', 1)")
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0
    found = acme.search_messages("adopted puppy", scopes=["default", "quiet"])
    assert not found.semantic_available
    assert found.meta.semantic_reason == "these scopes embed no passages (passage_embedding none)"
    assert [h.body for h in found.items] == ["I adopted a puppy named Rex"]  # the lexical arm answers


def test_a_bad_passage_embedding_choice_is_refused_and_changes_nothing(acme, db, conninfo):
    with pytest.raises(psycopg.Error) as bad:
        admin(conninfo, "select * from acme.set_scope_passage_embedding('default', 'some')")
    assert bad.value.sqlstate == "PR107"
    with pytest.raises(psycopg.Error) as unknown:
        admin(conninfo, "select * from acme.set_scope_passage_embedding('nowhere', 'all')")
    assert unknown.value.sqlstate == "PR131"  # unknown scope, which refines PR103 (scope not authorised)
    with pytest.raises(psycopg.Error) as setting:
        admin(conninfo, "select acme.set_setting('passage_embedding', '\"most\"')")
    assert setting.value.sqlstate == "PR006"
    assert db.execute("select passage_embedding from acme.scope where name = 'default'").fetchone()[0] is None
    assert db.execute("select value #>> '{}' from acme.setting where key = 'passage_embedding'").fetchone()[0] == \
        "messages"
    with pytest.raises(errors.NotPermitted):  # a scope's embedding cost is the admin's to choose
        acme.set_scope_passage_embedding("default", "all")


def test_the_worker_embeds_passages_with_stamps(acme, db, conninfo):
    admin(conninfo, "select * from acme.set_scope_passage_embedding('default', 'all')")
    acme.append("I adopted a puppy named Rex", role="user", actor="ana")
    acme.append(LONG, role="document", kind="document")
    n = db.execute("select count(*) from acme.passage").fetchone()[0]
    stats = worker(conninfo, batch_size=4).drain(refresh_stats=False)
    assert stats.passages_stored == n and stats.stored == 0
    rows = db.execute("select embedding_model, embedding_input_version, count(*) from acme.passage group by 1, 2").fetchall()
    assert rows == [("all-MiniLM-L6-v2", 2, n)]
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0
    # the stored vector is the model's embedding of the passage's own text
    cos = db.execute("select 1 - (embedding <=> %s::vector) from acme.passage where body like 'I adopted%%'",
                     (to_literal(get_embedder().embed(["I adopted a puppy named Rex"])[0]),)).fetchone()[0]
    assert cos > 0.999
    assert acme.embedding_status().passages_current == n


def test_an_expired_passage_lease_moves_the_job_and_the_late_result_is_dropped(acme, db, conninfo):
    acme.append("a passage to embed", role="user")
    db.execute("select pgrecall.set_tenant_setting('acme', 'embedding_lease_seconds', '0.5')")
    with conninfo.connect(user="pgrecall_acme_worker") as app:
        first = app.execute("select * from acme.claim_passage_embedding_jobs('worker-a', 10)").fetchall()
        assert len(first) == 1 and first[0][2] == "a passage to embed"
        assert app.execute("select count(*) from acme.claim_passage_embedding_jobs('worker-b', 10)").fetchone()[0] == 0
        second = wait_until(
            lambda: app.execute("select * from acme.claim_passage_embedding_jobs('worker-b', 10)").fetchall(),
            timeout=10, what="worker-a's lease to run out")
        assert [r[0] for r in second] == [first[0][0]]
        vec = to_literal(get_embedder().embed([first[0][2]])[0])
        args = ([first[0][0]], [first[0][1]], [vec], first[0][3], first[0][4])
        stored_b = app.execute("select acme.complete_passage_embedding_jobs('worker-b', %s, %s, %s, %s, %s)",
                               ([second[0][0]], [second[0][1]], [vec], second[0][3], second[0][4])).fetchone()[0]
        stored_a = app.execute("select acme.complete_passage_embedding_jobs('worker-a', %s, %s, %s, %s, %s)",
                               args).fetchone()[0]
    assert (stored_b, stored_a) == (1, 0)
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0


@pytest.mark.slow
def test_a_passage_worker_killed_mid_batch_loses_nothing_and_its_jobs_come_back_at_once(acme, conninfo, db):
    from test_embedding_worker import killed_mid_batch_then_resumed

    acme.append_many([{"body": f"passage number {i}: " + " ".join(f"w{(i * 7 + j) % 97}" for j in range(60)),
                       "source_role": "user"} for i in range(200)])
    stored = lambda: db.execute("select count(*) from acme.passage where embedding is not null").fetchone()[0]
    out = killed_mid_batch_then_resumed(db, conninfo, "passage_embedding", batch=200, stored=stored)
    assert "and 200 passages" in out
    assert db.execute("select count(*) from acme.passage where embedding is not null").fetchone()[0] == 200
    assert db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0] == 0


def test_a_version_change_hides_stale_passage_vectors_until_rebuilt(acme, db, conninfo):
    acme.append("I adopted a puppy named Rex", role="user", actor="ana")
    w = worker(conninfo)
    w.drain(refresh_stats=False)
    assert acme.search_messages("my new dog").semantic_available
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        app.execute("select acme.set_embedding_version('all-MiniLM-L6-v2', 1)")
    found = acme.search_messages("my new dog")
    assert not found.semantic_available and found.meta.semantic_reason == "no passage embeddings yet"
    assert acme.embedding_status().passages_stale == 1 and acme.embedding_status().passages_queued == 1
    w.drain(refresh_stats=False)
    found = acme.search_messages("my new dog")
    assert found.semantic_available and [h.body for h in found.items] == ["I adopted a puppy named Rex"]
    # rebuild_embeddings(true) queues every passage again
    with conninfo.connect(user="pgrecall_acme_admin") as app:
        assert app.execute("select acme.rebuild_embeddings(true)").fetchone()[0] == 1


def test_the_driver_sets_a_scopes_choice_and_says_what_it_queued(acme, acme_admin, db):
    acme.append(LONG, role="document", kind="document")
    waiting = db.execute("select count(*) from acme.passage_embedding_job").fetchone()[0]
    passages = db.execute("select count(*) from acme.passage").fetchone()[0]
    choice = acme_admin.set_scope_passage_embedding("default", "all")
    assert (choice.scope, choice.policy, choice.queued, choice.dropped) == ("default", "all", passages - waiting, 0)
    back = acme_admin.set_scope_passage_embedding("default", None)  # the tenant's choice again: messages
    assert (back.policy, back.queued, back.dropped) == ("messages", 0, passages - waiting)
