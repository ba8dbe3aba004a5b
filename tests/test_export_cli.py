"""pgrecall export and pgrecall import --export (issue #50, item 2): the JSON lines format with its header, and
an export replayed into a fresh tenant, where recall answers the same questions with the same memories."""

import json

import pgrecall
from pgrecall.worker import Worker
from test_export import story
from test_install_paths import run_cli

QUESTIONS = ["Where does zqpeer live?", "zqporto", "Who enjoys a quiet game?", "zqpeer"]


def export_file(conninfo, tmp_path, *selector):
    out = tmp_path / "export.jsonl"
    done = run_cli("export", "--tenant", "acme", *selector, "--out", str(out),
                   env={"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin")})
    return out, done


def import_file(conninfo, path, tenant="fresh", check=True):
    return run_cli("import", "--export", str(path), "--tenant", tenant,
                   env={"PGRECALL_DSN": conninfo.dsn(user=f"pgrecall_{tenant}_app")}, check=check)


def recalled(mem, question, mode, keep=None):
    return [i.body for i in mem.recall(question, mode=mode, limit=10).items
            if i.item == "memory" and (keep is None or i.memory_id in keep)]


def test_the_export_file_has_a_versioned_header_and_a_line_per_row(acme, acme_admin, conninfo, tmp_path):
    story(acme, conninfo)
    out, done = export_file(conninfo, tmp_path, "--subject", "u-42")
    lines = out.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0])
    assert head["format"] == "pgrecall-export" and head["format_version"] == 1
    assert head["tenant"] == "acme" and head["selector"] == {"data_subject": "u-42"}
    assert head["schema_version"] == acme.schema_info().schema_version
    assert head["exported_at"] and head["pgrecall_version"] == pgrecall.__version__
    rows = [json.loads(line) for line in lines[1:]]
    assert head["rows"] == len(rows) == len(acme_admin.export({"data_subject": "u-42"}))
    assert head["kinds"] == {k: sum(1 for r in rows if r["kind"] == k) for k in {r["kind"] for r in rows}}
    assert all(set(r) == {"kind", "key", "record"} for r in rows)
    assert f"exported {len(rows)} rows" in done.stderr
    assert out.stat().st_mode & 0o077 == 0  # personal data: not readable by others
    # to stdout without --out
    printed = run_cli("export", "--tenant", "acme", "--subject", "u-42",
                      env={"PGRECALL_DSN": conninfo.dsn(user="pgrecall_acme_admin")}).stdout.splitlines()
    assert len(printed) == len(lines) and json.loads(printed[0])["rows"] == head["rows"]


def test_an_unknown_subject_exports_a_header_and_nothing_else(acme, conninfo, tmp_path):
    out, _ = export_file(conninfo, tmp_path, "--subject", "nobody-by-this-name")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["rows"] == 0


def test_import_names_whose_export_it_replayed_in_the_words_export_used(acme, conninfo, tmp_path, make_tenant):
    # a new user saw "imported the export of {'data_subject': 'u-42'} ...": a Python dict, where export said
    # "exported 0 rows of data subject ..."
    out, done = export_file(conninfo, tmp_path, "--subject", "nobody-by-this-name")
    assert "rows of data subject nobody-by-this-name from tenant acme" in done.stderr
    make_tenant("fresh")
    assert import_file(conninfo, out).stdout.splitlines()[0] == (
        "imported the export of data subject nobody-by-this-name from tenant acme into tenant fresh: nothing")


def test_an_export_imports_into_a_fresh_tenant_and_recall_answers_the_same(acme, acme_admin, conninfo, tmp_path,
                                                                           make_tenant):
    story(acme, conninfo)
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    exported = {r.record["id"] for r in acme_admin.export({"data_subject": "u-42"}) if r.kind == "memory"}
    make_tenant("fresh")
    with pgrecall.connect(conninfo.dsn(user="pgrecall_fresh_app"), tenant="fresh") as fresh:
        fresh.add_peer("ana", "agent")  # a peer of that name is there already, of another kind: it stays
    done = import_file(conninfo, out)
    assert "3 observation" in done.stdout and "2 memory" in done.stdout, done.stdout
    # u-42's alias of Ben: nothing imported names Ben (u-43's memory of him stays in acme), so it has no entity here
    assert "not imported:" in done.stdout and "1 entity_alias" in done.stdout.split("not imported:")[1]
    # the turn that justified the correction of u-42's memory goes in with the correction (a new user read it
    # under "not imported"); the one that corrected u-43's memory, another subject's, does not
    imported, skipped = done.stdout.split("not imported:")
    assert "1 memory_correction_evidence" in imported and "1 memory_correction_evidence" in skipped, done.stdout
    Worker("fresh", conninfo=conninfo.dsn(user="pgrecall_fresh_worker")).drain()
    with pgrecall.connect(conninfo.dsn(user="pgrecall_fresh_app"), tenant="fresh", principal="bot",
                          scopes=["default"]) as fresh:
        for question in QUESTIONS:
            for mode in ("lexical", "hybrid"):
                there = recalled(acme, question, mode, keep=exported)
                assert there, (question, mode)
                assert recalled(fresh, question, mode) == there, (question, mode)
        # the memory with its history, the fact and the alias, under the same data subject
        memory = next(i for i in fresh.recall("zqporto", mode="lexical").items
                      if i.item == "memory" and i.body == "zqpeer lives in zqporto")
        assert fresh.read(memory.memory_id, purpose="converse").revision == 2
        assert [f.object for f in fresh.facts_as_of("zqpeer", "lives_in")] == ["zqporto"]
        # and what came from u-42 there is erased with u-42 there
        with pgrecall.connect(conninfo.dsn(user="pgrecall_fresh_admin"), tenant="fresh") as admin:
            again = admin.export({"data_subject": "u-42"})
            assert {r.kind for r in again} >= {"observation", "memory", "memory_revision", "fact", "peer", "session"}
            receipt = admin.erase({"data_subject": "u-42"}, reason="request", actor="dpo")
            assert set(receipt.residual.values()) == {0} and receipt.observations_erased == 3


def test_a_bad_export_file_imports_nothing(acme, conninfo, tmp_path, make_tenant, db):
    story(acme, conninfo)
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    make_tenant("fresh")
    lines = out.read_text(encoding="utf-8").splitlines()
    observations = "select count(*) from fresh.observation"

    # a memory the tenant refuses, after the turns went in: the whole import is rolled back
    rows = [json.loads(line) for line in lines]
    for r in rows[1:]:
        if r["kind"] == "memory":
            r["record"]["purposes"] = ["gossip"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    failed = import_file(conninfo, bad, check=False)
    assert failed.returncode == 1 and "nothing was imported" in failed.stderr, failed.stderr
    assert db.execute(observations).fetchone()[0] == 0

    # cut short, from a newer pgrecall, not an export at all
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({**json.loads(lines[0]), "format_version": 99}) + "\n", encoding="utf-8")
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"speaker": "ana", "role": "user", "text": "hi"}) + "\n", encoding="utf-8")
    for path, said in ((short, "cut short"), (newer, "version 99"), (chat, "not a pgrecall export")):
        refused = import_file(conninfo, path, check=False)
        assert refused.returncode == 1 and said in refused.stderr, refused.stderr
    assert db.execute(observations).fetchone()[0] == 0


def test_export_and_import_name_a_tenant_that_does_not_exist_as_such(acme, conninfo, tmp_path):
    """Its login role does not exist: the tenant does not exist (exit 4, as tenant dump says), not a database
    that cannot be reached (exit 3)."""
    done = run_cli("export", "--tenant", "nosuch", "--subject", "u-42",
                   env={"PGRECALL_DSN": conninfo.dsn(user="pgrecall_nosuch_admin")}, check=False)
    assert done.returncode == 4, done.stderr
    assert "tenant 'nosuch' does not exist" in done.stderr and "cannot reach" not in done.stderr
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    done = import_file(conninfo, out, tenant="nosuch", check=False)
    assert done.returncode == 4, done.stderr
    assert "tenant 'nosuch' does not exist" in done.stderr and "cannot reach" not in done.stderr


def test_a_malformed_export_row_is_refused_naming_its_line_and_field(acme, conninfo, tmp_path, make_tenant, db):
    """An export edited by hand (or by an attacker) was half-read: a missing field or one of another type was
    an internal error (KeyError, TypeError, exit 70), a revision of 10**12 built a list that long before
    anything was refused, and a refused scope name was reported at line 0."""
    story(acme, conninfo)
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    make_tenant("fresh")
    lines = out.read_text(encoding="utf-8").splitlines()

    def edited(name, kind, change, header=None):
        rows = [json.loads(line) for line in lines]
        line = next(n for n, r in enumerate(rows[1:], start=2) if r["kind"] == kind)
        change(rows[line - 1]["record"])
        if header:
            rows[0].update(header)
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
        return path, line

    cases = [
        (edited("no_body", "observation", lambda r: r.pop("body")), "has no 'body'"),
        (edited("offset", "observation", lambda r: r.update(log_offset="7")), "'log_offset' must be an integer"),
        (edited("names", "observation", lambda r: r.update(names="ana")), "'names' must be an object"),
        (edited("evidence", "memory", lambda r: r.update(evidence="1")), "'evidence' must be an array of integers"),
        (edited("revision", "memory", lambda r: r.update(revision=10**12)), "revision"),
        (edited("known", "fact", lambda r: r.update(known="[garbage,)")), "'known' must be a time range"),
        (edited("scope", "observation", lambda r: r.update(scope="../../etc")), "invalid scope name"),
        # "yes" (or 1) counted as pinned: a memory pinned, into every session-start bundle, by an edited word
        (edited("pinned", "memory", lambda r: r.update(pinned="yes")), "'pinned' must be a boolean"),
        (edited("pinned_one", "memory", lambda r: r.update(pinned=1)), "'pinned' must be a boolean"),
    ]
    for (path, line), said in cases:
        refused = import_file(conninfo, path, check=False)
        assert refused.returncode == 1 and f"{path.name}:{line}: " in refused.stderr, refused.stderr
        assert said in refused.stderr and "internal error" not in refused.stderr, refused.stderr
    selector, _ = edited("selector", "memory", lambda r: None, header={"selector": "u-42"})
    refused = import_file(conninfo, selector, check=False)
    assert refused.returncode == 1 and f'{selector.name}:1: the header\'s "selector"' in refused.stderr, refused.stderr
    assert db.execute("select (select count(*) from fresh.observation) + (select count(*) from fresh.memory)"
                      ).fetchone()[0] == 0


def test_an_export_that_cannot_be_one_history_is_refused_naming_its_line(acme, conninfo, tmp_path, make_tenant, db):
    """Hand-edited exports were half-read: a time without its zone was an internal error (TypeError comparing it
    with the others, exit 70); memories superseding one another in a cycle, or one itself, imported a copy of
    one or none of them, and memories derived from one another in a cycle, or one from itself, were imported
    as if told; a second row for one revision, or a kept revision after the current text, was
    dropped without a word; a duplicate decision retiring a memory outside its pair retired it for another pair
    and skipped that memory's own supersession."""
    story(acme, conninfo)
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    make_tenant("fresh")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    revised = {r["record"]["memory_id"] for r in rows if r.get("kind") == "memory_revision"}
    memories = [n for n, r in enumerate(rows) if r.get("kind") == "memory"]
    unrevised = next(n for n in memories if rows[n]["record"]["id"] not in revised)
    fact = next(n for n, r in enumerate(rows) if r.get("kind") == "fact")

    def edited(name, change, extra=()):
        copy = json.loads(json.dumps(rows))
        change(copy)
        copy.extend(extra)
        copy[0]["rows"] = len(copy) - 1
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in copy) + "\n", encoding="utf-8")
        return path

    def record(n, **fields):
        return lambda copy: copy[n]["record"].update(fields)

    first, second = (rows[n]["record"] for n in memories[:2])
    revision = {"memory_id": rows[unrevised]["record"]["id"], "revision": 1, "body": "an older text"}
    cases = [
        (edited("naive_time", record(memories[0], created_at="2026-12-07T21:59:36")), memories[0] + 1,
         "field 'created_at' must be an ISO 8601 time with its zone"),
        (edited("naive_range", record(fact, known='["2026-12-07 21:59:40",)')), fact + 1,
         "field 'known' must be a time range"),
        (edited("self", record(memories[0], superseded_by=first["id"])), memories[0] + 1,
         f"makes a cycle: memory {first['id']} -> {first['id']}"),
        (edited("cycle", lambda c: (record(memories[0], superseded_by=second["id"])(c),
                                    record(memories[1], superseded_by=first["id"])(c))), memories[0] + 1,
         f"makes a cycle: memory {first['id']} -> {second['id']} -> {first['id']}"),
        (edited("derived_self", record(memories[0], derived_from=[first["id"]])), memories[0] + 1,
         f"field 'derived_from' makes a cycle: memory {first['id']} -> {first['id']}"),
        (edited("derived_cycle", lambda c: (record(memories[1], derived_from=[first["id"]])(c),
                                            record(memories[0], derived_from=[second["id"]])(c))), memories[0] + 1,
         f"field 'derived_from' makes a cycle: memory {first['id']} -> {second['id']} -> {first['id']}"),
        (edited("twice", record(unrevised, revision=3),
                [{"kind": "memory_revision", "key": "a", "record": revision}] * 2), len(rows) + 2,
         f"revision 1 of memory {revision['memory_id']} is on line {len(rows) + 1} already"),
        (edited("later", record(unrevised, revision=2),
                [{"kind": "memory_revision", "key": "a", "record": {**revision, "revision": 5}}]), len(rows) + 1,
         "field 'revision' is 5, but memory"),
        (edited("retired", lambda c: None, [{"kind": "duplicate_decision", "key": "d", "record": {
            "memory_low": first["id"], "memory_high": second["id"], "decision": "supersede", "reason": "same",
            "retired_memory": first["id"] + second["id"] + 1}}]), len(rows) + 1,
         "field 'retired_memory' is"),
    ]
    for path, line, said in cases:
        refused = import_file(conninfo, path, check=False)
        assert refused.returncode == 1 and f"{path.name}:{line}: " in refused.stderr, refused.stderr
        assert said in refused.stderr and "internal error" not in refused.stderr, refused.stderr
    assert db.execute("select (select count(*) from fresh.observation) + (select count(*) from fresh.memory)"
                      ).fetchone()[0] == 0


def test_an_edited_turn_or_range_is_refused_in_one_line_naming_its_line(acme, conninfo, tmp_path, make_tenant, db):
    """A turn whose names lacked its speaker was an internal error (KeyError, exit 70); a fact retracted before it
    was believed (a range ending before it begins) was imported as believed now; and a refusal the server gave
    with a hint was shown with a literal backslash-n before the hint."""
    story(acme, conninfo)
    out, _ = export_file(conninfo, tmp_path, "--subject", "u-42")
    make_tenant("fresh")
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    def edited(name, kind, change):
        copy = json.loads(json.dumps(rows))
        n = next(n for n, r in enumerate(copy) if r.get("kind") == kind)
        change(copy[n]["record"])
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in copy) + "\n", encoding="utf-8")
        return path, n + 1

    cases = [
        (edited("speaker", "observation", lambda r: r["names"].pop("actor_id")), "field 'names' has no 'actor_id'"),
        (edited("backwards", "fact", lambda r: r.update(known='["2026-12-07 21:59:40+00","2026-01-01 00:00:00+00")',
                                                         retraction_reason="edited")),
         "field 'known' must be a time range"),
    ]
    span, _ = edited("span", "fact_evidence", lambda r: r.update(byte_end=10**30))
    fact_line = next(n for n, r in enumerate(rows, start=1) if r.get("kind") == "fact"
                     and r["record"]["id"] == next(r for r in rows if r.get("kind") == "fact_evidence")["record"]["fact_id"])
    cases.append(((span, fact_line), "out of range (nothing was imported) (hint: An offset"))  # the fact quoting it
    for (path, line), said in cases:
        refused = import_file(conninfo, path, check=False)
        assert refused.returncode == 1 and f"{path.name}:{line}: " in refused.stderr, refused.stderr
        assert said in refused.stderr and "\\n" not in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert db.execute("select (select count(*) from fresh.observation) + (select count(*) from fresh.memory)"
                      ).fetchone()[0] == 0
