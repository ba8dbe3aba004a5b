"""The shipped SQL files follow the layout's rules."""

import re

from pgrecall import sources

# Migration file names and numbering (no gaps, no duplicates) are checked with their frozen
# checksums, in test_frozen_migrations.py.


def test_migrations_carry_no_function_bodies():
    for m in sources.migrations():
        assert not re.search(r"create\s+(or\s+replace\s+)?(function|procedure)", m.body, re.I), (
            f"{m.name}: functions belong in plpgsql/, re-applied when they change"
        )


FUNCTION_HEADER = re.compile(
    r"create\s+or\s+replace\s+function\s+__tenant__\.(\w+)\s*\((.*?)\)\s*returns(.*?)\bas\s+\$",
    re.I | re.S,
)


# SQL helpers the planner must inline into their callers' queries (so that
# indexes apply): inlining is impossible for SECURITY DEFINER or SET functions.
INLINED_HELPERS = {"_eligible_memories", "_eligible_facts", "_eligible_observations", "_audience_admits",
                   "_audience_within", "_normalize_name", "_passages_in", "_bm25_tf", "_memory_eligible",
                   "_fact_eligible", "_observation_eligible", "_passage_eligible", "_unchanged_since",
                   "_embedding_dimensions",
                   # the lexical arm's quick score, in the ORDER BY of the matches (plpgsql/recall/lexical_arm.sql)
                   "_quick_score",
                   # the store's eligibility, an expression on a memory's columns (plpgsql/integrations/store.sql)
                   "_store_item_usable",
                   # the lease rule, an expression on a queue row's columns (plpgsql/queues/leases.sql)
                   "_lease_over", "_lease_over_now",
                   # expressions on a text, asked of each remembered item and appended row (issue #46)
                   "_trim", "_is_only_questions"}


def test_every_tenant_function_is_definer_with_pinned_path_and_a_comment():
    seen = 0
    for f in sources.functions():
        assert sources.FUNCTION_FILE_NAME.match(f.name), f.name
        headers = FUNCTION_HEADER.findall(f.body)
        assert headers, f"{f.name} defines no function in __tenant__"
        for name, _args, rest in headers:
            seen += 1
            assert re.search(rf"comment\s+on\s+function\s+__tenant__\.{name}\s*\(", f.body, re.I), (
                f"{f.name}: {name} has no COMMENT ON FUNCTION"
            )
            if name in INLINED_HELPERS:
                assert name.startswith("_") and "language sql" in rest.lower()
                assert "security definer" not in rest.lower() and "search_path" not in rest.lower()
                body = f.body[f.body.index(f"__tenant__.{name}"):]
                body = body[body.index("$$") + 2:]
                body = body[: body.index("$$")]
                for table in re.findall(r"\b(?:from|join)\s+([\w.]+)", body, re.I):
                    assert table.startswith("__tenant__."), f"{name}: unqualified {table} in an inlined helper"
                continue
            assert "security definer" in rest.lower(), f"{f.name}: {name} is not SECURITY DEFINER"
            assert re.search(r"set\s+search_path\s*=\s*pg_catalog,\s*__tenant__,\s*__ext__,\s*pg_temp", rest, re.I), (
                f"{f.name}: {name} does not pin search_path to pg_catalog, __tenant__, __ext__, pg_temp"
            )
    assert seen > 0


def _defined_in() -> dict[str, str]:
    where = {}
    for f in sources.functions():
        for name, _args, _rest in FUNCTION_HEADER.findall(f.body):
            where[name] = f.name
    return where


def test_every_step_recall_answer_runs_is_in_the_recall_folder_or_shared():
    """A reader follows one recall from recall_answer() to each step without opening a feature file: each
    function it calls is in plpgsql/recall/ (a file named for the step) or plpgsql/shared/ (argument checks)."""
    where = _defined_in()
    body = next(f.body for f in sources.functions() if f.name == "recall/recall.sql")
    body = body[body.index("create or replace function __tenant__.recall_answer("):]
    body = body[body.index("$$") + 2:]
    body = body[:body.index("$$")]
    called = set(re.findall(r"\b(_\w+)\(", body)) & set(where)
    assert len(called) > 15, called
    elsewhere = {name: where[name] for name in called
                 if not where[name].startswith(("recall/", "shared/"))}
    assert elsewhere == {}, f"recall_answer calls steps defined outside plpgsql/recall/ and shared/: {elsewhere}"
    step_files = {where[name] for name in called if where[name].startswith("recall/")}
    feature_files = {"recall/people_arm.sql", "recall/time_arm.sql", "recall/neighbour_turns.sql"}
    assert not step_files & feature_files, step_files & feature_files


# The functions that insert memories without turning pgrecall.memory_vectors_given off first, each with why.
QUEUES_WHATEVER_THE_SESSION_SAYS = {
    "_remember_insert": "its one caller, _remember_batch, sets the setting on or off just before each call",
}


def test_every_insert_of_a_memory_turns_off_the_setting_that_skips_the_queue():
    """Any role may set pgrecall.memory_vectors_given in its own session; a statement inserting memories under
    it would leave them with neither a vector nor a queue job (the insert trigger passes over them)."""
    checked = 0
    for f in sources.functions():
        starts = [m.start() for m in re.finditer(r"create or replace function __tenant__\.(\w+)", f.body)]
        for start, end in zip(starts, [*starts[1:], len(f.body)]):
            body = f.body[start:end]
            if not re.search(r"\binsert\s+into\s+memory\s*\(", body, re.I):
                continue
            name = re.match(r"create or replace function __tenant__\.(\w+)", body).group(1)
            checked += 1
            if name in QUEUES_WHATEVER_THE_SESSION_SAYS:
                continue
            assert "set_config('pgrecall.memory_vectors_given', 'off', true)" in body, (
                f"{f.name}: {name} inserts memories under whatever pgrecall.memory_vectors_given the session set")
    assert checked >= 4
