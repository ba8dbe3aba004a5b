"""pgrecall.integrations.langgraph: LangGraph's BaseStore on pgrecall, against the real langgraph and langmem.

No mock of either side: the database is the test's own PostgreSQL with tenant acme, the store is LangGraph's
own interface, the reference is LangGraph's own InMemoryStore, the model is the real all-MiniLM-L6-v2, and
the only stand-in is the chat model (scripted tool calls instead of a network LLM).
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from langchain_core.messages import AIMessage
from langgraph.store.base import InvalidNamespaceError
from langgraph.store.memory import InMemoryStore

import pgrecall
from pgrecall import errors
from pgrecall.integrations.langgraph import PgrecallStore
from pgrecall.worker import Worker


def handle(conninfo, principal: str, scopes=("default",)):
    return pgrecall.connect(conninfo.dsn(user="pgrecall_acme_app"), tenant="acme", principal=principal,
                            scopes=list(scopes))


def embed_all(conninfo):
    return Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()


@pytest.fixture
def store(acme):
    return PgrecallStore(acme)


def memory_rows(db):
    return db.execute("select id, revision, store_namespace, store_key, store_value, invalidated_at is not null "
                      "from acme.memory where store_key is not null order by id").fetchall()


def test_a_put_of_an_existing_key_is_a_revision_of_one_memory(store, acme, db):
    store.put(("memories", "ana"), "diet", {"content": "Ana is vegetarian"})
    first = store.get(("memories", "ana"), "diet")
    assert first.value == {"content": "Ana is vegetarian"} and first.namespace == ("memories", "ana")
    store.put(("memories", "ana"), "diet", {"content": "Ana is vegan", "since": 2026})
    assert store.get(("memories", "ana"), "diet").value == {"content": "Ana is vegan", "since": 2026}
    [(memory_id, revision, namespace, key, value, forgotten)] = memory_rows(db)
    assert (revision, namespace, key, forgotten) == (2, ["memories", "ana"], "diet", False)
    assert db.execute("select store_value from acme.memory_revision where memory_id = %s",
                      (memory_id,)).fetchall() == [({"content": "Ana is vegetarian"},)]
    # the same value again writes nothing: no revision, no turn
    offsets = db.execute("select count(*) from acme.observation").fetchone()[0]
    store.put(("memories", "ana"), "diet", {"content": "Ana is vegan", "since": 2026})
    assert memory_rows(db)[0][1] == 2
    assert db.execute("select count(*) from acme.observation").fetchone()[0] == offsets
    store.delete(("memories", "ana"), "diet")
    assert store.get(("memories", "ana"), "diet") is None
    assert memory_rows(db)[0][5] is True  # forgotten, kept as history
    store.put(("memories", "ana"), "diet", {"content": "Ana eats fish again"})
    assert [r[5] for r in memory_rows(db)] == [True, False]  # a new memory: the key was free


def test_a_namespace_the_principal_may_not_see_answers_as_empty(acme, conninfo):
    with handle(conninfo, "ana") as ana_mem, handle(conninfo, "ben") as ben_mem:
        ana, ben = PgrecallStore(ana_mem), PgrecallStore(ben_mem)
        ana.put(("memories", "ana"), "party", {"content": "Surprise party for Ben on March 13"})
        assert ben.get(("memories", "ana"), "party") is None
        assert ben.search(("memories",)) == []
        assert ben.search(("memories",), query="surprise party") == []
        assert ben.list_namespaces() == []
        # Ben's put of the same key is Ben's own item; Ana's is untouched
        ben.put(("memories", "ana"), "party", {"content": "no party planned"})
        assert ana.get(("memories", "ana"), "party").value == {"content": "Surprise party for Ben on March 13"}
        assert ben.get(("memories", "ana"), "party").value == {"content": "no party planned"}
        ben.delete(("memories", "ana"), "party")
        assert ana.get(("memories", "ana"), "party") is not None
        # an item shared with the scope is everyone's, under the same key
        PgrecallStore(ana_mem, shared=True).put(("household",), "wifi", {"content": "the password is on the fridge"})
        shared_ben = PgrecallStore(ben_mem, shared=True)
        assert shared_ben.get(("household",), "wifi").value == {"content": "the password is on the fridge"}
        shared_ben.put(("household",), "wifi", {"content": "the password changed"})
        assert PgrecallStore(ana_mem, shared=True).get(("household",), "wifi").value == {
            "content": "the password changed"}
        # and a purpose the item does not allow sees nothing
        assert PgrecallStore(ana_mem, purpose="act").get(("memories", "ana"), "party") is None


@pytest.mark.parametrize(("namespace", "key", "value", "error", "sqlstate"), [
    ("memories", "k", {"content": "x"}, InvalidNamespaceError, "PR160"),          # a str, not a tuple
    (("memories", 7), "k", {"content": "x"}, InvalidNamespaceError, "PR160"),     # a label that is no str
    ((), "k", {"content": "x"}, InvalidNamespaceError, "PR160"),                  # no label
    (("memories", ""), "k", {"content": "x"}, InvalidNamespaceError, "PR160"),    # an empty label
    (("mem.ories",), "k", {"content": "x"}, InvalidNamespaceError, "PR160"),      # a dot joins labels
    (("langgraph", "x"), "k", {"content": "x"}, InvalidNamespaceError, "PR160"),  # LangGraph's own root
    (("memories",), "k", ["a", "list"], errors.ValueNotObject, "PR161"),
    (("memories",), "k", "a string", errors.ValueNotObject, "PR161"),
    (("memories",), "k" * 1025, {"content": "x"}, errors.TextTooLong, "PR151"),
])
def test_bad_input_is_refused_with_its_code_and_nothing_is_stored(store, db, namespace, key, value, error, sqlstate):
    before = db.execute("select (select count(*) from acme.memory), (select count(*) from acme.observation)").fetchone()
    with pytest.raises(error) as caught:
        store.put(namespace, key, value)
    assert isinstance(caught.value, errors.PgrecallError) and caught.value.sqlstate == sqlstate
    assert isinstance(caught.value, ValueError)
    after = db.execute("select (select count(*) from acme.memory), (select count(*) from acme.observation)").fetchone()
    assert after == before


def test_a_value_whose_text_is_over_a_memorys_bound_is_refused_naming_the_value(store, db):
    """A LangGraph user puts a value; the refusal said "memory body is 17000 bytes", a word the store's user never
    used, and which part of the value was measured went unsaid (its strings, not its JSON)."""
    before = db.execute("select (select count(*) from acme.memory), (select count(*) from acme.observation)").fetchone()
    with pytest.raises(errors.TextTooLong) as caught:
        store.put(("memories",), "essay", {"title": "t" * 9000, "content": "c" * 8000})
    message = str(caught.value.args[0])
    assert message == "the value's text (its strings, one a line) is 17001 bytes, more than the 16384 allowed", message
    assert "max_memory_bytes" in caught.value.hint
    after = db.execute("select (select count(*) from acme.memory), (select count(*) from acme.observation)").fetchone()
    assert after == before


# -- the differential test: the same random operations on LangGraph's InMemoryStore and on pgrecall's store ----

LABELS = ["a", "b", "c", "x"]
KEYS = ["k1", "k2", "k3", "k4"]
WORDS = "apple river stone cloud lamp violin garden copper winter harbour".split()
FILTERS = [None, {"tag": "red"}, {"n": {"$gt": 3}}, {"n": {"$ne": 2}}, {"tag": "blue", "n": {"$lte": 5}},
           {"meta": {"kind": "fact"}}, {"tags": ["red", "blue"]}]


def random_namespace(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(LABELS) for _ in range(rng.randint(1, 3)))


def random_value(rng: random.Random) -> dict:
    value = {"n": rng.randint(0, 6), "tag": rng.choice(["red", "blue", "green"])}
    if rng.random() < 0.8:
        value["text"] = " ".join(rng.sample(WORDS, 3))
    if rng.random() < 0.3:
        value["meta"] = {"kind": rng.choice(["fact", "note"])}
    if rng.random() < 0.3:
        value["tags"] = rng.sample(["red", "blue"], 2)
    return value


def random_path(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(LABELS + ["*"]) for _ in range(rng.randint(1, 2)))


def drop_empty_namespaces(reference: InMemoryStore) -> None:
    """InMemoryStore keeps a namespace's entry after its last item is deleted, and even makes one when a get
    reads a namespace that never held anything (a defaultdict), so its list_namespaces lists namespaces that
    hold no item. LangGraph's PostgresStore lists the namespaces of its items only, and so does pgrecall's;
    the reference is kept to that meaning by dropping its empty entries after each operation."""
    for namespace in [ns for ns, items in reference._data.items() if not items]:
        del reference._data[namespace]


def triples(items) -> list:
    return sorted((item.namespace, item.key, repr(sorted(item.value.items()))) for item in items)


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_answer_as_langgraphs_in_memory_store(acme, conninfo, seed):
    rng = random.Random(seed)
    principal = f"differential{seed}"
    acme.add_peer(principal, "agent")
    reference = InMemoryStore()
    with handle(conninfo, principal) as mem:
        ours = PgrecallStore(mem)
        for step in range(120):
            kind = rng.choices(["put", "delete", "get", "search", "page", "list"], [5, 1, 2, 2, 1, 2])[0]
            where = f"seed {seed}, step {step}: {kind}"
            if kind == "put":
                namespace, key, value = random_namespace(rng), rng.choice(KEYS), random_value(rng)
                reference.put(namespace, key, value)
                ours.put(namespace, key, value)
            elif kind == "delete":
                namespace, key = random_namespace(rng), rng.choice(KEYS)
                reference.delete(namespace, key)
                ours.delete(namespace, key)
            elif kind == "get":
                namespace, key = random_namespace(rng), rng.choice(KEYS)
                expected, got = reference.get(namespace, key), ours.get(namespace, key)
                assert (got and (got.namespace, got.key, got.value)) == (
                    expected and (expected.namespace, expected.key, expected.value)), where
            elif kind == "search":
                prefix = random_namespace(rng)[:rng.randint(0, 2)]
                condition = rng.choice(FILTERS)
                expected = reference.search(prefix, filter=condition, limit=1000)
                assert triples(ours.search(prefix, filter=condition, limit=1000)) == triples(expected), where
            elif kind == "page":
                # the order of a search without a query is each store's own (InMemoryStore: its dicts'
                # insertion order; pgrecall and PostgresStore: newest change first), so a page is compared
                # by its size and by being part of the whole answer
                prefix, limit, offset = random_namespace(rng)[:1], rng.randint(1, 4), rng.randint(0, 4)
                whole = triples(reference.search(prefix, limit=1000))
                page = triples(ours.search(prefix, limit=limit, offset=offset))
                assert len(page) == len(triples(reference.search(prefix, limit=limit, offset=offset))), where
                assert set(page) <= set(whole), where
            else:
                arguments = {"prefix": random_path(rng) if rng.random() < 0.5 else None,
                             "suffix": random_path(rng) if rng.random() < 0.3 else None,
                             "max_depth": rng.choice([None, 1, 2]), "limit": rng.randint(1, 10),
                             "offset": rng.randint(0, 3)}
                assert ours.list_namespaces(**arguments) == reference.list_namespaces(**arguments), (where,
                                                                                                     arguments)
            drop_empty_namespaces(reference)
        # and the whole state, at the end
        assert triples(ours.search((), limit=1000)) == triples(reference.search((), limit=1000))
        assert ours.list_namespaces(limit=1000) == reference.list_namespaces(limit=1000)


# -- search with a query is pgrecall's hybrid recall --------------------------------------------------------

# Queries a user would ask, most sharing no word with the item (so the dense arm must find them). Measured on
# 2026-12-06 with two harder paraphrases, "what animal lives with her" found the allergy first and "favourite
# hot drink" found nothing (below the dense arm's cosine floor of 0.30): 6 of 8 first.
LABELLED = {
    "dog": ("Ana adopted a golden retriever puppy last spring", "what kind of dog does Ana have"),
    "allergy": ("Ben cannot eat peanuts and carries an epinephrine pen", "which foods are dangerous for him"),
    "job": ("Rita works night shifts as a nurse at the city hospital", "what is Rita's occupation"),
    "travel": ("Next month the family flies to Tokyo for two weeks", "upcoming holiday in Japan"),
    "music": ("Ana plays the cello in an amateur orchestra", "which instrument does she practise"),
    "car": ("The old hatchback broke down, so they bought an electric car", "what vehicle do they drive now"),
    "coffee": ("Every morning starts with a double espresso", "what coffee is drunk in the morning"),
    "garden": ("Tomatoes and basil grow on the balcony", "what vegetables are planted at home"),
}


def test_search_with_a_query_ranks_the_expected_item_first(store, conninfo):
    for key, (text, _) in LABELLED.items():
        store.put(("memories", "ana"), key, {"content": text})
    embed_all(conninfo)  # what `pgrecall worker` does beside the server
    firsts = {key: [item.key for item in store.search(("memories",), query=query, limit=3)]
              for key, (_, query) in LABELLED.items()}
    assert {key: found[:1] for key, found in firsts.items()} == {key: [key] for key in LABELLED}, firsts
    found = store.search(("memories", "ana"), query="golden retriever", limit=1)[0]
    assert found.score is not None and found.value == {"content": LABELLED["dog"][0]}
    # a filter and a prefix apply to recall's answer too
    assert store.search(("other",), query="golden retriever") == []
    assert store.search(("memories",), query="golden retriever", filter={"content": "x"}) == []


def test_a_search_finds_the_stores_items_when_other_memories_of_the_scope_rank_first(store, acme):
    # 30 memories that are no store items, each a better lexical match than the one item: recall's first
    # rows are all theirs, and the store recalls again as deep as the permission walk goes
    for n in range(30):
        acme.remember(f"Golden retriever walk number {n}: golden retriever, golden retriever",
                      said=f"walk {n} with the golden retriever", purposes=["converse"])
    store.put(("memories", "ana"), "dog", {"content": "Ana has a golden retriever"})
    [found] = store.search(("memories",), query="golden retriever", limit=1)
    assert found.value == {"content": "Ana has a golden retriever"}


def test_the_async_forms_work(store):
    async def story():
        await store.aput(("memories", "ana"), "tea", {"content": "Ana drinks green tea"})
        assert (await store.aget(("memories", "ana"), "tea")).value == {"content": "Ana drinks green tea"}
        assert [i.key for i in await store.asearch(("memories",), query="green tea")] == ["tea"]
        assert await store.alist_namespaces() == [("memories", "ana")]
        await store.adelete(("memories", "ana"), "tea")
        assert await store.aget(("memories", "ana"), "tea") is None

    asyncio.run(story())


# -- LangMem's memory tools and a LangGraph agent on pgrecall's store ----------------------------------------


def test_langmems_tools_run_on_the_store_with_what_a_model_sends(store):
    from langmem import create_manage_memory_tool, create_search_memory_tool

    manage = create_manage_memory_tool(namespace=("memories", "ana"), store=store)
    search = create_search_memory_tool(namespace=("memories", "ana"), store=store)
    said = manage.invoke({"content": "Ana prefers window seats on long flights", "action": "create"})
    assert said.startswith("created memory ")
    memory_id = said.removeprefix("created memory ")
    found = json.loads(search.invoke({"query": "window seats on flights"}))
    assert [(m["key"], m["value"]) for m in found] == [(memory_id, {"content": "Ana prefers window seats on long flights"})]
    assert manage.invoke({"content": "Ana prefers aisle seats now", "action": "update", "id": memory_id}) == (
        f"updated memory {memory_id}")
    assert store.get(("memories", "ana"), memory_id).value == {"content": "Ana prefers aisle seats now"}
    assert manage.invoke({"action": "delete", "id": memory_id}) == f"Deleted memory {memory_id}"
    assert json.loads(search.invoke({"query": "aisle seats"})) == []


def scripted_model(*replies: AIMessage):
    """The network LLM's stand-in: LangChain's own GenericFakeChatModel, replying with the given messages (tool
    calls included) in turn; bind_tools, which create_react_agent calls, keeps it as it is."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):
            return self

    return Scripted(messages=iter(replies))


def test_a_langgraph_agent_stores_a_memory_in_one_thread_and_finds_it_in_another(store):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent
    from langmem import create_manage_memory_tool, create_search_memory_tool

    model = scripted_model(
        AIMessage("", tool_calls=[{"name": "manage_memory", "id": "call-1",
                                   "args": {"content": "The user's cat is called Miso", "action": "create"}}]),
        AIMessage("I will remember Miso."),
        AIMessage("", tool_calls=[{"name": "search_memory", "id": "call-2", "args": {"query": "cat name"}}]),
        AIMessage("Your cat is called Miso."),
    )
    # the tools read the store the agent was compiled with (LangGraph's get_store), as in LangMem's examples
    agent = create_react_agent(model, tools=[create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}")),
                                             create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"))],
                               store=store, checkpointer=InMemorySaver())
    first = agent.invoke({"messages": [("user", "Remember that my cat is called Miso.")]},
                         {"configurable": {"thread_id": "one", "langgraph_user_id": "ana"}})
    assert first["messages"][-1].content == "I will remember Miso."
    [item] = store.search(("memories", "ana"))
    assert item.value == {"content": "The user's cat is called Miso"}

    second = agent.invoke({"messages": [("user", "What is my cat called?")]},
                          {"configurable": {"thread_id": "two", "langgraph_user_id": "ana"}})
    assert [m.content for m in second["messages"] if m.type == "human"] == ["What is my cat called?"]  # a new thread
    [tool_reply] = [m for m in second["messages"] if m.type == "tool"]
    assert [m["value"] for m in json.loads(tool_reply.content)] == [{"content": "The user's cat is called Miso"}]
