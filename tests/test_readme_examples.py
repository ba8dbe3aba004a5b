"""The documented sessions, run: README.md's psql session (and the facts that continue it) and its
Python session, then docs/python.md's and docs/agents.md's Python blocks that continue it, in one
fresh tenant acme, checking what each shows.

The README abbreviates: a psql statement may show no output, and shown tables leave out psql's
`(N rows)` line. A statement that shows output must print exactly that (times read from the clock
and lease tokens aside, as for the reference); one that shows none must succeed; one that shows
an ERROR must fail. In Python, a `# ...` comment below a statement, or after a `print(...)`, is
what it prints; after a bare expression, a comment that reads as a value (a dict, a number, ...) is
its repr, `...` standing for anything. The README tells a user to type `pgrecall.connect(tenant=...)`
and `Worker("acme")`: the harness points PGRECALL_APP_DSN, PGRECALL_WORKER_DSN and
PGRECALL_ADMIN_DSN at the test server instead of changing what the README says. The embedding
model is the real one.
"""

from __future__ import annotations

import psycopg
import pytest

import doc_examples as docs
from conftest import BASE_DB

DATABASE = "pgrecall_readme"


@pytest.fixture
def server(pg_server, cluster_roles_kept):
    server = docs.Server(pg_server.superuser_dsn, template=BASE_DB)
    yield server
    server.drop_database(DATABASE)


# The pages whose Python blocks continue the README's session, in the order they run.
CONTINUED_IN = [docs.ROOT / "docs" / "python.md", docs.ROOT / "docs" / "agents.md"]


def test_the_readme_sessions_print_what_they_show(server, monkeypatch, tmp_path):
    transcripts, python = docs.readme_blocks(docs.README.read_text())
    python = [(docs.README, first, code) for first, code in python]
    for page in CONTINUED_IN:
        more_transcripts, more_python = docs.readme_blocks(page.read_text())
        assert more_transcripts == [], f"{page.name} holds a psql transcript nothing runs"
        python += [(page, first, code) for first, code in more_python]
    assert [b.heading for b in transcripts] == ["A psql session", "Facts, and since when"]
    # the Python session; asyncio, peers (docs/python.md); the LangGraph store, the Agents session (docs/agents.md)
    assert [(page.name, len([b for b in python if b[0] == page])) for page in [docs.README, *CONTINUED_IN]] == \
        [("README.md", 1), ("python.md", 2), ("agents.md", 2)]

    outcomes = docs.run_blocks(transcripts, server, prefix="pgrecall", abbreviated=True, keep=True)
    assert len(outcomes) == sum(len(b.steps) for b in transcripts) == 18
    problems = docs.report(outcomes, docs.README)
    assert problems == "", "\n" + problems

    dsns = docs.role_dsns(psycopg.conninfo.make_conninfo(server.superuser_dsn, dbname=DATABASE))
    for key, value in docs.child_env(dsns, str(tmp_path)).items():
        if key.startswith(("PGRECALL", "HF_", "TRANSFORMERS")):
            monkeypatch.setenv(key, value)
    namespace: dict = {}
    problems: list[str] = []
    checked = 0
    for page, first_line, code in python:
        statements = docs.python_checks(code, first_line)
        checked += sum(1 for _, check in statements if check is not None)
        problems += docs.run_python_checks(statements, namespace, str(page.relative_to(docs.ROOT)))
    namespace["mem"].close()
    namespace["store"].close()
    namespace["session"].memory.close()
    assert problems == []
    # the recall rows, its metadata, the read, the async recall, queue_status; the store's get, search,
    # namespaces and LangMem's search; the session's last item, its pop and what is left
    assert checked == 12


def test_comments_that_show_output_are_told_from_prose():
    code = '\n'.join([
        'x = 1  # a prose comment',
        'print(x)  # 1',
        'for i in (2, 3):  # prose again',
        '    print(i)',
        '# 2',
        '# 3',
        '{"a": 1, "b": 2}  # {\'a\': 1, ...}',
        'len("abc")  # the length, in prose',
        '__import__("fractions").Fraction(1, 2)  # Fraction(1, ...)',  # a repr such as a row's dataclass
    ])
    statements = docs.python_checks(code, 0)
    kinds = [(check.kind, check.expected) if check else None for _, check in statements]
    assert kinds == [None, ("stdout", ["1"]), ("stdout", ["2", "3"]), ("value", ["{'a': 1, ...}"]), None,
                     ("value", ["Fraction(1, ...)"])]
    assert docs.run_python_checks(statements, {}) == []
    wrong = docs.python_checks(code.replace("# 3", "# 4"), 0)
    assert len(docs.run_python_checks(wrong, {})) == 1
