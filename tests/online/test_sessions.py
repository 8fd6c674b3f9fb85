"""Session tagging by headers and body, inference from the conversation prefix, next-state pairing."""

from __future__ import annotations

import logging

from ratchet.online.sessions import SESSION_ENDED, SessionTracker, conversation_key, render_next_state

U1 = {"role": "user", "content": "write a sort function"}
A1 = {"role": "assistant", "content": "def sort(x): return sorted(x)"}
U2 = {"role": "user", "content": "no, I meant in place"}


def test_headers_tag_session_type_and_done():
    t = SessionTracker()
    tag = t.tag({"X-Session-Id": "abc", "X-Turn-Type": "side", "X-Session-Done": "true"}, {}, [U1])
    assert (tag.session_id, tag.inferred, tag.turn_type, tag.done) == ("abc", False, "side", True)


def test_body_fields_are_stripped_and_used():
    body = {"model": "m", "messages": [U1], "session_id": "b1", "turn_type": "main", "session_done": False,
            "x_extra": 1}
    clean, tags = SessionTracker.split_body(body)
    assert clean == {"model": "m", "messages": [U1]}
    tag = SessionTracker().tag({}, tags, [U1])
    assert tag.session_id == "b1" and not tag.inferred and not tag.done


def test_headers_win_over_body_and_bad_turn_type_falls_back():
    tag = SessionTracker().tag({"x-session-id": "h", "x-turn-type": "weird"}, {"session_id": "b"}, [U1])
    assert tag.session_id == "h" and tag.turn_type == "main"


def test_inference_matches_previous_prompt_plus_reply(caplog):
    t = SessionTracker()
    with caplog.at_level(logging.INFO, logger="ratchet.online.sessions"):
        first = t.tag({}, {}, [U1])
        t.served(first, "turn-1", [U1], A1["content"])
        second = t.tag({}, {}, [U1, A1, U2])
        t.served(second, "turn-2", [U1, A1, U2], "def sort(x): x.sort()")
        third = t.tag({}, {}, [U1, A1, U2, {"role": "assistant", "content": "def sort(x): x.sort()"},
                               {"role": "user", "content": "thanks"}])
    assert first.inferred and first.session_id.startswith("auto-")
    assert second.session_id == first.session_id == third.session_id
    # announced once per session, not once per turn
    assert sum("session inferred" in r.getMessage() for r in caplog.records) == 1
    assert second.pair_with == ("turn-1", U2["content"])
    assert third.pair_with == ("turn-2", "thanks")


def test_unrelated_conversation_gets_a_new_session():
    t = SessionTracker()
    a = t.tag({}, {}, [U1])
    t.served(a, "t1", [U1], A1["content"])
    b = t.tag({}, {}, [U1, {"role": "assistant", "content": "something else"}, U2])
    assert b.session_id != a.session_id


def test_inference_tolerates_whitespace_reserialization():
    t = SessionTracker()
    a = t.tag({}, {}, [U1])
    t.served(a, "t1", [U1], A1["content"] + "\n")
    b = t.tag({}, {}, [U1, A1, U2])
    assert b.session_id == a.session_id


def test_inference_off_records_side_turns_of_unknown():
    tag = SessionTracker(infer=False).tag({}, {}, [U1])
    assert (tag.session_id, tag.turn_type) == ("unknown", "side")


def test_side_turns_neither_pair_nor_get_paired():
    t = SessionTracker()
    main = t.tag({"X-Session-Id": "s"}, {}, [U1])
    t.served(main, "m1", [U1], A1["content"])
    side = t.tag({"X-Session-Id": "s", "X-Turn-Type": "side"}, {}, [{"role": "user", "content": "heartbeat"}])
    assert side.pair_with is None
    t.served(side, "side1", [{"role": "user", "content": "heartbeat"}], "ok")
    nxt = t.tag({"X-Session-Id": "s"}, {}, [U1, A1, U2])
    assert nxt.pair_with == ("m1", U2["content"])


def test_tool_output_is_the_next_state():
    t = SessionTracker()
    tag = t.tag({"X-Session-Id": "s"}, {}, [U1])
    t.served(tag, "m1", [U1], "call ls")
    tool = {"role": "tool", "content": "Traceback: file not found", "tool_call_id": "c1"}
    nxt = t.tag({"X-Session-Id": "s"}, {}, [U1, {"role": "assistant", "content": "call ls"}, tool])
    # A lone tool output keeps its prefix: without it the judge reads the traceback as a person's words.
    assert nxt.pair_with == ("m1", "tool: Traceback: file not found")


def test_a_lone_tool_message_is_rendered_as_a_tool_output_and_a_lone_user_message_as_its_text():
    assert render_next_state([{"role": "tool", "content": "exit code 0", "tool_call_id": "c1"}]) == "tool: exit code 0"
    assert render_next_state([{"role": "user", "content": "thanks"}]) == "thanks"


def test_several_new_messages_render_with_roles():
    assert render_next_state([{"role": "tool", "content": "ok"}, {"role": "user", "content": "great"}]) == (
        "tool: ok\nuser: great"
    )


def test_done_closes_session_and_last_turn_gets_no_next_state():
    t = SessionTracker()
    a = t.tag({"X-Session-Id": "s"}, {}, [U1])
    assert t.served(a, "m1", [U1], A1["content"]) is None
    b = t.tag({"X-Session-Id": "s", "X-Session-Done": "1"}, {}, [U1, A1, U2])
    assert b.pair_with == ("m1", U2["content"])
    assert t.served(b, "m2", [U1, A1, U2], "fixed") is None  # session had a paired turn already
    assert len(t) == 0


def test_single_turn_session_still_yields_one_judged_turn():
    t = SessionTracker()
    a = t.tag({"X-Session-Id": "s", "X-Session-Done": "true"}, {}, [U1])
    assert t.served(a, "m1", [U1], A1["content"]) == ("m1", SESSION_ENDED)


def test_forget_drops_memory_and_inference_keys():
    t = SessionTracker()
    a = t.tag({}, {}, [U1])
    t.served(a, "t1", [U1], A1["content"])
    assert t.forget(a.session_id)
    b = t.tag({}, {}, [U1, A1, U2])
    assert b.session_id != a.session_id


def test_memory_is_bounded():
    t = SessionTracker(max_sessions=5)
    for i in range(20):
        t.tag({"X-Session-Id": f"s{i}"}, {}, [U1])
    assert len(t) == 5


def test_conversation_key_ignores_extra_fields():
    assert conversation_key([{"role": "user", "content": "x", "name": "bob"}]) == conversation_key(
        [{"role": "user", "content": " x "}]
    )
