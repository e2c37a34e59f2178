"""vecgraph.kb.hooks (the hooks' types and checks) and vecgraph.kb.llm_hooks (the chat-model
hooks) against the stub OpenAI-compatible server of test_llm on 127.0.0.1."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from test_llm import clear_env, serving
from vecgraph.errors import InvalidArgumentError
from vecgraph.kb.hooks import (
    Entity,
    Extraction,
    HookError,
    Relation,
    call_hook,
    check_extraction,
    check_text,
)
from vecgraph.kb.llm_hooks import LLMContextualizer, LLMExtractor, LLMMap, LLMSummarizer
from vecgraph.llm import OpenAIChat, RemoteError

DOC = SimpleNamespace(title="Install guide", text="# Setup\nRun the installer.\n# Use\nCall vg.Graph(dim=4).")
FIRST = SimpleNamespace(text="Run the installer.", heading_path=("Setup",))
SECOND = SimpleNamespace(text="Call vg.Graph(dim=4).", heading_path=("Use", "Python"))
DOC_PART = (
    "<document>\nTitle: Install guide\n\n# Setup\nRun the installer.\n# Use\nCall vg.Graph(dim=4).\n"
    "</document>\n"
)
INSTRUCTION = (
    "Please give a short succinct context to situate this chunk within the overall document for the "
    "purposes of improving search retrieval of the chunk. Answer only with the succinct context "
    "and nothing else."
)


@pytest.fixture()
def stub(monkeypatch):
    clear_env(monkeypatch)
    with serving() as state:
        yield state


def chat_of(stub, **options) -> OpenAIChat:
    return OpenAIChat("m", base_url=stub.url, backoff_s=0.0, **options)


def user_prompt(body: dict) -> str:
    return body["messages"][-1]["content"]


GOOD = {
    "entities": [
        {"name": "Ada  Lovelace", "type": "Person", "description": "Wrote the first program."},
        {"name": "Analytical Engine", "type": "software", "description": "Babbage's machine."},
    ],
    "relations": [
        {
            "source": "Ada Lovelace",
            "target": "Analytical Engine",
            "type": "wrote_for",
            "description": "She wrote a program for it.",
            "strength": 9,
        }
    ],
}
GOOD_EXTRACTION = Extraction(
    (
        Entity("Ada Lovelace", "person", "Wrote the first program."),
        Entity("Analytical Engine", "software", "Babbage's machine."),
    ),
    (Relation("Ada Lovelace", "Analytical Engine", "wrote_for", "She wrote a program for it.", 9.0),),
)


# ------------------------------------------------------------------ check_extraction


def test_check_extraction_accepts_the_three_shapes_and_normalises():
    assert check_extraction(GOOD_EXTRACTION, "extractor") == GOOD_EXTRACTION
    assert check_extraction([" Ada ", "Python", "Ada"], "extractor") == Extraction(
        (Entity("Ada"), Entity("Python"))
    )
    value = {
        "entities": [
            Entity(" Ada\n Lovelace ", " person "),
            {"name": "Ada Lovelace", "description": "b"},
            {"name": "Ada Lovelace", "type": "org", "description": "a"},
            "Python",
        ],
        "relations": [
            Relation("Ada Lovelace", "Python", "", " uses ", 2),
            {"source": "Python", "target": " Guido "},
        ],
    }
    assert check_extraction(value, "extractor") == Extraction(
        (Entity("Ada Lovelace", "person", "b a"), Entity("Python"), Entity("Guido")),
        (Relation("Ada Lovelace", "Python", "related_to", "uses", 2.0), Relation("Python", "Guido")),
    )
    assert check_extraction({}, "extractor") == Extraction()
    assert check_extraction(
        {"relations": [{"source": "a", "target": "b", "weight": 0.5}]}, "x"
    ) == Extraction((Entity("a"), Entity("b")), (Relation("a", "b", weight=0.5),))
    assert isinstance(
        check_extraction({"relations": [{"source": "a", "target": "b", "weight": 3}]}, "x")
        .relations[0]
        .weight,
        float,
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (
            None,
            "the extractor hook returned None, expected an Extraction or "
            "{'entities': [...], 'relations': [...]}",
        ),
        (42, "the extractor hook returned int 42, expected an Extraction"),
        ("Ada", "the extractor hook returned str 'Ada', expected an Extraction"),
        ({"entity": []}, "the extractor hook returned a dict with keys ['entity'], expected an Extraction"),
        ({"entities": "Ada"}, "the extractor hook returned 'entities' = str 'Ada', expected a list"),
        (
            {"entities": [{"nmae": "Ada"}]},
            "returned entities[0] with keys ['nmae'], expected only ['name', 'type'",
        ),
        ({"entities": [{"type": "person"}]}, "returned entities[0] without a 'name'"),
        (["Ada", "  "], "returned entities[1] = '  ', expected a non-empty name"),
        ([3], "returned entities[0] = int 3, expected an Entity, a dict"),
        ([{"name": "Ada", "type": None}], "returned entities[0].type = None, expected a str"),
        ([Entity(None)], "returned entities[0].name = None, expected a str"),
        ({"relations": [{"source": "a"}]}, "returned relations[0] without ['target']"),
        (
            {"relations": [("a", "b")]},
            "returned relations[0] = tuple ('a', 'b'), expected a Relation or a dict",
        ),
        ({"relations": [{"source": "a", "target": " a "}]}, "returned relations[0] from 'a' to itself"),
        (
            {"relations": [{"source": "a", "target": "b", "weight": 0}]},
            "returned relations[0].weight = int 0, expected a finite number > 0",
        ),
        (
            {"relations": [{"source": "a", "target": "b", "weight": math.nan}]},
            "relations[0].weight = float nan",
        ),
        ({"relations": [{"source": "a", "target": "b", "weight": True}]}, "relations[0].weight = bool True"),
        ({"relations": [{"source": "a", "target": "b", "weight": "3"}]}, "relations[0].weight = str '3'"),
    ],
)
def test_check_extraction_refuses_other_shapes_naming_the_hook(value, words):
    with pytest.raises(HookError) as e:
        check_extraction(value, "extractor")
    assert words in str(e.value) and "the extractor hook returned" in str(e.value)
    assert isinstance(e.value, InvalidArgumentError)


def test_check_text():
    assert check_text("ctx", "contextualizer", "a str") == "ctx"
    with pytest.raises(HookError) as e:
        check_text(3, "contextualizer", "a str (the chunk's context)")
    assert str(e.value) == "the contextualizer hook returned int 3, expected a str (the chunk's context)"
    with pytest.raises(InvalidArgumentError, match="the summarizer hook returned None, expected a str"):
        check_text(None, "summarizer", "a str")


# ------------------------------------------------------------------ call_hook


def test_call_hook_returns_the_value_and_wraps_exceptions():
    assert call_hook(lambda a, b: a + b, "adder", 2, 3) == 5

    def explode(text):
        raise ValueError(f"cannot read {text}")

    with pytest.raises(HookError) as e:
        call_hook(explode, "extractor", "chunk 1")
    assert str(e.value) == (
        "the extractor hook (test_call_hook_returns_the_value_and_wraps_exceptions.<locals>."
        "explode) raised ValueError: cannot read chunk 1"
    )
    assert isinstance(e.value.__cause__, ValueError) and str(e.value.__cause__) == "cannot read chunk 1"

    class Callable:
        def __call__(self, *args):
            raise KeyError("k")

    with pytest.raises(HookError, match=r"^the summarizer hook \(.*Callable\) raised KeyError: 'k'$"):
        call_hook(Callable(), "summarizer", "t", ["x"])
    inner = HookError("the chunker hook returned None")

    def reraise():
        raise inner

    with pytest.raises(HookError) as e:
        call_hook(reraise, "outer")
    assert e.value is inner  # not wrapped twice

    class Stop(BaseException):
        pass

    def stop():
        raise Stop()

    with pytest.raises(Stop):
        call_hook(stop, "x")


# ------------------------------------------------------------------ LLMContextualizer


def test_contextualizer_prompt_document_first_and_cache(stub):
    contextualize = LLMContextualizer(chat_of(stub), max_tokens=60)
    stub.script.append(("content", "  From the setup section of the install guide.\n"))
    assert contextualize(DOC, FIRST) == "From the setup section of the install guide."
    first = stub.bodies()[0]
    assert first == {
        "model": "m",
        "temperature": 0.0,
        "max_tokens": 60,
        "messages": [
            {
                "role": "user",
                "content": (
                    DOC_PART + "Here is the chunk we want to situate within the whole document\n<chunk>\n"
                    "Run the installer.\n</chunk>\nIt comes under the headings: Setup\n" + INSTRUCTION
                ),
            }
        ],
    }
    assert contextualize(DOC, FIRST) == "From the setup section of the install guide."  # cached
    assert len(stub.requests) == 1 and contextualize.cache_hits == 1
    contextualize(DOC, SECOND)
    second = user_prompt(stub.bodies()[1])
    assert second.startswith(DOC_PART + "Here is the chunk we want to situate within the whole document\n")
    assert "<chunk>\nCall vg.Graph(dim=4).\n</chunk>\nIt comes under the headings: Use > Python\n" in second
    contextualize(SimpleNamespace(title=DOC.title, text=DOC.text + " More."), FIRST)  # another document text
    assert len(stub.requests) == 3
    contextualize(DOC, SimpleNamespace(text=FIRST.text, heading_path=()))  # other headings: another prompt
    assert len(stub.requests) == 4 and "It comes under" not in user_prompt(stub.bodies()[3])
    contextualize(DOC, FIRST), contextualize(DOC, SECOND)
    assert len(stub.requests) == 4 and contextualize.cache_hits == 3


def test_contextualizer_cache_is_lru_bounded(stub):
    contextualize = LLMContextualizer(chat_of(stub), cache_size=1)
    contextualize(DOC, FIRST), contextualize(DOC, SECOND), contextualize(DOC, FIRST)
    assert len(stub.requests) == 3
    contextualize(DOC, FIRST)
    assert len(stub.requests) == 3


def test_contextualizer_cuts_long_documents_and_checks_its_arguments(stub):
    document = SimpleNamespace(title="", text="abcdefghij" * 10)  # 100 characters, 25 tokens as len // 4
    contextualize = LLMContextualizer(chat_of(stub), max_document_tokens=5)
    contextualize(document, SimpleNamespace(text="chunk", heading_path=()))
    assert user_prompt(stub.bodies()[0]).startswith(
        "<document>\nabcdefghijabcdefghij [...]\n</document>\nHere is the chunk"
    )
    assert (
        contextualize.document_part(SimpleNamespace(title="", text="x" * 23))
        == "<document>\n" + "x" * 23 + "\n</document>\n"
    )  # 5 tokens: not cut
    with pytest.raises(TypeError, match="document must have a str .text and .title, got text None"):
        contextualize(SimpleNamespace(title="t"), FIRST)
    with pytest.raises(TypeError, match="chunk must have a str .text"):
        contextualize(DOC, SimpleNamespace(text=b"x", heading_path=()))
    with pytest.raises(TypeError, match="chat must be an OpenAIChat or a callable"):
        LLMContextualizer("gpt")
    with pytest.raises(InvalidArgumentError, match="max_document_tokens must be >= 1, got 0"):
        LLMContextualizer(chat_of(stub), max_document_tokens=0)
    assert len(stub.requests) == 1


def test_hooks_take_any_callable_and_refuse_a_non_str_reply():
    sent = []

    def chat(messages, *, json_schema=None, max_tokens=None):
        sent.append((messages, json_schema, max_tokens))
        return 17

    with pytest.raises(HookError, match="the chat hook returned int 17, expected a str"):
        LLMContextualizer(chat)(DOC, FIRST)
    assert sent[0][1:] == (None, 100)
    with pytest.raises(HookError):
        LLMExtractor(chat)("Ada wrote programs.")
    assert sent[1][1]["title"] == "extraction" and sent[1][2] == 800


# ------------------------------------------------------------------ LLMExtractor


def test_extractor_request_and_a_good_reply(stub):
    extract = LLMExtractor(chat_of(stub), entity_types=("Person", "software", "person"))
    stub.script.append(("content", json.dumps(GOOD)))
    assert extract("Ada Lovelace wrote a program for the Analytical Engine.") == GOOD_EXTRACTION
    body = stub.bodies()[0]
    assert body["max_tokens"] == 800 and [m["role"] for m in body["messages"]] == ["system", "user"]
    prompt = body["messages"][1]["content"]
    assert prompt.startswith("-Goal-\nGiven a text and a list of entity types, identify all entities")
    assert "- type: one of the following types: [person, software]\n" in prompt
    assert prompt.endswith("-Text-\nAda Lovelace wrote a program for the Analytical Engine.")
    schema = body["response_format"]["json_schema"]
    assert schema["name"] == "extraction" and schema["strict"] is True
    assert schema["schema"]["properties"]["entities"]["items"]["properties"]["type"]["enum"] == [
        "person",
        "software",
    ]
    assert schema["schema"]["properties"]["relations"]["items"]["required"] == [
        "source",
        "target",
        "type",
        "description",
        "strength",
    ]
    assert extract.failures == [] and extract.retries == 0


def test_extractor_retries_once_on_bad_json_then_succeeds(stub):
    extract = LLMExtractor(chat_of(stub))
    stub.script += [
        ("content", "Sure! Here are the entities: Ada"),
        ("content", "```json\n" + json.dumps(GOOD) + "\n```"),
    ]
    assert extract("Ada Lovelace wrote a program.") == GOOD_EXTRACTION
    first, second = stub.bodies()
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": "Sure! Here are the entities: Ada"}
    assert second["messages"][3] == {
        "role": "user",
        "content": (
            "That reply cannot be used: the reply is not JSON (Expecting value at character 0): "
            "'Sure! Here are the entities: Ada'. Answer again, with only the JSON object that the "
            "instructions ask for."
        ),
    }
    assert second["response_format"] == first["response_format"]
    assert extract.retries == 1 and extract.failures == []


def test_extractor_twice_bad_returns_none_and_records_the_failure(stub):
    extract = LLMExtractor(chat_of(stub))
    text = (
        "Ada Lovelace wrote the first program for Babbage's Analytical Engine, in notes of 1843 on a memoir."
    )
    bad = {
        "entities": [],
        "relations": [{"source": "A", "target": "B", "type": "x", "description": "", "strength": 11}],
    }
    stub.script += [("content", json.dumps(bad)), ("content", "[1, 2]")]
    assert extract(text) is None
    assert extract.failures == [(text[:80], "the reply is a JSON list, expected an object")]
    assert "relations[0].strength is int 11, expected a number from 1 to 10" in user_prompt(stub.bodies()[1])
    stub.script += [("content", '{"entities": [{"name": ""}], "relations": []}')] * 2
    assert extract("short") is None and len(stub.requests) == 4
    assert extract.failures[1] == ("short", "entities[0].name = '', expected a non-empty name")
    assert extract.retries == 2


def test_extractor_relation_ends_unknown_become_entities_and_self_relations_are_dropped(stub):
    reply = {
        "entities": [{"name": "Ada", "type": "person", "description": "a"}],
        "relations": [
            {"source": "Ada", "target": "Python ", "type": "", "description": "uses", "strength": 3},
            {"source": "Ada", "target": " Ada", "type": "is", "description": "", "strength": 5},
        ],
    }
    stub.script.append(("content", json.dumps(reply)))
    assert LLMExtractor(chat_of(stub))("Ada uses Python.") == Extraction(
        (Entity("Ada", "person", "a"), Entity("Python")),
        (Relation("Ada", "Python", "related_to", "uses", 3.0),),
    )


def test_extractor_blank_text_sends_nothing_and_remote_errors_propagate(stub):
    extract = LLMExtractor(chat_of(stub, max_retries=1))
    assert extract("  \n") == Extraction() and stub.requests == []
    stub.script += [("status", 503, {}, b'{"error": {"message": "down"}}')] * 2
    with pytest.raises(RemoteError, match="gave up after 2 attempts"):
        extract("Ada wrote programs.")
    assert extract.failures == [] and len(stub.requests) == 2
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        extract(b"Ada")
    with pytest.raises(TypeError, match="entity_types must be a sequence of non-empty str"):
        LLMExtractor(chat_of(stub), entity_types="person")
    with pytest.raises(InvalidArgumentError, match="entity_types must name at least one type"):
        LLMExtractor(chat_of(stub), entity_types=())


# ------------------------------------------------------------------ LLMSummarizer


def test_summarizer_prompt_and_budget(stub):
    summarize = LLMSummarizer(chat_of(stub), max_tokens=40)
    stub.script.append(("content", " Ada wrote programs. \n"))
    assert summarize("Community 3: Ada, Babbage", ["Ada wrote.", "Babbage built."]) == "Ada wrote programs."
    body = stub.bodies()[0]
    assert body["max_tokens"] == 40 and body["messages"][0]["role"] == "system"
    assert body["messages"][1]["content"] == (
        "Write a summary of the following texts that covers the main entities, facts and themes, in at most "
        "30 words. Answer only with the summary.\n\nTitle: Community 3: Ada, Babbage\n\n"
        "<text>\nAda wrote.\n</text>\n<text>\nBabbage built.\n</text>"
    )
    small = LLMSummarizer(chat_of(stub), max_input_tokens=5)  # 20 characters
    small("t", ["a" * 30, "b", "c"])
    assert user_prompt(stub.bodies()[1]).endswith(
        "<text>\n" + "a" * 20 + "\n</text>\n(2 more texts left out for length)"
    )
    small("t", ["a" * 12, "b" * 8, "c"])
    assert user_prompt(stub.bodies()[2]).endswith(
        "</text>\n<text>\nbbbbbbbb\n</text>\n(1 more texts left out for length)"
    )
    with pytest.raises(InvalidArgumentError, match="texts must hold at least one text to summarise"):
        summarize("t", [])
    with pytest.raises(TypeError, match="texts must be a list of str"):
        summarize("t", "abc")
    assert len(stub.requests) == 3


# ------------------------------------------------------------------ LLMMap


def test_map_parses_answer_and_score(stub):
    mapper = LLMMap(chat_of(stub))
    stub.script.append(("content", '{"answer": " Ada wrote the first program. ", "score": 85}'))
    assert mapper("Who wrote the first program?", "Ada Lovelace ...") == (
        "Ada wrote the first program.",
        85.0,
    )
    body = stub.bodies()[0]
    assert body["response_format"]["json_schema"]["name"] == "map_answer" and body["max_tokens"] == 300
    assert body["messages"][1]["content"].startswith(
        "-Question-\nWho wrote the first program?\n\n-Summary-\nAda Lovelace ...\n\nUsing only the summary"
    )
    assert mapper("q", "  ") == ("", 0.0) and len(stub.requests) == 1  # a blank summary: no request


def test_map_retries_once_then_gives_up_with_empty_zero(stub):
    mapper = LLMMap(chat_of(stub))
    stub.script += [
        ("content", '{"answer": "x", "score": 140}'),
        ("content", '{"answer": "x", "score": 40.5}'),
    ]
    assert mapper("q", "summary one") == ("x", 40.5)
    assert "'score' is int 140, expected a number from 0 to 100" in user_prompt(stub.bodies()[1])
    stub.script += [("content", '{"answer": 3, "score": 10}'), ("content", '{"score": 10}')]
    assert mapper("q", "summary two") == ("", 0.0)
    assert mapper.failures == [("summary two", "'answer' is None, expected a str")] and mapper.retries == 2
    assert len(stub.requests) == 4
