"""Tenant names: the Python rule is the SQL rule, and names that look like placeholders stay names."""

import re

import psycopg
import pytest

from hostile_names import CORPUS, VALID
from pgrecall import errors, names


def test_python_and_sql_judge_every_name_alike(db):
    server_keywords = {w for (w,) in db.execute("select word from pg_get_keywords() where catcode in ('R', 'T')")}
    corpus = CORPUS + VALID + sorted(server_keywords) + sorted(names.RESERVED_KEYWORDS)
    judged = dict(db.execute("select n, pgrecall.tenant_name_problem(n) from unnest(%s::text[]) n", (corpus,)).fetchall())
    for name in corpus:
        if name in names.RESERVED_KEYWORDS and name not in server_keywords:
            continue  # a keyword of another PostgreSQL version: Python may be stricter
        assert names.tenant_name_problem(name) == judged[name], name
    assert all(judged[n] is not None for n in CORPUS) and all(judged[n] is None for n in VALID)


def test_python_knows_every_reserved_keyword_of_this_server(db):
    server = {w for (w,) in db.execute("select word from pg_get_keywords() where catcode in ('R', 'T')")}
    assert server <= names.RESERVED_KEYWORDS


@pytest.mark.parametrize("name", [None, 42, b"acme", ["acme"], "acme\n", "acme\x00"], ids=repr)
def test_python_refuses_what_sql_cannot_even_receive(name):
    # re.match("^...$") accepted "acme\n"; NUL and non-strings never reach the server.
    with pytest.raises(errors.InvalidTenantName) as info:
        names.check_tenant_name(name)
    assert "\n" not in info.value.args[0] and info.value.hint


def test_the_message_shows_invisible_characters_escaped():
    with pytest.raises(errors.InvalidTenantName) as info:
        names.check_tenant_name("a\x1b[31m\u202eb" + "c" * 200)
    message = info.value.args[0]
    assert "\\x1b" in message and "\\u202e" in message and "\x1b" not in message and len(message) < 300


@pytest.mark.parametrize("tenant", ["a__ext__", "x__tenant__", "ext__tenant__ext"])
def test_a_tenant_named_like_a_placeholder_is_installed_as_named(db, make_tenant, tenant):
    # Finding 11: __ext__ inside the substituted tenant name was replaced again ("apublic").
    make_tenant(tenant)
    assert db.execute("select schema_version, latest_version from pgrecall.list_tenants()").fetchone()[0] > 0
    assert db.execute("select tenant from " + psycopg.sql.Identifier(tenant).as_string(db) + ".schema_info()"
                      ).fetchone() == (tenant,)
    db.execute("select pgrecall.drop_tenant(%s)", (tenant,))


def test_render_substitutes_each_placeholder_once(db):
    ext = db.execute("select pgrecall._extension_schema('vector')").fetchone()[0]
    rendered = db.execute("select pgrecall._render(%s, %s)",
                          ("__tenant__.t __ext__.v __tenant____ext__ x", "a__ext__")).fetchone()[0]
    assert rendered == f"a__ext__.t {ext}.v a__ext__{ext} x"


def test_worker_listens_where_a_keyword_named_tenant_notifies(db, make_tenant, conninfo):
    # "values" is a column-name keyword: quote_ident() quotes it, and so its channel name.
    make_tenant("values")
    with conninfo.connect() as listener:
        channel = names.listen(listener, "embed", "values")
        db.execute('select "values".add_scope(%s)', ("default",))
        db.execute('select "values".add_peer(%s)', ("ana",))
        offset = db.execute("""select "values".append_observation('ana', '{default}', 'default', 'tea', 'user')""").fetchone()[0]
        db.execute("""select * from "values".remember('ana', '{default}', 'default', 'Ana likes tea', array[%s::bigint],
                      array['converse'])""", (offset,))
        notified = {n.channel for n in listener.notifies(timeout=2, stop_after=1)}
    assert notified == {channel}
    # the name is the tenant's secret, not built from its name (issue #28)
    assert re.fullmatch(r"pgrecall_[0-9a-f]{32}", channel) and "values" not in channel
