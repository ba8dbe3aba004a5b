"""docs/reference.md covers every public function, and says who may call it.

Every public function of a freshly created tenant has an entry (a `### \\<tenant\\>.name` heading,
which may name several functions), and each entry states its duty on one line,
`**Duty**: app, worker` (roles in the order app, worker, admin), which must be the duty
sql/duties.sql declares (loaded into pgrecall.function_duty; tests/test_duties.py holds the
catalog's grants to the same table). The control plane's entries say `dba`. The duty matrix
table of the reference says the same, and every link of the page leads to a heading.
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
