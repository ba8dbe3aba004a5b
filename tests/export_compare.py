"""Two exports of the same data subject compared as a user would: the same rows, less what an import cannot
keep. What must differ, and why:

- ids (of turns, memories, links, facts, sessions, peers, entities): the importing tenant numbers its own rows.
  Each is replaced by its rank among the export's ids of that kind, so a memory still points to the same
  replacement, a link to the same memory, a fact's quote to the same turn.
- log offsets: a turn gets the next offset of its scope's log there (another subject's turns are not in the
  export, so the offsets close up); replaced by the turn's rank in its scope.
- the moments the server records a write (ingested_at, created_at, updated_at, changed_at, decided_at,
  invalidated_at, a memory's validity, a fact's known range): an import writes now, through the app's own
  operations, which take no such moment. Kept: whether each is set (a memory still superseded, a fact still
  believed) and every moment a caller gives (occurred_at, a fact's validity).
- peer and entity ids besides ("actor_id", "subject_id", ...): the same row names them in "names" and
  "entities", which are compared.
- an erased peer in a turn's audience (see erased()).
- a duplicate decision's cosine (from the vectors, embedded again there) and decided_role (the login role
  that decided: the importing tenant's own).
"""

import json

TIMES = {"ingested_at", "created_at", "updated_at", "changed_at", "decided_at", "recorded_at"}
PEER_IDS = {"actor_id", "created_by", "audience_peer_id", "observer_peer_id", "changed_by", "asserted_by",
            "sender_id", "observer_id", "peer_id", "decided_by", "audience"}
ENTITY_IDS = {"subject_id", "object_id", "target_entity_id", "merged_into", "entity_id"}
OTHER = {"cosine", "decided_role"}
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

    def norm(kind, rec):
        out = {}
        for key, value in rec.items():
            if key in TIMES or key in PEER_IDS or key in ENTITY_IDS or key in OBSERVATION_IDS or key in OTHER:
                continue
            if key == "id" and kind != "session":
                out[key] = rank.get(kind, {}).get(value, value)
            elif key in MEMORY_IDS:
                out[key] = memories.get(value, "not exported") if value is not None else None
            elif key in ("fact_id", "closed_by", "split_by", "split_from") and value is not None:
                out[key] = rank.get("fact", {}).get(value, "not exported")
            elif key == "derived_from" and kind in ("memory", "memory_reverted"):
                out[key] = sorted(memories.get(m, "not exported") for m in value)
            elif key == "evidence":
                out[key] = sorted(offsets.get((rec["scope"], o), "not exported") for o in value)
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

    return {kind: sorted(norm(kind, rec) for rec in recs) for kind, recs in by_kind.items()}


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
