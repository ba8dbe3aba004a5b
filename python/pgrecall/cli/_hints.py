"""Errors in the command line's own words: the SQL functions' messages and hints name SQL calls and parameters
(``create_session()``, ``p_include_superseded => true``), which a user of ``pgrecall`` never types. Here each
such name is mapped to the command or flag that does the same, so that an error tells the user what to type.

The SQL keeps its words (a psql user reads them); only the command line rewrites them, when it prints.
"""

from __future__ import annotations

import re

# (what the SQL or Python text says, what the command line says instead); {tenant} is the command's tenant.
# Longer phrases first: a replacement is not rewritten again.
SAID_FOR_CLI: tuple[tuple[str, str], ...] = (
    ("(pass p_include_superseded => true to read history)", "(add --include-superseded to read history)"),
    ("p_include_superseded => true", "--include-superseded"),
    ("leave as_of out to read as of now.", "leave out --as-of to recall as of now."),
    ("leave known_at out for what is believed now, or give valid_at to ask what holds at a later time.",
     "leave out --known-at for what is believed now, or give --valid-at to ask what holds at a later time."),
    ("(p_expected_revision)", "(--revision; pgrecall read shows it)"),
    ("pgrecall.upgrade_tenant(name) brings an existing tenant up to date.",
     "pgrecall tenant upgrade {tenant} brings an existing tenant up to date."),
    ("Create a session with create_session().",
     "Create one: pgrecall session create NAME --tenant {tenant} --as PEER (it prints the session id)."),
    ("Add it with add_session_peers() first.", "Add it first: pgrecall session add-peers SESSION PEER --tenant {tenant}"
     " --as PEER."),
    ("Add it with add_session_peers().",
     "Add it: pgrecall session add-peers SESSION PEER --tenant {tenant} --as PEER."),
    ("Create it first with add_scope(name).", "Create it first: pgrecall scope add NAME --tenant {tenant}."),
    ("scopes() lists the scopes; add_scope() adds one.",
     "pgrecall scope list --tenant {tenant} lists the scopes; pgrecall scope add NAME --tenant {tenant} adds one."),
    ("Create it first with add_peer(name, kind).",
     "Create it first: pgrecall peer add NAME --kind human --tenant {tenant} (or --kind agent)."),
    ("Cite turns its audience may see, or widen it on purpose with a widening reason",
     "Give it one of those peers with --audience PEER, cite turns its audience may see, or widen it on purpose "
     "with --widening-reason TEXT"),
    ("settings() lists the settings.", "pgrecall tenant settings {tenant} lists the settings, with what each does."),
    ("Pass the name of a peer created with add_peer().",
     "Name a peer that exists: pgrecall peer add NAME --tenant {tenant} adds one."),
    ("Append what was said with append_observation() and pass its offset.",
     "Cite a turn that exists (pgrecall search --json and pgrecall read show offsets), or leave out --evidence "
     "to record the words as said."),
    ("Evidence is given as log offsets returned by append_observation() in the same scope.",
     "Evidence is the offset of a turn in the same scope, as pgrecall import, session say, search --json and read "
     "show it."),
    ("predicates() lists the ontology; extend it with INSERT INTO predicate.",
     "pgrecall fact predicates --tenant {tenant} lists the predicates there are."),
    ("predicates() lists the ontology.", "pgrecall fact predicates --tenant {tenant} lists the predicates there are."),
    ("Remove a peer first, or raise setting max_peers_in_session with pgrecall.set_tenant_setting().",
     "Remove a peer first, or raise the limit: pgrecall tenant settings {tenant} --set max_peers_in_session=N."),
    ("Entities are created by assert_fact() and remember(about => ...); aliases by add_entity_alias().",
     "Entities are created by pgrecall fact assert and pgrecall remember --about NAME."),
    ("erasure_requests() lists the receipts; erase() returns the id of a new one.",
     "pgrecall erase prints the receipt of a new erasure, with its id."),
    ("Pass the scopes the principal may read, e.g. array['default'].",
     "Name the scopes with --scopes, e.g. --scopes default."),
    ("Write only to a scope the principal is authorised for.",
     "Write to a scope named in --scopes (the first one named is written, default if none is)."),
    # a time's own name, as the message starts with it ("as_of 2030-01-01 ... is in the future"); last, so that
    # the sentences above are matched whole first
    ("as_of ", "--as-of "),
    ("known_at ", "--known-at "),
    ("valid_at ", "--valid-at "),
)

# What is still SQL or Python after the mapping: a call such as name() or name(...), a p_ parameter, a => argument.
SQL_WORDS = re.compile(r"\b[a-z_]+\((?:[a-z_., ]*|\.\.\.)\)|\bp_[a-z_]+\b|=>")


def for_cli(text: str | None, tenant: str | None = None) -> str | None:
    """``text`` (an error's message or hint) with the SQL calls and parameters it names replaced by the command
    line's own commands and flags."""
    if not text:
        return text
    for said, instead in SAID_FOR_CLI:
        if said in text:
            text = text.replace(said, instead.format(tenant=tenant or "TENANT"))
    return text


def sql_words(text: str) -> list[str]:
    """The SQL calls and parameters left in ``text`` (what a test holds every mapped hint to: none)."""
    return SQL_WORDS.findall(text)
