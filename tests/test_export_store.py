"""LangGraph store items through pgrecall export and pgrecall import --export: a tenant moved to another server
keeps its store. The items are put through the real store (pgrecall.integrations.langgraph), the tenant is
exported and imported through the CLI, and the store on the new tenant is read the same way."""

import json

import pgrecall
from export_compare import differences, read
from pgrecall.integrations.langgraph import PgrecallStore
from test_install_paths import run_cli


def handle(conninfo, tenant, principal):
    return pgrecall.connect(conninfo.dsn(user=f"pgrecall_{tenant}_app"), tenant=tenant, principal=principal,
                            scopes=["default"])


def export(conninfo, tmp_path, tenant, name):
    out = tmp_path / f"{name}.jsonl"
    run_cli("export", "--tenant", tenant, "--peer", "ana", "--out", str(out),
            env={"PGRECALL_DSN": conninfo.dsn(user=f"pgrecall_{tenant}_admin")})
    return out


def import_file(conninfo, path, tenant, check=True):
    return run_cli("import", "--export", str(path), "--tenant", tenant,
                   env={"PGRECALL_DSN": conninfo.dsn(user=f"pgrecall_{tenant}_app")}, check=check)


def item(found):
    return None if found is None else (found.namespace, found.key, found.value)


def what_the_store_answers(conninfo, tenant):
    """Every read of the store, for ana and ben, private and shared: get, search and list_namespaces."""
    seen = {}
    for who in ("ana", "ben"):
        with handle(conninfo, tenant, who) as mem:
            for shared in (False, True):
                store = PgrecallStore(mem, shared=shared)
                seen[who, shared] = {
                    "get": [item(store.get(ns, key)) for ns, key in ((("memories", "ana"), "k1"),
                                                                      (("memories", "ana"), "k2"),
                                                                      (("household",), "wifi"))],
                    "search": [sorted(item(i) for i in store.search(prefix))
                               for prefix in (("memories", "ana"), ("household",))],
                    "namespaces": [n for n in store.list_namespaces() if n != ("memories", "ben")],  # not Ana's
                }
    return seen


def store_rows(db, tenant):
    """Each item's memory (namespace, key, value, audience, purposes, revision, live) and its kept values."""
    items = db.execute(f"""select m.store_namespace, m.store_key, m.store_value, p.name, m.purposes, m.revision,
                                  m.invalidated_at is null,
                                  array(select r.store_value from {tenant}.memory_revision r
                                         where r.memory_id = m.id order by r.revision)
                             from {tenant}.memory m left join {tenant}.peer p on p.id = m.audience_peer_id
                            where m.store_key is not null order by m.store_key, m.id""").fetchall()
    return [list(r) for r in items]


def put_the_items(conninfo):
    with handle(conninfo, "acme", "ana") as ana, handle(conninfo, "acme", "ben") as ben:
        mine, ours = PgrecallStore(ana), PgrecallStore(ana, shared=True)
        mine.put(("memories", "ana"), "k1", {"content": "Ana is vegetarian"})
        mine.put(("memories", "ana"), "k1", {"content": "Ana is vegan", "since": 2026})
        mine.put(("memories", "ana"), "k2", {"content": "Ana plays the violin", "tags": ["music", "evening"]})
        ours.put(("household",), "wifi", {"content": "the password is on the fridge"})
        PgrecallStore(ben, shared=True).put(("household",), "wifi", {"content": "the password is under the router",
                                                                      "n": 2})
        mine.put(("memories", "ana"), "gone", {"content": "a note Ana deleted"})
        mine.delete(("memories", "ana"), "gone")
        PgrecallStore(ben).put(("memories", "ben"), "k1", {"content": "Ben's own, not in Ana's export"})


def test_store_items_come_back_as_store_items(acme, conninfo, tmp_path, make_tenant, db):
    """The import wrote each item as a plain memory with its text: the store on the new tenant found none of
    them by namespace and key, listed no namespace, and the revised item's old value was lost."""
    put_the_items(conninfo)
    before = what_the_store_answers(conninfo, "acme")
    assert before["ana", False]["get"][0] == (("memories", "ana"), "k1", {"content": "Ana is vegan", "since": 2026})
    first = export(conninfo, tmp_path, "acme", "first")
    make_tenant("fresh")
    import_file(conninfo, first, "fresh")

    assert what_the_store_answers(conninfo, "fresh") == before
    ana_items = [r for r in store_rows(db, "acme") if r[1] != "k1" or r[0] == ["memories", "ana"]]
    assert store_rows(db, "fresh") == ana_items
    assert [r[5] for r in store_rows(db, "fresh") if r[1] == "k1"] == [2]  # two puts: revision 2, as there
    second = export(conninfo, tmp_path, "fresh", "second")
    assert differences(first, second) == []
    # and it is the same item: a put of its key revises it, a delete deletes it
    with handle(conninfo, "fresh", "ana") as ana:
        store = PgrecallStore(ana)
        store.put(("memories", "ana"), "k1", {"content": "Ana eats fish again"})
        assert [r[5] for r in store_rows(db, "fresh") if r[1] == "k1"] == [3]
        store.delete(("memories", "ana"), "k2")
        assert store.get(("memories", "ana"), "k2") is None


def test_an_edited_store_item_is_refused_naming_its_line(acme, conninfo, tmp_path, make_tenant, db):
    """A namespace or a key no put could have written, or half an item, is refused at its line; nothing is written."""
    put_the_items(conninfo)
    rows = [json.loads(line) for line in export(conninfo, tmp_path, "acme", "first").read_text(
        encoding="utf-8").splitlines()]
    make_tenant("fresh")
    line = next(n for n, r in enumerate(rows, start=1) if r.get("kind") == "memory"
                and r["record"].get("store_key") == "k2")

    def edited(name, **fields):
        copy = json.loads(json.dumps(rows))
        copy[line - 1]["record"].update(fields)
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in copy) + "\n", encoding="utf-8")
        return path

    cases = [
        (edited("dot", store_namespace=["mem.ories", "ana"]), "may not contain a dot"),
        (edited("empty", store_namespace=[]), "a namespace needs at least one label"),
        (edited("reserved", store_namespace=["langgraph", "x"]), 'may not start with "langgraph"'),
        (edited("label", store_namespace=["memories", 7]), "'store_namespace' must be an array of strings"),
        (edited("long", store_key="k" * 1025), "key is 1025 bytes"),
        (edited("value", store_value=["a", "list"]), "'store_value' must be an object"),
        (edited("half", store_key=None), "a store item has a namespace, a key and a value"),
    ]
    for path, said in cases:
        refused = import_file(conninfo, path, "fresh", check=False)
        assert refused.returncode == 1 and f"{path.name}:{line}: " in refused.stderr, refused.stderr
        assert said in refused.stderr and "internal error" not in refused.stderr, refused.stderr
    assert db.execute("select (select count(*) from fresh.observation) + (select count(*) from fresh.memory)"
                      ).fetchone()[0] == 0


def test_an_imported_item_does_not_take_over_a_key_held_here(acme, conninfo, tmp_path, make_tenant, db):
    """An item whose key the importing tenant already holds, live, in that partition is refused, naming the
    line and the memory holding it, rather than made a revision of that memory."""
    put_the_items(conninfo)
    first = export(conninfo, tmp_path, "acme", "first")
    make_tenant("fresh")
    with handle(conninfo, "fresh", "ana") as ana:
        ana.add_scope("default")
        ana.add_peer("ana")
        PgrecallStore(ana).put(("memories", "ana"), "k2", {"content": "already here"})
    _, rows = read(first)
    line = next(n for n, r in enumerate(rows, start=2) if r["kind"] == "memory" and r["record"].get("store_key") == "k2")
    refused = import_file(conninfo, first, "fresh", check=False)
    assert refused.returncode == 1 and f"first.jsonl:{line}: " in refused.stderr, refused.stderr
    assert "key 'k2' of namespace {memories,ana} is held by memory" in refused.stderr, refused.stderr
    with handle(conninfo, "fresh", "ana") as ana:
        assert PgrecallStore(ana).get(("memories", "ana"), "k2").value == {"content": "already here"}
    assert db.execute("select count(*) from fresh.memory").fetchone()[0] == 1
