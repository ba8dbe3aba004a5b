"""A data subject's export (issue #50, item 2): everything an erasure of the same subject would remove, read
from the one erasure plan; export, erase, then export again is empty, and the rows exported are the rows erased."""

import json
from collections import Counter

import pytest

from pgrecall import errors
from pgrecall.worker import Worker

# The receipt's counts that are not rows of the subject: vectors of other memories queued again, and older
# facts believed again. Everything else the receipt counts is a kind of the export.
REBUILDS = {"embedding_input", "facts_reinstated"}


def said(mem, text, subject, actor="ana"):
    return mem.append(text, role="user", actor=actor, data_subject_id=subject)


def exported_counts(rows):
    return dict(Counter(r.kind for r in rows))


def erased_counts(receipt):
    """The receipt's rows erased, per export kind (zero counts left out)."""
    names = {"memories_reverted": "memory_reverted"}
    counts = {names.get(k, k): v for k, v in (receipt.rows_erased or {}).items() if v and k not in REBUILDS}
    if receipt.observations_erased:
        counts["observation"] = receipt.observations_erased
    return counts


def story(acme, conninfo):
    """u-42's turns, a memory corrected by them, one derived from it, a fact, an alias, a named peer and
    session; u-43's turns, memory and a correction of it that a turn of u-42 justified."""
    acme.add_peer("zqpeer", "human", metadata={"email": "zqmail@example.org"}, data_subject_id="u-42")
    acme.create_session("zqroom", metadata={"topic": "zqtopic"}, data_subject_id="u-42")
    o1 = said(acme, "I am zqpeer and I live in zqlisbon", "u-42")
    o2 = said(acme, "I moved to zqporto last spring", "u-42")
    o3 = said(acme, "Ben here, I like chess", "u-43", actor="ben")
    o4 = said(acme, "Ben told me he prefers go now", "u-42")
    m1 = acme.remember("zqpeer lives in zqlisbon", evidence=[o1], purposes=["converse"], about=["zqpeer"]).memory_id
    acme.correct(m1, "zqpeer lives in zqporto", revision=1, evidence=[o2])
    m2 = acme.remember("Ben likes chess", evidence=[o3], purposes=["converse"], about=["Ben"]).memory_id
    derived = acme.derive([m1, m2], "zqpeer and Ben both enjoy a quiet game")
    acme.correct(m2, "Ben likes go", revision=1, evidence=[o4])
    acme.assert_fact("zqpeer", "lives_in", "zqporto", evidence=[{"offset": o2, "quote": "I moved to zqporto"}])
    acme.add_entity_alias("Ben", "zqbenny", data_subject_id="u-42")
    Worker("acme", conninfo=conninfo.dsn(user="pgrecall_acme_worker")).drain()
    return {"m1": m1, "m2": m2, "derived": derived, "o3": o3}


def test_export_then_erase_then_export_is_empty_and_the_rows_match(acme, acme_admin, conninfo):
    ids = story(acme, conninfo)
    rows = acme_admin.export({"data_subject": "u-42"})
    kinds = exported_counts(rows)
    text = json.dumps([r.record for r in rows])
    # every word of the subject's, from the log to the names
    for token in ("zqlisbon", "zqporto", "zqmail", "zqtopic", "zqbenny", "quiet game", "prefers go"):
        assert token in text, token
    assert kinds["observation"] == 3
    assert {r.record["body"] for r in rows if r.kind == "memory"} == {"zqpeer lives in zqporto",
                                                                      "zqpeer and Ben both enjoy a quiet game"}
    # the revision: the text before the correction
    assert "zqpeer lives in zqlisbon" in {r.record["body"] for r in rows if r.kind == "memory_revision"}
    # u-43's memory stays, back at its text from before u-42's turn justified a correction
    reverted = [r.record for r in rows if r.kind == "memory_reverted"]
    assert [(m["id"], m["body"]) for m in reverted] == [(ids["m2"], "Ben likes go")]
    assert kinds["fact"] == 1 and kinds["fact_evidence"] == 1 and kinds["entity_alias"] == 1
    assert kinds["peer"] == 1 and kinds["session"] == 1 and kinds["passage"] >= 3
    # u-43's turn is not the subject's
    assert all(r.record["data_subject_id"] == "u-42" for r in rows if r.kind == "observation")
    assert not any(r.record.get("observation_id") == ids["o3"] for r in rows if r.kind == "passage")

    receipt = acme_admin.erase({"data_subject": "u-42"}, reason="request #42", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt.residual
    assert kinds == erased_counts(receipt)
    assert acme_admin.export({"data_subject": "u-42"}) == []
    assert acme.read(ids["m2"], purpose="converse").body == "Ben likes chess"


def test_exporting_a_peer_covers_what_erasing_the_peer_removes(acme, acme_admin, conninfo):
    story(acme, conninfo)
    off = acme.append("zqpeer's own words, under no subject", role="user", actor="zqpeer")
    acme.remember("zqpeer has words of their own", evidence=[off], purposes=["converse"])
    acme.remember("a note only zqpeer may see", evidence=[off], purposes=["converse"], audience="zqpeer")
    rows = acme_admin.export({"peer": "zqpeer"})
    assert exported_counts(rows)["observation"] == 1
    assert {"zqpeer has words of their own", "a note only zqpeer may see"} <= {
        r.record["body"] for r in rows if r.kind == "memory"}
    # the peer itself: its name and metadata go (the row stays, renamed)
    assert [r.record["name"] for r in rows if r.kind == "peer"] == ["zqpeer"]

    receipt = acme_admin.erase({"peer": "zqpeer"}, reason="request", actor="dpo")
    assert set(receipt.residual.values()) == {0}, receipt.residual
    assert exported_counts(rows) == erased_counts(receipt)
    with pytest.raises(errors.UnknownPeer):
        acme_admin.export({"peer": "zqpeer"})  # the peer is an erased peer now, under another name


def test_the_export_format_reads_without_the_tenant(acme, acme_admin, conninfo):
    story(acme, conninfo)
    rows = acme_admin.export({"data_subject": "u-42"})
    turn = next(r.record for r in rows if r.kind == "observation")
    assert turn["names"] == {"actor_id": "ana"} and turn["scope"] == "default" and turn["log_offset"] >= 1
    memory = next(r.record for r in rows if r.kind == "memory" and r.record["body"] == "zqpeer lives in zqporto")
    # its evidence: the turn it was remembered from and the one its correction cited
    assert memory["about"] == ["zqpeer"] and len(memory["evidence"]) == 2 and memory["names"]["created_by"] == "bot"
    assert memory["revision"] == 2
    evidence = next(r.record for r in rows if r.kind == "fact_evidence")
    assert evidence["quote"] == "I moved to zqporto" and evidence["observations"]["observation_id"]["scope"] == "default"
    # vectors and search columns are indexes of the words, not the words: left out
    for r in rows:
        assert not {"embedding", "text_embedding", "tsv", "text_key"} & set(r.record), r.kind
    assert {r.record["model"] for r in rows if r.kind == "memory_embedding"} == {"all-MiniLM-L6-v2"}


def test_an_unknown_subject_exports_nothing_and_a_bad_selector_is_refused(acme, acme_admin):
    said(acme, "something of u-1's", "u-1")
    assert acme_admin.export({"data_subject": "nobody-by-this-name"}) == []
    with pytest.raises(errors.InvalidSelector):
        acme_admin.export({"data_subject": "u-1", "peer": "ana"})
    with pytest.raises(errors.InvalidSelector):
        acme_admin.export({"expired_before": "2020-01-01"})
    with pytest.raises(errors.InvalidSelector):
        acme_admin.export({"subject": "u-1"})
    with pytest.raises(errors.UnknownPeer):
        acme_admin.export({"peer": "nobody"})


def test_the_app_cannot_export(acme):
    said(acme, "something of u-1's", "u-1")
    with pytest.raises(errors.NotPermitted):
        acme.export({"data_subject": "u-1"})
