"""docs/reference.md covers every public function, and says who may call it.

Every public function of a freshly created tenant has an entry (a `### \\<tenant\\>.name` heading,
which may name several functions), and each entry states its duty on one line,
`**Duty**: app, worker` (roles in the order app, worker, admin), which must be the duty
sql/duties.sql declares (loaded into pgrecall.function_duty; tests/test_duties.py holds the
catalog's grants to the same table). The control plane's entries say `dba`. The duty matrix
table of the reference says the same, and every link of the page leads to a heading. The parameters
each entry's signature shows (names, order, types, which have a default) are the catalog's.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"
ORDER = ("app", "worker", "admin")
DUTY_LINE = re.compile(r"^\*\*Duty\*\*: (?P<duties>[a-z, ]+?)\.(?: .*)?$")


def entries(text: str) -> dict[str, list[dict]]:
    """Each `### schema.function` entry: the functions it names and the Duty lines under it."""
    found: dict[str, list[dict]] = {"tenant": [], "pgrecall": []}
    current = None
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("#"):
            current = None
            if line.startswith("### "):
                tenant = re.findall(r"\\<tenant\\>\.(\w+)", line)
                control = re.findall(r"\bpgrecall\.(\w+)", line)
                if tenant or control:
                    current = {"functions": tenant or control, "duties": [], "line": number}
                    found["tenant" if tenant else "pgrecall"].append(current)
        elif current is not None and line.startswith("**Duty**"):
            match = DUTY_LINE.match(line)
            current["duties"].append(match["duties"].split(", ") if match else line)
    return found


def declared_duties(db) -> dict[str, list[str]]:
    return {name: sorted(duties, key=ORDER.index)
            for name, duties in db.execute("select function_name, duties from pgrecall.function_duty")}


def public_functions(db, schema: str) -> set[str]:
    return {r[0] for r in db.execute(
        "select distinct proname::text from pg_proc where pronamespace = %s::regnamespace and left(proname, 1) <> '_'",
        (schema,))}


def test_every_public_tenant_function_has_an_entry_stating_its_declared_duty(acme, db):
    tenant_entries = entries(REFERENCE.read_text())["tenant"]
    documented = {f: e for e in tenant_entries for f in e["functions"]}
    public = public_functions(db, "acme")
    assert sorted(public - set(documented)) == [], "public functions without a reference entry"
    assert sorted(set(documented) - public) == [], "reference entries for functions the tenant does not have"
    declared = declared_duties(db)
    wrong = {}
    for entry in tenant_entries:
        if len(entry["duties"]) != 1:
            wrong[f"line {entry['line']}"] = f"{len(entry['duties'])} Duty lines: {entry['duties']}"
            continue
        stated = entry["duties"][0]
        for function in entry["functions"]:
            if stated != declared[function]:
                wrong[function] = f"the reference says {stated}, sql/duties.sql {declared[function]}"
    assert wrong == {}


def test_every_control_plane_function_has_an_entry_whose_duty_is_the_dba(db):
    control_entries = entries(REFERENCE.read_text())["pgrecall"]
    documented = {f for e in control_entries for f in e["functions"]}
    assert public_functions(db, "pgrecall") == documented
    assert [e["duties"] for e in control_entries if e["duties"] != [["dba"]]] == []


def test_the_duty_matrix_table_is_sql_duties(acme, db):
    text = REFERENCE.read_text()
    section = text[text.index("#### The duty matrix"):text.index("#### Who sees what")]
    stated: dict[str, list[str]] = {}
    for row in section.split("\n"):
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        duties = [role for role, mark in zip(ORDER, cells[1:]) if mark]
        for function in re.findall(r"`(\w+)`", cells[0]):
            assert function not in stated, f"{function} is in the matrix twice"
            stated[function] = duties
    assert stated == declared_duties(db)


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.replace("\\<", "<").replace("\\>", ">").strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def test_every_link_within_the_reference_leads_to_a_heading_and_every_entry_is_in_the_contents():
    text = REFERENCE.read_text()
    anchors = set()
    in_code = False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(github_anchor(line.lstrip("#")))
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert sorted(links - anchors) == [], "links to no heading"
    contents = text[:text.index("## How it fits together")]
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    entry_anchors = {github_anchor(line.lstrip("#")) for line in text.split("\n")
                     if line.startswith("### ") and ("\\<tenant\\>." in line or "pgrecall." in line)}
    assert sorted(entry_anchors - listed) == [], "entries the table of contents does not link"


# -- the signatures an entry shows are the catalog's -------------------------------------------------------

TYPE_SPELLINGS = {"timestamp with time zone": "timestamptz", "character varying": "varchar"}


def _split_top_level(text: str) -> list[str]:
    """Split on the commas that are not inside parentheses, brackets or quotes."""
    parts, depth, quoted, current = [], 0, False, []
    for ch in text:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([":
            depth += 1
        elif not quoted and ch in ")]":
            depth -= 1
        if ch == "," and depth == 0 and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def _parameters(arguments: str, schema: str) -> tuple[tuple[str, str, bool], ...]:
    """(name, type, has a default) of each parameter of an argument list, spelt alike in both sources."""
    found = []
    for part in _split_top_level(" ".join(arguments.split())):
        head, _, default = re.split(r"\s+(default)\s+", part.strip(), maxsplit=1, flags=re.I) \
            if re.search(r"\s+default\s+", part, re.I) else (part.strip(), "", "")
        name, _, sql_type = head.strip().partition(" ")
        sql_type = sql_type.strip().lower().replace(f"{schema}.", "<tenant>.").replace("__tenant__.", "<tenant>.")
        for long, short in TYPE_SPELLINGS.items():
            sql_type = sql_type.replace(long, short)
        found.append((name, sql_type, bool(default)))
    return tuple(found)


def shown_signatures(text: str) -> dict[str, list[tuple]]:
    """Each function an entry's first sql block shows: its parameters as _parameters spells them."""
    shown: dict[str, list[tuple]] = {}
    for block in re.findall(r"^### .*?\n```sql\n(.*?)```", text, re.S | re.M):
        for match in re.finditer(r"(?:<tenant>|pgrecall)\.(\w+)\(", block):
            depth, end = 1, match.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(block[end], 0)
                end += 1
            shown.setdefault(match.group(1), []).append(_parameters(block[match.end():end - 1], "acme"))
    return shown


def catalog_signatures(db, schema: str) -> dict[str, list[tuple]]:
    rows = db.execute("select proname::text, pg_get_function_arguments(oid) from pg_proc "
                      "where pronamespace = %s::regnamespace and left(proname, 1) <> '_'", (schema,)).fetchall()
    found: dict[str, list[tuple]] = {}
    for name, arguments in rows:
        found.setdefault(name, []).append(_parameters(arguments, schema))
    return found


def test_every_signature_an_entry_shows_is_the_catalogs(acme, db):
    """A parameter added, renamed, retyped or given a default in SQL and not in the reference fails here."""
    catalog = {**catalog_signatures(db, "pgrecall"), **catalog_signatures(db, "acme")}
    shown = shown_signatures(REFERENCE.read_text())
    wrong = {name: signatures for name, signatures in shown.items()
             if name in catalog and any(s not in catalog[name] for s in signatures)}
    assert wrong == {}, "\n".join(f"{n}: shown {s}\n  catalog {catalog[n]}" for n, s in wrong.items())
    assert len(shown) > 80


def test_a_signature_that_drifted_from_the_catalog_is_caught(acme, db):
    catalog = catalog_signatures(db, "acme")
    text = REFERENCE.read_text()
    assert "p_embedding_input_version integer default null)" in text
    drifted = shown_signatures(text.replace("p_embedding_input_version integer default null)",
                                            "p_embedding_version integer default null)", 1))
    assert drifted["remember"][0] not in catalog["remember"]
    retyped = shown_signatures(text.replace("p_body text, p_evidence bigint[]", "p_body text, p_evidence integer[]", 1))
    assert retyped["remember"][0] not in catalog["remember"]
