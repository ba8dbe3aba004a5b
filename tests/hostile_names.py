"""Tenant names an attacker (or a typo) might try; none of them may name a tenant.

Shared by the rule tests (Python and SQL agree on every one) and the tests that
drive them through every command and Python entry.
"""

from __future__ import annotations

import string

# The findings as reported: each ran SQL of its own on the unpatched CLI.
REPORTED = [
    "a.embedding_status();create/**/table/**/public.pwned(i/**/int);select/**/*/**/from/**/a",
    'a";create/**/table/**/public.p(i/**/int);--',
    "\\') where false; create table public.pwned_s(i int); --",
]

_QUOTES = [
    "a'b", 'a"b', "a`b", "'", '"', "''", "a''b", "x'; drop schema public cascade; --",
    'acme"; drop schema b; --', "a' or '1'='1", "a\"\"b", "'a'", '"a"', "a');drop table b;--",
    "a\\'", "E'a'", "U&'a'", "b'||'c",
]
_SEMICOLONS_COMMENTS = [
    "a;b", ";", "a;", "a;drop schema b cascade", "a--b", "a--", "--a", "a/*b*/", "/*", "*/", "a/**/b",
    "a;--", "a;/*", "a#b", "a -- b",
]
_DOLLARS = [
    "$$", "a$$b", "$x$", "a$b", "$pgrecall_0123456789ab$", "$1", "a$1", "$$;drop schema b;$$", "a$",
    "$a$b$a$",
]
_BACKSLASHES = [
    "\\", "a\\b", "\\\\", "a\\\\b", "\\x41", "\\u0041", "a\\nb", "\\! id", "a\\g", "\\gexec", "a\\",
    "\\'; create table public.pwned_b(i int); --",
]
# Letters that look like a-z but are not ASCII.
_LOOKALIKES = [
    "\u0430cme", "acm\u0435", "\u043ecean", "\u0440ay", "\u0441at", "\u03bfrbit", "\u03b1lpha",
    "\uff41cme", "\U0001d41acme", "\u0131t", "\u017fun", "\ufb01le", "\u212aelvin", "caf\u00e9", "cafe\u0301",
    "na\u00efve", "\u0251cme", "\u1d00cme", "\u24d0cme", "\u2170x", "a\u0307", "\u00e5ngstr\u00f6m",
]
_FORMAT_AND_SPACES = [
    "a\u200bb", "\u200b", "a\u200cb", "a\u200db", "a\u202eb", "\u202eacme", "a\u2066b\u2069", "\ufeffacme",
    "a\u00adb", "a\u2060b", "a\u3000b", "\u3000", "a\u00a0b", "\u00a0", "a\u2028b", "a\u2029b", " acme",
    "acme ", "a b", "a\tb", "\u3164", "a\ufe0fb", "a\U000e0041b",
]
# Control characters, NUL excepted (PostgreSQL text cannot hold it).
_CONTROLS = [f"a{chr(c)}b" for c in list(range(1, 32)) + list(range(0x7F, 0xA0, 4))] + [
    "acme\n", "\nacme", "acme\r\n", "a\x1b[31mb", "\x1b]0;owned\x07", "\x07", "a\x9b31mb",
]
_LONG = ["a" * 48, "a" * 49, "a" * 63, "a" * 64, "a" * 100, "x" * 1000, "y" * 10000, "\u00e9" * 25, "a" * 46 + "\u00e9"]
_PLACEHOLDERS = ["__ext__", "__tenant__", "_", "__", "_acme", "__ext__acme"]
_RESERVED_WORDS = [
    "select", "user", "table", "all", "order", "from", "where", "grant", "create", "null", "true", "false",
    "default", "current_user", "session_user", "authorization", "column", "union", "analyse", "system_user",
]
# Fine for PostgreSQL (quoted, mostly), not for pgrecall.
_PG_BUT_NOT_PGRECALL = [
    "", "Acme", "ACME", "aCme", "pg_toast", "pg_catalog", "pg_temp", "pg_anything", "pgrecall", "pgrecall_x",
    "pgrecallx", "public", "information_schema", "extensions", "1abc", "9", "a-b", "a.b", "a.b.c", "a:b",
    "a@b", "a/b", "a?host=/tmp", "a&user=postgres", "a%20b", "a+b", "a=b", "a,b", "a(b)", "a[1]", "a{b}",
    "a<b>", "a|b", "a!b", "a~b", "a^b", "a*b", "-a", "--tenant", "-", "x@evil.example/?user=postgres",
    "postgresql://x", "a..b", ".a",
]

CORPUS: list[str] = list(dict.fromkeys(
    REPORTED + _QUOTES + _SEMICOLONS_COMMENTS + _DOLLARS + _BACKSLASHES + _LOOKALIKES + _FORMAT_AND_SPACES
    + _CONTROLS + _LONG + _PLACEHOLDERS + _RESERVED_WORDS + _PG_BUT_NOT_PGRECALL
    + [p + c for p in ("acme",) for c in string.punctuation if c != "_"]
))

# Names the rule accepts, some of them awkward: the agreement test needs both sides.
VALID = [
    "acme", "a", "a1", "a_b", "a__ext__", "x__tenant__", "t" * 47, "values", "int", "none", "time", "row",
    "json", "pgx", "pg", "publicity", "users", "selected", "a_", "z9_9",
]
