"""Migrations stay inside their tenant's schema, checked statically with sqlglot."""

import pytest

from pgrecall import sources
from sqlcheck import check, statements


@pytest.mark.parametrize("migration", sources.migrations(), ids=lambda m: m.name)
def test_shipped_migration_respects_the_tenant_boundary(migration):
    violations = check(migration.name, migration.body)
    assert violations == [], "\n".join(map(str, violations))


BAD = [
    ("unqualified table", "create table __tenant__.a (id int);\n\ncreate table memory (id int);", 3, "unqualified"),
    ("other schema", "create table __tenant__.a (id int);\ninsert into public.x values (1);", 2, "public"),
    ("another tenant", "select 1;\n\n\nalter table beta.memory add column x int;", 4, "beta"),
    ("tenant_id column", "create table __tenant__.a (\n  id int,\n  tenant_id int\n);", 3, "tenant_id"),
    ("unqualified type", "create table __tenant__.a (\n  p purpose\n);", 2, "purpose"),
    ("type elsewhere", "create table __tenant__.a (\n  v public.vector(3)\n);", 2, "public"),
    ("unparsable", "create table __tenant__.a (id int);\ncreate tabel __tenant__.b (id int);", 2, "parse"),
    ("index on unqualified table", "create index i on memory (id);", 1, "unqualified"),
    ("function in other schema", "create table __tenant__.a (id uuid default public.gen_random_uuid());", 1, "public"),
    ("constraint dropped from an unqualified table", "alter table passage drop constraint passage_scope_fkey;", 1,
     "unqualified reference 'passage'"),
    ("storage of an unqualified table", "select 1;\nalter table memory_embedding alter column v set storage plain;", 2,
     "unqualified reference 'memory_embedding'"),
    ("attribute dropped from an unqualified type", "select 1;\nalter type recall_item drop attribute provenance;", 2,
     "unqualified reference 'recall_item'"),
    ("storage with something else", "alter table __tenant__.e alter column v set storage plain, owner to x;", 1,
     "not understood"),
]


@pytest.mark.parametrize("label,text,line,word", BAD, ids=[b[0] for b in BAD])
def test_checker_reports_violation_with_line(label, text, line, word):
    violations = check("bad.sql", text)
    assert violations, f"{label}: no violation found"
    assert any(v.line == line and word in str(v) for v in violations), [str(v) for v in violations]
    assert all(str(v).startswith("bad.sql:") for v in violations)


def test_checker_accepts_a_dropped_constraint_name():
    assert check("ok.sql", "alter table __tenant__.passage drop constraint passage_scope_fkey;") == []


def test_checker_accepts_extension_types_and_opclasses():
    text = (
        "create table __tenant__.e (id int, v __ext__.vector(384), t tsvector, r tstzrange);\n"
        "create index e_v on __tenant__.e using hnsw (v __ext__.vector_cosine_ops);\n"
    )
    assert check("ok.sql", text) == []


def test_checker_accepts_a_storage_change_of_a_tenant_table():
    text = ("alter table __tenant__.e\n    alter column a set storage plain,\n"
            "    alter column b set storage plain;\n")
    assert check("ok.sql", text) == []


def test_checker_reads_an_added_attribute_and_holds_it_to_the_boundary():
    assert check("ok.sql", "alter type __tenant__.recall_meta add attribute as_of timestamptz;") == []
    assert check("ok.sql", "alter type __tenant__.t add attribute v __ext__.halfvec(384);") == []
    [outside] = check("bad.sql", "alter type recall_meta add attribute as_of timestamptz;")
    assert "unqualified reference 'recall_meta'" in outside.rule
    [foreign] = check("bad.sql", "alter type __tenant__.t add attribute x public.secret_type;")
    assert "type in schema 'public'" in foreign.rule


# What a function file may say. Anything that reads or writes rows (select,
# insert, update, delete, do, call, ...) would run whenever the file's checksum
# changes, before the files that sort after it: data work is a data step.
DEFINING = {"create", "comment", "drop", "alter", "grant", "revoke"}


@pytest.mark.parametrize("function_file", sources.functions(), ids=lambda f: f.name)
def test_function_files_define_and_touch_no_rows(function_file):
    doing = [f"{function_file.name}:{line}: {text.split()[0]}" for line, text in statements(function_file.body)
             if text.split()[0].lower() not in DEFINING]
    assert doing == [], "a function file only defines; put data work in a data step (migrations/0017_data_steps.sql)"
