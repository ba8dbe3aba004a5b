"""The review screen in a real browser: headless Chromium (Debian's package) driven by Playwright.

The app runs in uvicorn on 127.0.0.1, logged in as acme's application role; vectors come from the real
model through the real worker (as the worker role), with the tenant's default embedding input (each
memory's text and the turns around its evidence), as `make run` embeds them.

Outside CI, these tests skip when no Chromium is installed (``apt-get install -y chromium``), and the run
ends with a banner that says so and how to get it (conftest.py); in CI (``CI`` set) a missing browser fails
them. PGRECALL_CHROMIUM names another browser binary (a path that does not exist: none). Set PGRECALL_REVIEW_SCREENSHOT to a path to keep the
screenshot the scenario takes (docs/review.md's review-screen.png was taken so).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pgrecall.worker import Worker

pytest.importorskip("starlette", reason="the review extra is not installed: pip install -e '.[review]'")
playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    from conftest import NO_CHROMIUM

    path = os.environ.get("PGRECALL_CHROMIUM") or shutil.which("chromium")
    if path is None or not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail("CI: no chromium on PATH; .ci/run installs Debian's chromium package")
        pytest.skip(NO_CHROMIUM)
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


class ReviewServer:
    """The review app for one principal, served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self, conninfo, principal, scopes=("default",)):
        import uvicorn

        from pgrecall.review import create_app

        self.app = create_app("acme", principal, list(scopes), conninfo=conninfo.dsn(user="pgrecall_acme_app"))
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the review app did not start"
            time.sleep(0.05)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def serve(acme, conninfo):
    servers = []

    def start(principal, scopes=("default",)):
        servers.append(ReviewServer(conninfo, principal, scopes))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def embed(conninfo):
    return lambda: Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


def said_and_remembered(mem, actor, turn, memory, *, audience=None, principal="bot", filler=None):
    """A turn, the memory it states, and an unrelated turn after it (the embedded input takes in the
    turns around a memory's evidence, as in a real conversation)."""
    offset = mem.append(turn, role="user", actor=actor)
    mid = mem.remember(memory, evidence=[offset], purposes=["converse", "personalize"], audience=audience,
                       principal=principal).memory_id
    if filler:
        mem.append(filler, role="user", actor="bot")
    return mid


def peanut_pair(mem, embed):
    """Ben's allergy, said by Ben and again by Ana, embedded: one proposed pair (a, b)."""
    a = said_and_remembered(mem, "ben", "I'm severely allergic to peanuts.", "Ben is severely allergic to peanuts",
                            filler="The weather was lovely.")
    b = said_and_remembered(mem, "ana", "Ben has a severe peanut allergy, remember.", "Ben has a severe peanut allergy",
                            filler="Our flat has a balcony.")
    embed()
    return a, b


def pairs_on(page):
    return [(int(s.get_attribute("data-a")), int(s.get_attribute("data-b"))) for s in page.locator("section.pair").all()]


def test_a_person_reviews_duplicates_in_the_browser(acme, serve, page, embed, db, tmp_path):
    ana = serve("ana")
    # Before the worker has run, the screen says why it is empty.
    peanuts = said_and_remembered(acme, "ben", "I'm severely allergic to peanuts, please keep them away from me.",
                                  "Ben is severely allergic to peanuts", filler="The weather in Porto was lovely.")
    peanuts_again = said_and_remembered(acme, "ana", "Just so you know, Ben has a severe peanut allergy.",
                                        "Ben has a severe peanut allergy", filler="Our flat has a small balcony.")
    nurse = said_and_remembered(acme, "ana", "I work night shifts as a nurse at Santa Maria.",
                                "Ana works night shifts as a nurse", filler="Pixel loves long walks.")
    page.goto(ana.url)
    assert page.locator("#empty").get_attribute("data-reason") == "no_embeddings"
    assert "No embeddings yet" in page.locator("#empty").inner_text()

    # Two near-duplicate memories appear as a pair, side by side with the turns they came from.
    embed()
    page.goto(ana.url)
    assert pairs_on(page) == [(peanuts, peanuts_again)]
    pair = page.locator(f"#pair-{peanuts}-{peanuts_again}")
    older, newer = pair.locator("article.memory").all()
    assert older.locator(".body").inner_text() == "Ben is severely allergic to peanuts"
    assert newer.locator(".body").inner_text() == "Ben has a severe peanut allergy"
    assert older.locator(".turns .speaker").inner_text() == "ben"
    assert "please keep them away" in older.locator(".turns q").inner_text()
    assert newer.locator(".turns .speaker").inner_text() == "ana"
    assert older.locator(".turns time").inner_text().endswith("UTC")
    cosine = float(pair.locator(".cosine").inner_text().split()[-1])
    assert 0.8 <= cosine < 1
    shot = Path(os.environ.get("PGRECALL_REVIEW_SCREENSHOT") or tmp_path / "review-screen.png")
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    # "Keep both": the pair goes, and is not proposed again.
    pair.locator("textarea").fill("one is Ben's own words, one is Ana's reminder")
    pair.get_by_role("button", name="Keep both").click()
    page.wait_for_url("**/?done=distinct*")
    assert "kept both" in page.locator(".notice").inner_text()
    assert pairs_on(page) == [] and page.locator("#empty").get_attribute("data-reason") == "all_decided"
    page.reload()
    assert pairs_on(page) == []
    assert db.execute("select decision, reason, decided_role from acme.duplicate_decision").fetchall() == [
        ("distinct", "one is Ben's own words, one is Ana's reminder", "pgrecall_acme_app")]

    # "Supersede": one current memory is left, and recall returns only it.
    cake = said_and_remembered(acme, "ana", "My favourite cake is lemon drizzle.",
                               "Ana's favourite cake is lemon drizzle", filler="Did anyone feed the cat?")
    cake_again = said_and_remembered(acme, "ben", "Ana loves lemon drizzle cake more than any other.",
                                     "Ana loves lemon drizzle cake best", filler="See you tomorrow.")
    embed()
    page.goto(ana.url)
    assert pairs_on(page) == [(cake, cake_again)]
    pair = page.locator(f"#pair-{cake}-{cake_again}")
    pair.locator("textarea").fill("the same preference, said twice")
    pair.get_by_role("button", name=f"{cake_again} replaces {cake}").click()
    page.wait_for_url("**/?done=supersede*")
    assert f"Memory {cake} is superseded by memory {cake_again}" in page.locator(".notice").inner_text()
    live = [r[0] for r in db.execute("select id from acme.memory where superseded_by is null "
                                     "and invalidated_at is null and body like '%lemon%'")]
    assert live == [cake_again]
    embed()
    answer = acme.recall("What cake does Ana like?", principal="ana")
    assert [i.memory_id for i in answer.items if "lemon" in i.body] == [cake_again]
    assert nurse


def test_a_principal_who_may_not_see_one_of_the_two_sees_no_pair(acme, serve, page, embed):
    wide = said_and_remembered(acme, "ben", "My birthday is on March 13.", "Ben's birthday is on March 13",
                               filler="The bakery opens at eight.")
    private = said_and_remembered(acme, "ana", "Note to self: Ben's birthday is March 13th, plan something.",
                                  "Ben's birthday is March 13th", audience="ana", principal="ana",
                                  filler="The bus was late again.")
    embed()
    page.goto(serve("ana").url)
    assert pairs_on(page) == [(wide, private)]
    page.goto(serve("ben").url)
    assert pairs_on(page) == []
    assert page.locator("#empty").get_attribute("data-reason") == "one_memory"
    assert "Ben's birthday is March 13th" not in page.content()


def test_memory_text_is_shown_as_text_never_run(acme, acme_admin, serve, page, embed):
    acme_admin.set_setting("duplicate_cosine", 0.5)  # the markup makes the pair less alike; this is about escaping
    attack = "Ben is allergic to peanuts <script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
    plain = said_and_remembered(acme, "ben", "I am allergic to peanuts.", "Ben is allergic to peanuts",
                                filler="The tram was full.")
    evil = said_and_remembered(acme, "ana", attack, attack, filler="Lunch is at one.")
    embed()
    server = serve("ana")
    page.goto(server.url)
    assert pairs_on(page) == [(plain, evil)]
    body = page.locator(f"article[data-memory='{evil}'] .body")
    assert body.inner_text() == attack  # the markup is shown as the characters it is
    assert page.locator("section.pair script, section.pair img").count() == 0
    assert page.title().startswith("Duplicates to review")
    html = urllib.request.urlopen(server.url).read().decode()
    assert "&lt;script&gt;document.title=" in html and "<script>" not in html


def test_a_post_without_the_csrf_token_is_refused(acme, serve, page, embed, db):
    a, b = peanut_pair(acme, embed)
    server = serve("ana")
    page.goto(server.url)  # the browser now holds the screen's cookie
    token = page.locator("input[name=csrf_token]").first.get_attribute("value")
    form = {"a": str(a), "b": str(b), "revision_a": "1", "revision_b": "1", "decision": "distinct",
            "reason": "forged"}
    # the browser's own cookie, but no token / a wrong token
    assert page.request.post(server.url + "decide", form=form).status == 403
    assert page.request.post(server.url + "decide", form={**form, "csrf_token": "0" * 64}).status == 403
    # a page of another origin posting the form, even with a token copied from the screen
    other = page.context.new_page()
    other.set_content(f"""<form method=post action="{server.url}decide">
        {''.join(f'<input type=hidden name={k} value="{v}">' for k, v in {**form, 'csrf_token': token}.items())}
        <button>go</button></form>""")
    with other.expect_navigation():
        other.click("button")
    assert "Refused" in other.content()
    # without the browser's cookie at all (another client)
    request = urllib.request.Request(server.url + "decide", data=urllib.parse.urlencode(
        {**form, "csrf_token": token}).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 403
    assert db.execute("select count(*) from acme.duplicate_decision").fetchone()[0] == 0
    # and the screen's own form, with its token, works
    page.locator("textarea").fill("two reminders")
    page.get_by_role("button", name="Keep both").click()
    page.wait_for_url("**/?done=distinct*")
    assert db.execute("select count(*) from acme.duplicate_decision").fetchone()[0] == 1


def test_the_screen_answers_only_to_its_own_host_name(acme, serve):
    server = serve("ana")
    request = urllib.request.Request(server.url, headers={"Host": "attacker.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request)
    assert refused.value.code == 400
    with urllib.request.urlopen(server.url) as ok:
        assert ok.status == 200
        assert "default-src 'none'" in ok.headers["Content-Security-Policy"]


def test_a_second_reviewer_who_decides_the_same_pair_is_told(acme, serve, browser, embed, db):
    a, b = peanut_pair(acme, embed)
    server = serve("ana")
    first, second = browser.new_context().new_page(), browser.new_context().new_page()
    for p in (first, second):
        p.goto(server.url)
        p.locator("textarea").fill(f"decided in {'the first' if p is first else 'the second'} window")
    first.get_by_role("button", name=f"{b} replaces {a}").click()
    first.wait_for_url("**/?done=supersede*")
    second.get_by_role("button", name="Keep both").click()
    assert "already decided" in second.locator(".error").inner_text()
    assert db.execute("select decision from acme.duplicate_decision").fetchall() == [("supersede",)]
    for p in (first, second):
        p.context.close()
