"""pgrecall.integrations.openai_agents: the Agents SDK's Session on a pgrecall session, with the real
openai-agents package and the real database. The only stand-in is the model: an object of the SDK's own Model
interface that returns scripted replies (no network), and tracing is off (it would export to the network).
"""

from __future__ import annotations

import asyncio

import pytest
from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory import SessionSettings
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

import pgrecall
from pgrecall import errors
from pgrecall.integrations.openai_agents import PgrecallSession


class ScriptedModel(Model):
    """The SDK's Model interface, answering each call with the next scripted text and keeping what it was sent."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.inputs: list = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        self.inputs.append(input)
        text = self.replies.pop(0)
        message = ResponseOutputMessage(id=f"msg_{len(self.inputs)}", type="message", role="assistant",
                                        status="completed",
                                        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")


@pytest.fixture(autouse=True)
def no_tracing():
    set_tracing_disabled(True)


def handle(conninfo, principal: str = "bot"):
    return pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal=principal,
                            scopes=["default"])


def texts(items) -> list[tuple[str, str]]:
    def text(item):
        content = item["content"]
        return content if isinstance(content, str) else "".join(part["text"] for part in content)
    return [(item["role"], text(item)) for item in items]


def test_three_runs_in_one_session_and_a_new_session_object_sees_the_whole_history(acme, conninfo):
    model = ScriptedModel(["Hello Ana!", "Porto is lovely in May.", "You said you live in Porto."])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)

    async def conversation():
        session = PgrecallSession("chat-ana-1", acme, user="ana")
        for said in ["Hi, I am Ana.", "I live in Porto.", "Where do I live?"]:
            await Runner.run(agent, said, session=session)
        return session

    session = asyncio.run(conversation())
    expected = [("user", "Hi, I am Ana."), ("assistant", "Hello Ana!"), ("user", "I live in Porto."),
                ("assistant", "Porto is lovely in May."), ("user", "Where do I live?"),
                ("assistant", "You said you live in Porto.")]
    # the third run was sent the first two runs' history, from the database
    assert texts(model.inputs[2]) == expected[:5]

    with handle(conninfo) as other_process:
        again = PgrecallSession("chat-ana-1", other_process, user="ana")
        assert texts(asyncio.run(again.get_items())) == expected
        assert texts(asyncio.run(again.get_items(limit=2))) == expected[4:]
        assert again.pgrecall_session == session.pgrecall_session
    # each item is a turn of the session, its text searchable, said by whom it was said by
    found = acme.search_messages("Porto", session_id=session.pgrecall_session, embed=False)
    assert {(hit.body, hit.actor) for hit in found.items} >= {("I live in Porto.", "ana"),
                                                               ("Porto is lovely in May.", "bot")}


def test_pop_and_clear_append_a_retraction_and_delete_nothing(acme, db):
    session = PgrecallSession("chat-ben", acme, user="ben")

    async def story():
        await session.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
                                 {"role": "user", "content": "three"}])
        popped = await session.pop_item()
        after_pop = await session.get_items()
        await session.clear_session()
        after_clear = await session.get_items()
        await session.add_items([{"role": "user", "content": "four"}])
        return popped, after_pop, after_clear, await session.get_items(), await session.pop_item()

    popped, after_pop, after_clear, last, popped_again = asyncio.run(story())
    assert popped == {"role": "user", "content": "three"}
    assert [i["content"] for i in after_pop] == ["one", "two"]
    assert after_clear == []
    assert [i["content"] for i in last] == ["four"]
    assert popped_again == {"role": "user", "content": "four"}
    assert asyncio.run(session.pop_item()) is None
    # every item is still in the log, and so is each retraction, in order: nothing was updated or deleted
    log = db.execute("select log_offset, kind, payload from acme.observation where session_id = %s order by log_offset",
                     (session.pgrecall_session,)).fetchall()
    assert [(kind, payload.get("agents_item", {}).get("content"), payload.get("agents_retract"))
            for _, kind, payload in log] == [
        ("message", "one", None), ("message", "two", None), ("message", "three", None),
        ("event", None, [3]), ("event", None, [1, 2]), ("message", "four", None), ("event", None, [6])]
    assert [offset for offset, _, _ in log] == list(range(1, 8))


def test_a_session_of_that_id_the_principal_is_not_in_is_refused(acme, conninfo):
    asyncio.run(PgrecallSession("private", acme, user="ana").add_items([{"role": "user", "content": "secret"}]))
    with handle(conninfo, "ben") as ben, pytest.raises(errors.NotInSession):
        asyncio.run(PgrecallSession("private", ben, user="ben").get_items())


def test_items_that_are_not_json_objects_are_refused_and_nothing_is_written(acme, db):
    session = PgrecallSession("chat-bad", acme, user="ana")
    before = db.execute("select count(*) from acme.observation").fetchone()[0]
    with pytest.raises(errors.InvalidArgument):
        asyncio.run(session.add_items(["not an object"]))
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == before


def test_the_sdks_session_limit_is_honoured_and_a_limit_of_zero_sends_no_history(acme, db):
    """The SDK's sessions read the last session_settings.limit items when get_items() is given none, and no item for
    a limit of 0 (SQLiteSession, Redis, MongoDB, the Conversations API). Here get_items() ignored the session's
    settings, and a run with RunConfig(session_settings=SessionSettings(limit=0)) failed with PR150."""
    model = ScriptedModel(["Hello Ana!", "Noted."])
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    session = PgrecallSession("chat-limit", acme, user="ana")

    async def conversation():
        await Runner.run(agent, "Hi, I am Ana.", session=session)
        await Runner.run(agent, "I live in Porto.", session=session,
                         run_config=RunConfig(session_settings=SessionSettings(limit=0)))

    asyncio.run(conversation())
    assert texts(model.inputs[1]) == [("user", "I live in Porto.")]  # no history, as asked
    assert asyncio.run(session.get_items(limit=0)) == []
    session.session_settings = SessionSettings(limit=1)
    assert texts(asyncio.run(session.get_items())) == [("assistant", "Noted.")]
    assert len(asyncio.run(session.get_items(limit=3))) == 3  # a limit given wins over the settings'
    with pytest.raises(errors.OutOfRange, match="limit must be 0 to 1000000, not -1"):
        asyncio.run(session.get_items(limit=-1))
    # a limit of 0 reads nothing, in SQL too
    assert db.execute("select count(*) from acme.agent_session_items('bot', '{default}', %s, 0)",
                      (session.pgrecall_session,)).fetchone()[0] == 0
