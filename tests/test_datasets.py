"""vecgraph.datasets.wordnet: the committed WordNet 3.0 graph and query files (counts, edge
endpoints, no usage example in node text, relevance judgments that follow the edges, a
deterministic split), the gloss and data-line parsers on tricky input, and the committed files
against a fresh extraction (or, without the WordNet database, against their checksums)."""

from __future__ import annotations

import doctest
import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from vecgraph.datasets import wordnet
from vecgraph.datasets.wordnet import Gloss, parse_data_line, parse_gloss

WORDNET_DIR = Path("/usr/share/wordnet")

# WordNet 3.0, counted from its data files (wnstats(7WN) gives the synsets by part of speech).
SYNSETS_BY_LABEL = {"noun": 82_115, "verb": 13_767, "adj": 18_156, "adv": 3_621}
POINTERS = 377_592
EDGES = 364_552
SENSE_QUERIES = 48_344
RELATION_QUERIES = 31_577

INVERSE = {
    "hypernym": "hyponym",
    "instance_hypernym": "instance_hyponym",
    "member_holonym": "member_meronym",
    "part_holonym": "part_meronym",
    "substance_holonym": "substance_meronym",
    "domain_topic": "member_topic",
    "domain_region": "member_region",
    "domain_usage": "member_usage",
}


@pytest.fixture(scope="module")
def tables():
    return wordnet.load(split=None)


@pytest.fixture(scope="module")
def nodes(tables):
    t = tables["nodes"]
    return {name: t.column(name).to_pylist() for name in t.column_names}


@pytest.fixture(scope="module")
def edges(tables):
    t = tables["edges"]
    return list(zip(*(t.column(name).to_pylist() for name in ("src", "dst", "rel"))))


@pytest.fixture(scope="module")
def queries(tables):
    return tables["queries"].to_pylist()


# ====================================================================== counts and shape


def test_counts_are_those_of_wordnet_3_0(tables, nodes):
    assert tables["nodes"].num_rows == sum(SYNSETS_BY_LABEL.values()) == 117_659
    labels = {}
    for label in nodes["label"]:
        labels[label] = labels.get(label, 0) + 1
    assert labels == SYNSETS_BY_LABEL
    assert tables["edges"].num_rows == EDGES
    kinds = tables["queries"].column("kind").to_pylist()
    assert kinds.count("sense") == SENSE_QUERIES
    assert kinds.count("relation") == RELATION_QUERIES

    manifest = json.loads(wordnet.paths()["manifest"].read_text())
    counts = manifest["counts"]
    assert counts["pointers"] == POINTERS
    assert counts["nodes"] == tables["nodes"].num_rows
    assert counts["edges"] == tables["edges"].num_rows
    assert counts["queries"] == tables["queries"].num_rows
    assert sum(counts["edges_by_rel"].values()) == EDGES


def test_schema(tables):
    assert tables["nodes"].column_names == ["key", "label", "text", "props"]
    assert tables["edges"].column_names == ["src", "dst", "rel", "weight"]
    assert tables["queries"].column_names == ["qid", "kind", "relation", "text", "relevant", "synset", "split"]
    for name in wordnet.TABLES:
        metadata = pq.ParquetFile(wordnet.paths()[name]).metadata
        codecs = {metadata.row_group(g).column(c).compression
                  for g in range(metadata.num_row_groups) for c in range(metadata.num_columns)}
        assert codecs == {"ZSTD"}, name


def test_nodes(nodes):
    assert len(set(nodes["key"])) == len(nodes["key"])
    labels = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
    for key, label, text, props in zip(nodes["key"], nodes["label"], nodes["text"], nodes["props"]):
        match = re.fullmatch(r"wn:([nvar]):(\d{8})", key)
        assert match and labels[match.group(1)] == label, key
        p = json.loads(props)
        assert set(p) == {"lexname", "lemmas"}
        assert p["lexname"] in wordnet.LEXNAMES
        assert p["lemmas"] and all(lemma and "_" not in lemma for lemma in p["lemmas"]), key
        head = ", ".join(p["lemmas"]) + ": "
        assert text.startswith(head) and len(text) > len(head), key


def test_every_edge_endpoint_is_a_node_and_edges_are_unique(tables, nodes, edges):
    keys = set(nodes["key"])
    assert all(src in keys and dst in keys for src, dst, _ in edges)
    assert len(set(edges)) == len(edges)
    assert {rel for _, _, rel in edges} == set(wordnet.POINTER_NAMES.values())
    weights = tables["edges"].column("weight")
    assert weights.null_count == 0 and set(weights.to_pylist()) == {1.0}


def test_inverse_pointers_pair_up(edges):
    by_rel: dict = {}
    for src, dst, rel in edges:
        by_rel.setdefault(rel, set()).add((src, dst))
    for rel, inverse in INVERSE.items():
        assert by_rel[rel] == {(dst, src) for src, dst in by_rel[inverse]}, rel
    for symmetric in ("antonym", "verb_group", "similar_to"):
        assert by_rel[symmetric] == {(dst, src) for src, dst in by_rel[symmetric]}, symmetric
    # WordNet 3.0 gives 29 of its derivation pointers no reverse pointer.
    derivation = by_rel["derivation"]
    assert len(derivation - {(dst, src) for src, dst in derivation}) == 29


# ====================================================================== queries


# Usage examples that WordNet also writes, unquoted, as a lemma or in the definition of their
# own synset ('legal_code ... | a code of laws adopted by a state or nation; "a code of laws"').
EXAMPLES_ALSO_IN_DEFINITION_OR_LEMMAS = {
    "wn:n:06667792:ex0", "wn:n:15021189:ex0", "wn:a:00413861:ex1", "wn:a:01041916:ex1", "wn:a:01209210:ex0",
    "wn:a:01893304:ex0", "wn:a:01909078:ex0", "wn:a:02884457:ex0", "wn:r:00022401:ex5",
}


def test_usage_examples_are_not_in_node_text(nodes, queries):
    text_of = dict(zip(nodes["key"], nodes["text"]))
    sense = [q for q in queries if q["kind"] == "sense"]
    found = set()
    for q in sense:
        for key in q["relevant"]:
            if q["text"] in text_of[key]:
                found.add(q["qid"])
                assert f'"{q["text"]}"' not in text_of[key], q["qid"]
    assert found == EXAMPLES_ALSO_IN_DEFINITION_OR_LEMMAS
    # No node text quotes any usage example, and no definition keeps a segment that opens a quote.
    examples = {q["text"] for q in sense}
    for key, text in text_of.items():
        assert not any(quoted.strip() in examples for quoted in re.findall(r'"([^"]*)"', text)), key
        assert '; "' not in text and not text.split(": ", 1)[1].startswith('"'), key


def test_queries_shape(nodes, queries):
    keys = set(nodes["key"])
    qids = [q["qid"] for q in queries]
    assert len(set(qids)) == len(qids)
    example_text = {q["qid"]: q["text"] for q in queries if q["kind"] == "sense"}
    for q in queries:
        assert q["relevant"] and all(key in keys for key in q["relevant"]), q["qid"]
        assert len(set(q["relevant"])) == len(q["relevant"]), q["qid"]
        assert q["synset"] in keys and q["split"] in ("dev", "heldout")
        assert q["text"] and q["text"] == q["text"].strip()
        if q["kind"] == "sense":
            assert q["relation"] is None and re.fullmatch(r"wn:[nvar]:\d{8}:ex\d+", q["qid"])
            assert q["relevant"][0] == q["synset"]
        else:
            assert q["kind"] == "relation" and q["relation"] in wordnet.RELATION_TEMPLATES
            example_qid, relation = q["qid"].rsplit(":", 1)
            assert relation == q["relation"] and example_qid in example_text
            prefix, suffix = wordnet.RELATION_TEMPLATES[relation].split("{lemma}")
            before, after = suffix.split("{example}")
            example = example_text[example_qid]
            assert q["text"].startswith(prefix), q["qid"]
            assert (before + example + after) in q["text"], q["qid"]


def test_relation_queries_follow_their_pointer(nodes, edges, queries):
    targets: dict = {}
    for src, dst, rel in edges:
        targets.setdefault((src, rel), set()).add(dst)
    lemmas = {key: json.loads(p)["lemmas"] for key, p in zip(nodes["key"], nodes["props"])}
    counts: dict = {}
    for q in queries:
        if q["kind"] != "relation":
            continue
        counts[q["relation"]] = counts.get(q["relation"], 0) + 1
        # Every relevant key is related by that pointer, and every related synset is relevant.
        assert set(q["relevant"]) == targets[(q["synset"], q["relation"])], q["qid"]
        prefix = wordnet.RELATION_TEMPLATES[q["relation"]].split("{lemma}")[0]
        lemma = q["text"][len(prefix):]
        assert any(lemma.startswith(word + " ") for word in lemmas[q["synset"]]), q["qid"]
    assert set(counts) == set(wordnet.RELATION_TEMPLATES)
    # Every usage example whose synset has one of those pointers makes that relation query.
    made = {(q["synset"], q["qid"].rsplit(":", 1)[0], q["relation"]) for q in queries if q["kind"] == "relation"}
    for q in queries:
        if q["kind"] == "sense":
            for relation in wordnet.RELATION_TEMPLATES:
                assert ((q["synset"], relation) in targets) == ((q["synset"], q["qid"], relation) in made)


def test_sense_queries_shared_by_two_synsets_judge_both(queries):
    owners: dict = {}
    for q in queries:
        if q["kind"] == "sense":
            owners.setdefault(q["text"], set()).add(q["synset"])
    shared = 0
    for q in queries:
        if q["kind"] == "sense":
            assert set(q["relevant"]) == owners[q["text"]]
            shared += len(q["relevant"]) > 1
    assert 0 < shared < 500


def test_split_is_deterministic(tables, queries):
    qids = [q["qid"] for q in queries]
    kinds = [q["kind"] for q in queries]
    committed = [q["split"] for q in queries]
    assert wordnet.split_of(qids, kinds) == committed
    order = list(range(len(qids)))
    random.Random(7).shuffle(order)
    shuffled = wordnet.split_of([qids[i] for i in order], [kinds[i] for i in order])
    assert dict(zip((qids[i] for i in order), shuffled)) == dict(zip(qids, committed))

    held = [q for q in queries if q["split"] == "heldout"]
    sense = sum(q["kind"] == "sense" for q in held)
    relation = sum(q["kind"] == "relation" for q in held)
    assert sense == wordnet.HELDOUT_SENSE and 1_000 <= relation <= wordnet.HELDOUT_RELATION
    assert {q["relation"] for q in held if q["kind"] == "relation"} == set(wordnet.RELATION_TEMPLATES)
    # One usage example, one split.
    split_of_example: dict = {}
    for q in queries:
        example = re.match(r"wn:[nvar]:\d{8}:ex\d+", q["qid"]).group(0)
        assert split_of_example.setdefault(example, q["split"]) == q["split"], q["qid"]
    # The same qids on every load.
    heldout = wordnet.load("heldout")["queries"]
    assert heldout.column("qid").to_pylist() == [q["qid"] for q in held]
    assert wordnet.load("dev")["queries"].num_rows == len(queries) - len(held)


def test_load_and_paths():
    with pytest.raises(ValueError, match="split"):
        wordnet.load("test")
    files = wordnet.paths()
    assert all(path.is_file() for path in files.values())
    assert files["licence"].read_text().startswith("This software and database is being provided to you")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in files["licence"].read_text()
    with pytest.raises(FileNotFoundError, match="python -m vecgraph.datasets.wordnet"):
        wordnet.load(root=Path(__file__).parent / "no-such-folder")


def test_docstrings():
    result = doctest.testmod(wordnet)
    assert result.attempted > 0 and result.failed == 0


# ====================================================================== parsers


@pytest.mark.parametrize("gloss, definition, examples", [
    ("a definition with no examples", "a definition with no examples", ()),
    ("two parts; of a definition", "two parts; of a definition", ()),
    ('make a sizzling sound; "the fat sizzled in the pan"', "make a sizzling sound", ("the fat sizzled in the pan",)),
    ('several; "one"; "two"; "three"', "several", ("one", "two", "three")),
    # A semicolon inside an example.
    ('a pause; "I paused; then I went on"; "a short pause"', "a pause",
     ("I paused; then I went on", "a short pause")),
    ('x; "a; b; c"', "x", ("a; b; c",)),
    # An attribution after the closing quote belongs to neither.
    ('mercy; "the quality of mercy is not strained"--Shakespeare; "show mercy"', "mercy",
     ("the quality of mercy is not strained", "show mercy")),
    # A closing quote missing before the next example.
    ('in the habit of; "long-toed; "five-toed"', "in the habit of", ("long-toed", "five-toed")),
    # A closing quote missing at the end.
    ('a notice; "you did not give enough notice"; "a notice of sale', "a notice",
     ("you did not give enough notice", "a notice of sale")),
    # An opening quote missing.
    ('utter; "drop a hint"; drop names"', "utter", ("drop a hint", "drop names")),
    ('focus once again; The physicist refocused the light beam"', "focus once again",
     ("The physicist refocused the light beam",)),
    # Two examples in one segment.
    ('a projection; "the head of the nail", "a pinhead is the head of a pin"', "a projection",
     ("the head of the nail", "a pinhead is the head of a pin")),
    ('exposure; "exposure to the weather" or "they died from exposure";', "exposure",
     ("exposure to the weather", "they died from exposure")),
    ('taut; "the neck muscles tensed;" "the rope strained"', "taut", ("the neck muscles tensed", "the rope strained")),
    # An example attached to the definition.
    ('a change of units: "conversion from Fahrenheit to Centigrade"', "a change of units",
     ("conversion from Fahrenheit to Centigrade",)),
    ('restrict or confine, "I limit you to two visits"', "restrict or confine", ("I limit you to two visits",)),
    ('reach a goal, e.g., "make the first team"; "We made it!"', "reach a goal", ("make the first team", "We made it!")),
    ('(of persons) "his father was a hard-to-please taskmaster"', "(of persons)",
     ("his father was a hard-to-please taskmaster",)),
    # Quoted words that belong to the definition.
    ('a workplace; as in the expression "on the job";', 'a workplace; as in the expression "on the job"', ()),
    ('promise of reward as in "carrot and stick"; "used the carrot"', 'promise of reward as in "carrot and stick"',
     ("used the carrot",)),
    ('progress (especially in the phrase "make strides"); "big strides"',
     'progress (especially in the phrase "make strides")', ("big strides",)),
    ("(usually followed by `to') having the means; \"able to swim\"", "(usually followed by `to') having the means",
     ("able to swim",)),
    # A repeated example is kept once.
    ('twice; "same"; "same"', "twice", ("same",)),
])
def test_parse_gloss(gloss, definition, examples):
    assert parse_gloss(gloss) == Gloss(definition, examples)


def test_parse_data_line():
    verb = ("01148979 33 v 01 side 0 002 @ 00733650 v 0000 ~ 01148728 v 0000 01 + 22 00 | take sides for or "
            'against; "Who are you siding with?"')
    s = parse_data_line(verb, "v")
    assert (s.key, s.ss_type, s.lex_filenum, s.words) == ("wn:v:01148979", "v", 33, ("side",))
    assert s.pointers == (("@", "wn:v:00733650", 0, 0), ("~", "wn:v:01148728", 0, 0))
    assert parse_gloss(s.gloss) == Gloss("take sides for or against", ("Who are you siding with?",))

    satellite = ("00024619 00 s 02 used_to(p) 0 wont_to(p) 0 002 & 00024417 a 0000 + 04881998 n 0a01 | in the "
                 'habit; "I am used to hitchhiking"')
    s = parse_data_line(satellite, "a")
    assert (s.key, s.ss_type, s.words, s.lemmas) == ("wn:a:00024619", "s", ("used_to", "wont_to"),
                                                     ["used to", "wont to"])
    assert s.pointers[1] == ("+", "wn:n:04881998", 10, 1)

    with pytest.raises(ValueError, match="unknown pointer symbol"):
        parse_data_line("00001740 03 n 01 entity 0 001 ?? 00001930 n 0000 | x", "n")
    with pytest.raises(ValueError, match="gloss"):
        parse_data_line("00001740 03 n 01 entity 0 000", "n")
    with pytest.raises(ValueError, match="malformed synset line"):
        parse_data_line("00001740 03 n 02 entity 0 001 @ 00001930 n 0000 | x", "n")  # one word short


def test_lemma_of_a_relation_query():
    def synset(pos, *words):
        return wordnet.Synset(f"wn:{pos}:00000000", pos, pos, 0, words, (), "")

    irregular = {("v", "give"): ["gave", "given"], ("v", "run"): ["ran"]}
    assert wordnet._lemma_in("the fat sizzled in the pan", synset("v", "sizzle"), irregular) == "sizzle"
    assert wordnet._lemma_in("stop the car", synset("v", "halt", "stop"), irregular) == "stop"
    assert wordnet._lemma_in("she stopped the car", synset("v", "halt", "stop"), irregular) == "stop"
    assert wordnet._lemma_in("he carried the bag", synset("v", "transport", "carry"), irregular) == "carry"
    assert wordnet._lemma_in("they gave up at last", synset("v", "quit", "give_up"), irregular) == "give up"
    assert wordnet._lemma_in("itch mites cause scabies", synset("n", "itch_mite"), irregular) == "itch mite"
    assert wordnet._lemma_in("he ran home", synset("v", "hurry", "run"), irregular) == "run"
    assert wordnet._lemma_in("nothing here", synset("v", "hurry", "run"), irregular) == "hurry"


# ====================================================================== the committed files


def test_committed_files_match_a_fresh_extraction_or_their_checksums(tmp_path):
    manifest = wordnet.verify()  # the sha256 of every committed file, as written by extract()
    committed = wordnet.paths()
    if not (WORDNET_DIR / "data.noun").is_file():
        # No WordNet database here: the checksums above are the check; the counts must agree too.
        for name in wordnet.TABLES:
            assert pq.ParquetFile(committed[name]).metadata.num_rows == manifest["counts"][name]
        return
    sources = manifest["source"]["sha256"]
    for name, digest in sources.items():
        assert wordnet._sha256(WORDNET_DIR / name) == digest, f"{WORDNET_DIR / name} is not the WordNet the files came from"
    counts = wordnet.extract(WORDNET_DIR, tmp_path / "wordnet", compression_level=1)
    fresh = wordnet.paths(tmp_path / "wordnet")
    assert counts == manifest["counts"]
    for name in wordnet.TABLES:
        assert pq.read_table(fresh[name]).equals(pq.read_table(committed[name])), name
    for name in ("licence", "readme"):
        assert fresh[name].read_text() == committed[name].read_text(), name
    assert json.loads(fresh["manifest"].read_text())["source"] == manifest["source"]
