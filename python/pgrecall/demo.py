"""What `make run` shows: pgrecall on its embedded server, from a conversation to recall.

1. starts the embedded PostgreSQL and installs tenant ``demo``;
2. imports examples/sample_conversation.jsonl (55 turns, three speakers) into scope ``flat``:
   each session's turns are seen by the three of them, except the five in which Ana tells
   Sage about the surprise party, which only Ana and Sage may see;
3. remembers what was stated, each memory citing the turns that said it, including a
   correction, three superseded memories, a private memory and a derived one. A memory may
   not reach more peers than the turns it cites: the household's memories are widened to the
   whole scope on purpose, with a reason (the flat scope is the household), and so is Ben's
   favourite cake, told in Ana's private conversation; Ben sees that memory, not the turn;
4. runs the embedding worker;
5. recalls for a few questions, as different principals, with provenance and counts;
6. puts two peers in a session in scope ``tavern`` (Bolt, an NPC, observes Rita), shows the
   derivation queue, drains it with the deterministic deriver and prints the resulting
   representations: Rita's global one, Bolt's local view of her, and Bolt's working document.

Running it again reuses what is there.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypedDict

from . import db, install, server
from .driver import Memory, QueueStatus, RepresentationItem
from .importer import import_jsonl
from .names import check_tenant_name
from .render import count

SCOPE = "flat"
CONVERSATION = "sample_conversation.jsonl"

# Why the household's memories may reach everyone in scope flat, though the turns they cite were said in
# sessions of Ana, Ben and Sage: a memory reaches no more peers than its turns unless the call says why.
HOUSEHOLD = "the flat scope is the household: what Ana and Ben tell Sage together is for both of them"
CAKE = "Ben's taste in cake is no secret; the party it is for is"

# (key, text, evidence turns, purposes, audience, about)
MEMORIES = [
    ("veg", "Ana is vegetarian: she eats no meat and no fish", [5], ["converse", "personalize"], None, ["Ana"]),
    ("peanut", "Ben is severely allergic to peanuts", [6], ["converse", "act", "personalize"], None, ["Ben"]),
    ("home", "Ana and Ben live in Lisbon, in Alfama, near the river", [8], ["converse", "act"], None,
     ["Ana", "Ben", "Lisbon"]),
    ("birthday", "Ben's birthday is on March 3", [9], ["converse", "personalize"], None, ["Ben"]),
    ("job", "Ana works as a nurse at Santa Maria hospital, mostly night shifts", [11], ["converse"], None, ["Ana"]),
    ("carpenter", "Ben is a carpenter with his own workshop in Marvila, Lisbon", [12], ["converse"], None, ["Ben"]),
    ("vet", "Pixel, the beagle, sees Dr. Sousa at the vet every six months", [3, 14], ["converse", "act"], None,
     ["Pixel"]),
    ("football", "Ben plays football on Thursday evenings", [15], ["converse", "personalize"], None, ["Ben"]),
    ("pottery", "Ana takes pottery classes on Saturday mornings", [16], ["converse", "personalize"], None, ["Ana"]),
    ("spice", "Ana prefers mild food; Ben likes it spicy", [20, 21], ["converse", "personalize"], None,
     ["Ana", "Ben"]),
    ("party", "Ana is planning a surprise party for Ben's birthday at the workshop", [27], ["converse", "act"], "Ana",
     ["Ben"]),
    # Said in Ana's private conversation with Sage (turn 29), widened on purpose with CAKE.
    ("cake", "Ben's favourite cake is lemon drizzle", [29], ["converse", "personalize"], None, ["Ben"]),
    ("music", "Ben likes jazz, especially Chet Baker, and old fado; Ana's favourite fado singer is Mariza", [32, 33],
     ["converse", "personalize"], None, ["Ben", "Ana"]),
    ("car", "The car is a blue 2015 Renault Clio; its inspection is due in June", [35], ["act"], None, ["Ben"]),
    ("dogfood", "Pixel is allergic to chicken, so his food must be fish based", [38], ["converse", "act"], None,
     ["Pixel"]),
    ("licence", "Ben must renew his carpentry licence before September", [51], ["act"], None, ["Ben"]),
    # Said again weeks later, and remembered again in other words: a duplicate for a person to review.
    ("peanut-again", "Ben is allergic to peanuts: no peanuts in shared meals", [54],
     ["converse", "act", "personalize"], None, ["Ben"]),
]

QUESTIONS = [
    ("Sage", "What does Ana eat?"),
    ("Sage", "Where do Ana and Ben live?"),
    ("Sage", "When is Ben's birthday?"),
    ("Ben", "What is happening on my birthday?"),
    ("Ben", "What cake do I like?"),
    ("Ana", "What am I planning for Ben's birthday?"),
]


def _examples() -> Path:
    here = Path(__file__).resolve()
    for candidate in (here.parents[2] / "examples", here.parent / "examples"):
        if (candidate / CONVERSATION).exists():
            return candidate
    raise FileNotFoundError(f"cannot find examples/{CONVERSATION}")


def load(mem: Memory, conversation: Path, conninfo: str) -> None:
    import_jsonl(conversation, tenant=mem.tenant, scope=SCOPE, conninfo=conninfo, progress=False)
    ids: dict[str, int] = {}
    for key, text, turns, purposes, audience, about in MEMORIES:
        # Ana's private memory cites a turn only she and Sage may see: it fits, nothing to widen.
        r = mem.remember(text, evidence=turns, purposes=purposes, audience=audience, about=about,
                         principal=audience or "Sage",
                         widening_reason=None if audience else CAKE if key == "cake" else HOUSEHOLD)
        assert r.memory_id is not None, r
        ids[key] = r.memory_id
    # Ben corrected a typo: the same fact, fixed in place (the old text stays in history), citing his turn.
    mem.correct(ids["birthday"], "Ben's birthday is on March 13", revision=1, evidence=[23],
                reason="Ben corrected a typo", widening_reason=HOUSEHOLD)
    # The world changed: they moved, Ana changed jobs, Pixel changed vets.
    mem.supersede(ids["home"], "Ana and Ben live in Porto, in Bonfim, near Ana's sister Rita", revision=1,
                  evidence=[45, 47], about=["Ana", "Ben", "Porto"], widening_reason=HOUSEHOLD)
    mem.supersede(ids["job"], "Ana works as a nurse at São João hospital in Porto", revision=1, evidence=[43, 44],
                  about=["Ana", "Porto"], widening_reason=HOUSEHOLD)
    mem.supersede(ids["vet"], "Pixel's vet in Porto is Dr. Costa", revision=1, evidence=[50],
                  widening_reason=HOUSEHOLD)
    # A house rule derived from two memories; it may be used only for what both allow.
    rule = mem.derive([ids["veg"], ids["peanut"]], "Shared meals must be vegetarian and peanut free",
                      kind="decision", title="House food rule", widening_reason=HOUSEHOLD)
    mem.pin(rule)


def _found_by(lexical: bool, dense: bool) -> str:
    """How a memory was found, in plain words."""
    return ("matches the question's words and meaning" if lexical and dense else
            "matches the question's words" if lexical else "close to the question's meaning")


def show(mem: Memory, principal: str, question: str, explain: bool = False) -> None:
    """The answers a principal may see, in plain words; with ``explain`` also how recall ranked them."""
    from .cli._common import _range_text  # the command line's way of writing a range (cli imports this module)

    r = mem.recall(question, principal=principal, limit=3)
    m = r.meta
    print(f"\n{principal} asks: {question!r}")
    if explain:
        dropped = f", dropped terms {m.dropped_terms}" if m.dropped_terms else ""
        dense = "dense arm on" if m.dense_available else f"dense arm off ({m.dense_reason})"
        print(f"  [explain] {count(m.fused_count, 'candidate')} after the permission walk ({m.lexical_count} "
              f"lexical, {m.dense_count} dense){dropped}; {dense}; log watermark {m.watermarks[SCOPE]}")
    elif not m.dense_available:
        print("  (found by words only: the memories have no vectors yet; pgrecall worker makes them)")
    if not r.items:
        print(f"  nothing {principal} may see answers it")
    for item in r.items:
        fact = item.fact_provenance
        if fact is not None:
            how = f"; score {item.score:.4f}, valid {_range_text(fact.valid)}" if explain else ""
            print(f"  {item.rank}. {item.body}   (a fact about {fact.subject}, fact {item.fact_id}{how})")
            for e in fact.evidence:
                span = f", bytes {e.start}..{e.end}" if explain else ""
                print(f"       quoting turn {e.offset}{span}: {e.quote!r}")
            continue
        p = item.provenance
        assert p is not None  # a memory row carries its provenance
        if explain:
            why = [f"lexical #{item.lexical_rank}"] if item.lexical_rank else []
            if item.dense_rank:
                why.append(f"dense #{item.dense_rank}, cosine {item.cosine:.2f}")
            how = f"; {'; '.join(why)}; score {item.score:.4f}"
        else:
            how = f", {_found_by(bool(item.lexical_rank), bool(item.dense_rank))}"
        print(f"  {item.rank}. {item.body}   (memory {item.memory_id}{how})")
        for o in p.observations:
            revisions = o.corrections
            cited = (f"   (cited by the correction that made revision {revisions[0]})" if len(revisions) == 1
                     else f"   (cited by the corrections that made revisions {', '.join(map(str, revisions))})"
                     if revisions else "")
            if o.withheld:
                print(f"       from turn {o.offset}: withheld, a turn {principal} may not see{cited}")
            else:
                role = f" ({o.source_role})" if explain else ""
                print(f"       from turn {o.offset}, {o.actor}{role}: {o.text}{cited}")
        for src in p.memories:
            print(f"       drawn from memory {src.id}")
        if p.widening_reason and any(o.withheld for o in p.observations):  # why the memory reaches them
            print(f"       shared on purpose: {p.widening_reason}")


def search(mem: Memory, principal: str, query: str) -> None:
    """What was said (the log), as a principal may see it: the turns of sessions they were in."""
    found = mem.search_messages(query, principal=principal, mode="lexical", limit=3)
    print(f"\n{principal} searches the log for {query!r}: {count(len(found.items), 'turn')}")
    for hit in found.items:
        print(f"  turn {hit.log_offset}, {hit.actor}: {hit.body}")


TAVERN = "tavern"
TAVERN_TALK = [
    ("Rita", "Good evening! My name is Rita Alves."),
    ("Bolt", "Welcome, traveller. I work at the Golden Goose, what brings you here?"),
    ("Rita", "I live in Porto, near the river. I work at Lello bookshop."),
    ("Rita", "Is the stew any good tonight?"),
]


class Who(TypedDict):
    principal: str
    scopes: list[str]


def peers_in_a_session(mem: Memory, worker_conninfo: str, explain: bool = False) -> None:
    """Two peers in a session, one observing the other; the queue drains into representations."""
    from .deriver import Deriver

    who = Who(principal="Bolt", scopes=[TAVERN])
    mem.add_scope(TAVERN, "a game: an NPC and a player")
    mem.add_peer("Rita", "human")
    mem.add_peer("Bolt", "agent")
    session = mem.create_session("evening at the Golden Goose", scope=TAVERN, **who)
    print(f"\nSession {session} in scope {TAVERN!r}: Rita (a player) and Bolt (an NPC who observes others)")
    if mem.watermark(TAVERN, **who) == 0:
        mem.add_session_peers(session, ["Rita", {"peer": "Bolt", "observe_others": True}], **who)
        added = mem.add_messages(session, [{"actor": a, "body": t} for a, t in TAVERN_TALK], **who)
        for (actor, text), a in zip(TAVERN_TALK, added):
            print(f"  turn {a.offset}, {actor}: {text}" + (f"   ({count(a.tasks, 'task')} queued)" if explain else ""))
    else:
        print(f"  (reusing its {mem.watermark(TAVERN, **who)} turns)")
    def status(peer: str, target: str | None = None) -> QueueStatus:
        return mem.queue_status(peer, target, session=session)

    if explain:
        print(f"  [explain] work queue {mem.work_queue_status()}")
    print(f"  Rita's global representation is {status('Rita').status} ({status('Rita').remaining} messages to "
          f"read), Bolt's view of Rita {status('Bolt', 'Rita').status} ({status('Bolt', 'Rita').remaining} to read)")
    with Deriver(mem.tenant, conninfo=worker_conninfo) as deriver:
        stats = deriver.drain()
    print(f"  the deriver read them and wrote {stats.memories} {'memory' if stats.memories == 1 else 'memories'}"
          + (f" ({stats.completed} tasks completed, {stats.failed} failed)" if explain else "")
          + f"; now Rita's global representation is {status('Rita').status}, "
          f"Bolt's view of Rita {status('Bolt', 'Rita').status}")

    def show_view(label: str, rows: list[RepresentationItem]) -> None:
        memories = [r.body for r in rows if r.item == "memory"]
        facts = [f"{r.kind} (fact {r.id}, from turn {', '.join(map(str, r.evidence))})"
                 for r in rows if r.item == "fact"]
        print(f"  {label}: " + ("; ".join(memories) + " | facts: " + "; ".join(facts) if rows else "(nothing)"))

    # What Rita said in a session with Bolt is theirs: her global view is seen by her.
    show_view("Rita, globally (as she may see it)", mem.representation("Rita", principal="Rita", scopes=[TAVERN]))
    show_view("Rita, globally, as Bolt may see it", mem.representation("Rita", **who))
    show_view("Rita, as Bolt sees her", mem.representation("Rita", observer="Bolt", **who))
    show_view("Bolt's view of Rita, as Rita may see it",
              mem.representation("Rita", observer="Bolt", principal="Rita", scopes=[TAVERN]))
    doc = mem.get_representation(session, "Bolt", **who).representation
    print("  Bolt's working representation: " + "; ".join(
        f"{target}: " + ", ".join(f"{i.text} (turn {i.offset})" for i in items) for target, items in doc.items()))


def main(args: argparse.Namespace) -> int:
    import pgrecall

    from .worker import Worker

    tenant = check_tenant_name(args.tenant)
    if db.dsn_from_env():
        print("pgrecall: using PGRECALL_DSN")
    else:
        info = server.start()
        print(f"pgrecall: embedded PostgreSQL running (pid {info.pid}), data in {info.pgdata}")
    import psycopg

    with psycopg.connect(db.admin_conninfo(), autocommit=True) as conn:
        applied = install.install(conn, [tenant])
        row = conn.execute("select schema_version, app_role from pgrecall.list_tenants() where name = %s",
                           (tenant,)).fetchone()
    assert row is not None
    explain = bool(getattr(args, "explain", False))
    steps = f", {count(len(applied), 'step')} applied" if applied else ""
    print(f"pgrecall: tenant {tenant!r} is ready" + (f" (at migration {row[0]}{steps})" if explain else "")
          + f"; the application logs in as {row[1]}")

    conninfo = db.tenant_conninfo(tenant)
    worker_conninfo = db.tenant_conninfo(tenant, "worker")  # the worker and the deriver log in as the worker role
    with pgrecall.connect(conninfo, tenant=tenant, principal="Sage", scopes=[SCOPE]) as mem:
        mem.add_scope(SCOPE, "the demo household")
        mem.add_peer("Sage", "agent")
        if mem.watermark() == 0:
            load(mem, _examples() / CONVERSATION, conninfo)
            print(f"pgrecall: imported the conversation and remembered {len(MEMORIES) + 1} memories "
                  "(1 corrected, 3 superseded, 1 private to Ana, 1 drawn from two others and pinned; the "
                  "household's shared with everyone in the flat on purpose)")
        else:
            print(f"pgrecall: scope {SCOPE!r} already holds {mem.watermark()} turns; reusing them")
        stats = Worker(tenant, conninfo=worker_conninfo).drain()
        status = mem.embedding_status()
        print(f"pgrecall: the worker embedded {stats.stored} memories; {status.current} have vectors, so recall "
              "finds them by meaning as well as by words"
              + (f" ([explain] model {status.model}, input version {status.input_version})" if explain else ""))
        for principal, question in QUESTIONS:
            show(mem, principal, question, explain)
        search(mem, "Ben", "surprise party")
        search(mem, "Ana", "surprise party")
        bundle = mem.session_bundle(principal="Ana", recent=3)
        print("\nSession-start bundle for Ana: pinned " + "; ".join(p.body for p in bundle.pinned)
              + " | top entities " + ", ".join(f"{e.entity} ({e.memories})" for e in bundle.entities))
        duplicates = mem.duplicate_proposals(limit=3)
        print(f"\nPossible duplicates, for a person to decide: {count(len(duplicates.pairs), 'pair')}"
              + (f" ([explain] cosine >= {duplicates.meta.threshold})" if explain else "")
              + "; nothing is merged until someone decides")
        for pair in duplicates.pairs:
            similar = f"cosine {pair.cosine:.2f}" if explain else "said alike"
            print(f"  [memory {pair.a.id}] {pair.a.body}  |  [memory {pair.b.id}] {pair.b.body}   ({similar})")
        print(f"  decide on the review screen: pgrecall review --tenant {tenant} --as Sage --scopes {SCOPE}")
        peers_in_a_session(mem, worker_conninfo, explain)
        Worker(tenant, conninfo=worker_conninfo).drain()  # embed what the deriver wrote
    if not explain:
        print("\npgrecall: `pgrecall demo --explain` shows how each answer was ranked; "
              "`pgrecall server stop` stops the embedded server.")
    else:
        print("\npgrecall: `pgrecall server stop` stops the embedded server.")
    return 0
