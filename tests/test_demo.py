"""`make run`'s demo, end to end: import, remember, correct, supersede, embed, recall."""

import re
from pathlib import Path

import pytest

from test_install_paths import run_cli
from test_mcp import check_the_demo_over_mcp

DOCS_AGENTS = Path(__file__).resolve().parents[1] / "docs" / "agents.md"


@pytest.mark.slow
def test_demo_answers_from_current_facts_and_keeps_secrets(conninfo, tmp_path):
    out = run_cli("demo", env={"PGRECALL_DSN": conninfo.dsn()}).stdout
    assert "remembered 18 memories" in out and "the worker embedded 18 memories" in out
    # plain words: what recall did is behind --explain, not in the product's first screen
    for jargon in ("candidate", "dense", "lexical", "cosine", "score", "watermark", "input version", "arm",
                   "migration", "(user)", "queue"):
        assert jargon not in out, jargon
    assert "`pgrecall demo --explain` shows how each answer was ranked" in out
    # a restatement weeks later is proposed as a duplicate, for a person to decide on the review screen
    assert re.search(r"Possible duplicates, for a person to decide: 1 pair; nothing is merged until someone decides\n"
                     r"  \[memory \d+\] Ben is severely allergic to peanuts  \|  "
                     r"\[memory \d+\] Ben is allergic to peanuts: no peanuts in shared meals   \(said alike\)\n", out)
    assert "pgrecall review --tenant demo --as Sage --scopes flat" in out
    answers = {}
    for block in out.split("\n\n"):
        m = re.search(r"(\w+) asks: .(.+?).\n", block)
        if m:
            answers[(m.group(1), m.group(2))] = block
    where = answers[("Sage", "Where do Ana and Ben live?")]
    assert re.search(r"1\. Ana and Ben live in Porto.*\(memory \d+, matches the question's words and meaning\)", where)
    assert "live in Lisbon" not in where  # superseded
    birthday = answers[("Sage", "When is Ben's birthday?")]
    assert re.search(r"1\. Ben's birthday is on March 13 ", birthday)
    # its proof cites the turn that corrected it, not only the one it corrected
    first = birthday.split("\n  2. ")[0]
    assert "from turn 9, Ben: My birthday is on March 3" in first
    assert re.search(r"from turn 23, Ben: Correction: my birthday is March 13.*"
                     r"\(cited by the correction that made revision 2\)", first)
    # Ben asks about his birthday: he finds its date, and the surprise Ana keeps from him stays hidden
    ben = answers[("Ben", "What is happening on my birthday?")]
    assert re.search(r"1\. Ben's birthday is on March 13 ", ben)
    assert "surprise" not in ben and "party" not in ben
    assert "surprise party" in answers[("Ana", "What am I planning for Ben's birthday?")]
    # the turns behind it are Ana's and Sage's: Ben's search of the log finds none of them (#27)
    assert "Ben searches the log for 'surprise party': 0 turns" in out
    assert re.search(r"Ana searches the log for 'surprise party': 2 turns\n  turn 28, Sage: .*\n  turn 27, Ana: "
                     r"I'm planning a surprise party", out)
    # a memory widened on purpose past a turn Ben may not see: he reads the memory, the quote is withheld
    cake = answers[("Ben", "What cake do I like?")]
    assert re.search(r"1\. Ben's favourite cake is lemon drizzle .*\n"
                     r"       from turn 29: withheld, a turn Ben may not see\n"
                     r"       shared on purpose: Ben's taste in cake is no secret", cake)
    assert "lemon drizzle." not in cake  # the turn's own words
    assert "pinned Shared meals must be vegetarian and peanut free" in out
    # two peers in a session: the queue drains into the representations
    assert "Rita's global representation is pending (3 messages to read), Bolt's view of Rita pending (3 to read)" in out
    assert "now Rita's global representation is current, Bolt's view of Rita current" in out
    # what Rita said in a session with Bolt is theirs: her global view is seen by her, not by the scope
    assert re.search(r"Rita, globally \(as she may see it\): .*Rita lives in Porto.* \| facts: "
                     r".*lives_in \(fact \d+, from turn 3\)", out)
    assert "Rita, globally, as Bolt may see it: (nothing)" in out
    assert re.search(r"Rita, as Bolt sees her: .*Rita works at Lello.* \| facts: .*works_at", out)
    assert "Bolt's view of Rita, as Rita may see it: (nothing)" in out
    assert re.search(r"Bolt's working representation: Rita: Rita's name is Rita Alves \(turn 1\)", out)
    # a second run reuses what is there; --explain shows how recall ranked each answer
    again = run_cli("demo", "--explain", env={"PGRECALL_DSN": conninfo.dsn()}).stdout
    assert "already holds 55 turns" in again and "the worker embedded 0 memories" in again
    assert "(reusing its 4 turns)" in again and "wrote 0 memories (0 tasks completed, 0 failed)" in again
    assert re.search(r"tenant 'demo' is ready \(at migration \d+\)", again)
    assert "[explain] model all-MiniLM-L6-v2, input version 2" in again
    assert "[explain] cosine >= 0.8" in again and re.search(r"\(cosine 0\.\d\d\)\n", again)
    where = next(b for b in again.split("\n\n") if "Sage asks: 'Where do Ana and Ben live?'" in b)
    assert re.search(r"\[explain\] \d+ candidates after the permission walk \(\d+ lexical, \d+ dense\).*; "
                     r"dense arm on; log watermark 55", where)
    assert re.search(r"1\. Ana and Ben live in Porto.*\(memory \d+; lexical #1; dense #1, cosine 0\.\d\d; "
                     r"score \d\.\d{4}\)", where)
    assert "from turn 47, Ana (user): We've moved." in where
    assert "[explain] work queue" in again
    # docs/agents.md shows what the session-start bundle prints after make run: a new user found it stale once
    command = "pgrecall bundle --tenant demo --as Ana --recent 2"
    shown = DOCS_AGENTS.read_text().split(f"$ {command}\n", 1)[1].split("\n```", 1)[0]
    printed = run_cli(*command.split()[1:], env={"PGRECALL_DSN": conninfo.dsn()}).stdout.rstrip("\n")
    assert _undated(printed) == _undated(shown), "docs/agents.md's bundle is not what the command prints"
    # and an MCP client reaches the same memory as its principals
    check_the_demo_over_mcp(conninfo.dsn(user="pgrecall_demo_app"), tmp_path)


def _undated(bundle: str) -> str:
    """A bundle without the day its memories changed (the day the demo ran)."""
    return re.sub(r"changed \d{4}-\d{2}-\d{2}", "changed <day>", bundle)
