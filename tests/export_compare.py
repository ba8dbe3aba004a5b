"""Two exports of the same data subject compared as a user would: the same rows, less what an import cannot
keep. What must differ, and why:

- ids (of turns, memories, links, facts, sessions, peers, entities): the importing tenant numbers its own rows.
  A turn's, a memory's and a fact's is replaced by its rank among the export's ids of that kind, so a memory
  still points to the same replacement, a link to the same memory, a fact's quote to the same turn; a row
  that nothing points to (a link, a quote) is known by what it joins.
- the entities and vectors (DERIVED), and a passage's embedding status (embedded_at, its model and input
  version): the tenant makes them from what it holds, the vectors when pgrecall worker embeds them.
- log offsets: a turn gets the next offset of its scope's log there (another subject's turns are not in the
  export, so the offsets close up); replaced by the turn's rank in its scope.
- the moments the server records a write (ingested_at, created_at, updated_at, changed_at, decided_at,
  invalidated_at, a memory's validity, a fact's known range): an import writes now, through the app's own
  operations, which take no such moment. Kept: whether each is set (a memory still superseded, a fact still
  believed) and every moment a caller gives (occurred_at, a fact's validity).
- peer and entity ids besides ("actor_id", "subject_id", ...): the same row names them in "names" and
  "entities", which are compared.
- an erased peer in a turn's audience (see erased()).
- the turns and memories a memory was drawn from that the export does not hold (another subject's, or
  another peer's), and its links to them: the import cannot cite them, so only those it holds are compared.
- a duplicate decision's cosine (from the vectors, embedded again there) and decided_role (the login role
  that decided: the importing tenant's own).
"""

import json

TIMES = {"ingested_at", "created_at", "updated_at", "changed_at", "decided_at", "recorded_at"}
PEER_IDS = {"actor_id", "created_by", "audience_peer_id", "observer_peer_id", "changed_by", "asserted_by",
            "sender_id", "observer_id", "peer_id", "decided_by", "audience"}
ENTITY_IDS = {"subject_id", "object_id", "target_entity_id", "merged_into", "entity_id"}
# Made by the tenant itself from what it holds: which entities a subject's export holds depends on whose turns
# named them (there, another's turns may have named them too), and the vectors are embedded there by the worker.
DERIVED = {"entity", "memory_embedding"}
OTHER = {"cosine", "decided_role", "embedded_at", "embedding_input_version", "embedding_model"}
MEMORY_IDS = {"memory_id", "superseded_by", "target_memory_id", "retired_memory", "memory_low", "memory_high"}
OBSERVATION_IDS = {"observation_id", "target_observation_id"}


def erased(name):
    """An erased peer ("erased peer<U+00A0><id>") in a turn's audience: the importing tenant has no such peer
    (no peer can be given that name) and it could see nothing there anyway, so the import leaves it out."""
    return "\u00a0" in name


def read(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def comparable(path):
    """The export's rows as {kind: sorted list of canonical JSON}, ids and offsets by rank, times left out."""
    _, rows = read(path)
    by_kind = {}
    for r in rows:
        by_kind.setdefault(r["kind"], []).append(r["record"])
    rank = {kind: {rec["id"]: n for n, rec in enumerate(sorted(recs, key=lambda x: x["id"]), start=1)}
            for kind, recs in by_kind.items() if all(isinstance(x.get("id"), int) for x in recs)}
    memories = {**rank.get("memory_reverted", {}), **rank.get("memory", {})}
    offsets = {}
    for rec in sorted(by_kind.get("observation", []), key=lambda x: (x["scope"], x["log_offset"])):
        offsets[(rec["scope"], rec["log_offset"])] = sum(1 for s, _ in offsets if s == rec["scope"]) + 1

    sessions = {}  # a session by its first turn: the one a turn was said in there is the one it is in here
    for rec in sorted(by_kind.get("observation", []), key=lambda x: (x["scope"], x["log_offset"])):
        if rec.get("session_id") is not None:
            sessions.setdefault(rec["session_id"], f"the session of turn {rec['scope']}#{offsets[(rec['scope'], rec['log_offset'])]}")
    for rec in by_kind.get("session", []):
        sessions.setdefault(rec["id"], f"the session named {rec.get('name')}")

    def place(p):
        return {"scope": p["scope"], "turn": offsets.get((p["scope"], p["offset"]), "not exported")}

    def held(kind, rec):
        """Whether the import can make this row: a link to a turn or memory the export does not hold cannot be."""
        if kind != "memory_link":
            return True
        target = (rec.get("observations") or {}).get("target_observation_id")
        return ((target is None or (target["scope"], target["offset"]) in offsets)
                and (rec.get("target_memory_id") is None or rec["target_memory_id"] in memories))

    def norm(kind, rec):
        out = {}
        for key, value in rec.items():
            if key in TIMES or key in PEER_IDS or key in ENTITY_IDS or key in OBSERVATION_IDS or key in OTHER:
                continue
            if key == "id" and kind in ("observation", "memory", "memory_reverted", "fact"):
                out[key] = rank.get(kind, {}).get(value, value)
            elif key == "id":
                continue  # a link, a revision's evidence, a quote: known by what it joins
            elif key in MEMORY_IDS:
                out[key] = memories.get(value, "not exported") if value is not None else None
            elif key in ("fact_id", "closed_by", "split_by", "split_from") and value is not None:
                out[key] = rank.get("fact", {}).get(value, "not exported")
            elif key == "derived_from" and kind in ("memory", "memory_reverted"):
                out[key] = sorted(memories[m] for m in value if m in memories)
            elif key == "evidence":
                out[key] = sorted(offsets[(rec["scope"], o)] for o in value if (rec["scope"], o) in offsets)
            elif key == "log_offset":
                out[key] = offsets[(rec["scope"], value)]
            elif key == "observations":
                out[key] = {c: place(p) for c, p in value.items()}
            elif (key == "valid" and kind != "fact") or key == "known":
                out[key] = "open" if value and value.endswith(",)") else "closed"
            elif key == "invalidated_at":
                out[key] = value is not None
            elif key == "session_id" and value is not None:
                out[key] = sessions.get(value, "not exported")
            elif key == "id" and kind == "session":
                out[key] = sessions[value]
            elif key == "names":
                out[key] = {c: [n for n in v if not erased(n)] if isinstance(v, list) else v for c, v in value.items()}
            else:
                out[key] = value
        return json.dumps(out, sort_keys=True, ensure_ascii=False)

    return {kind: sorted(norm(kind, rec) for rec in recs if held(kind, rec)) for kind, recs in by_kind.items()
            if kind not in DERIVED}


def differences(first, second):
    """What differs between two exports' comparable rows, kind by kind, as readable lines."""
    a, b = comparable(first), comparable(second)
    lines = []
    for kind in sorted(set(a) | set(b)):
        only_a = [x for x in a.get(kind, []) if x not in b.get(kind, [])]
        only_b = [x for x in b.get(kind, []) if x not in a.get(kind, [])]
        for x in only_a:
            lines.append(f"- {kind} {x}")
        for x in only_b:
            lines.append(f"+ {kind} {x}")
    return lines
