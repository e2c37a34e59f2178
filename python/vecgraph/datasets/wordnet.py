"""Princeton WordNet 3.0 as a knowledge graph, with two query sets built from its usage examples.

The committed files (``vecgraph/datasets/wordnet/``, made by :func:`extract` from the WordNet
database files) hold:

- ``nodes.parquet``: one row per synset. ``key`` is ``wn:<pos>:<offset>``, the letter of the
  data file (``n`` noun, ``v`` verb, ``a`` adjective, ``r`` adverb; adjective satellites live in
  ``data.adj`` and take ``a``, as WordNet's own pointers do) and the synset's 8-digit byte offset
  in it. ``label`` is noun / verb / adj / adv. ``text`` is the lemmas (underscores as spaces,
  comma-separated), ``": "`` and the gloss's definition, without its usage examples. ``props``
  is a JSON object: ``{"lexname": "noun.artifact", "lemmas": [...]}``.
- ``edges.parquet``: ``src``, ``dst``, ``rel``, ``weight`` (1.0): every pointer of the data
  files, semantic (synset to synset) and lexical (word to word, here between their synsets),
  named by :data:`POINTER_NAMES`, exact duplicates of ``(src, dst, rel)`` dropped.
- ``queries.parquet``: ``qid``, ``kind``, ``relation``, ``text``, ``relevant``, ``synset``,
  ``split``. A **sense** query is a usage example; its relevant node is the synset it
  illustrates. A **relation** query asks, about a word as used in a usage example, for the
  synsets related to the example's synset by one pointer (see :data:`RELATION_TEMPLATES`).
  ``split`` is ``"heldout"`` for a fixed sample (see :func:`split_of`) and ``"dev"`` otherwise.

>>> from vecgraph.datasets import wordnet
>>> t = wordnet.load("heldout")
>>> t["nodes"].num_rows, set(t["queries"].column("split").to_pylist())
(117659, {'heldout'})

Regenerate the files (the Debian package ``wordnet-base`` installs the database under
``/usr/share/wordnet``): ``python -m vecgraph.datasets.wordnet --wordnet-dir /usr/share/wordnet``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Optional, Union

from .. import storage

__all__ = [
    "POINTER_NAMES",
    "RELATION_TEMPLATES",
    "Gloss",
    "Synset",
    "parse_gloss",
    "parse_data_line",
    "read_synsets",
    "build_tables",
    "split_of",
    "extract",
    "paths",
    "load",
    "verify",
    "main",
]

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
DATA_DIR = Path(__file__).resolve().parent / "wordnet"

_POS_FILES = (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv"))
_LABELS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_EXCEPTION_FILES = {"n": "noun.exc", "v": "verb.exc", "a": "adj.exc", "r": "adv.exc"}

TABLES = ("nodes", "edges", "queries")
LICENSE_FILE = "LICENSE-WordNet.txt"
MANIFEST_FILE = "manifest.json"
README_FILE = "README.md"

#: Pointer symbols of the data files (wninput(5WN)) and the relation names the edges carry.
#: ``\\`` is "pertains to noun" in data.adj and "derived from adjective" in data.adv; both are
#: ``pertainym`` here.
POINTER_NAMES = {
    "!": "antonym",
    "@": "hypernym",
    "@i": "instance_hypernym",
    "~": "hyponym",
    "~i": "instance_hyponym",
    "#m": "member_holonym",
    "#s": "substance_holonym",
    "#p": "part_holonym",
    "%m": "member_meronym",
    "%s": "substance_meronym",
    "%p": "part_meronym",
    "=": "attribute",
    "+": "derivation",
    ";c": "domain_topic",
    ";r": "domain_region",
    ";u": "domain_usage",
    "-c": "member_topic",
    "-r": "member_region",
    "-u": "member_usage",
    "*": "entailment",
    ">": "cause",
    "^": "also_see",
    "$": "verb_group",
    "&": "similar_to",
    "<": "participle",
    "\\": "pertainym",
}

#: The relation queries: relation -> question template. ``{lemma}`` is the first lemma of the
#: example's synset that occurs in the example (as written or inflected), else its first lemma;
#: ``{example}`` is the usage example. The relevant nodes are the synsets that the example's
#: synset points to with that relation.
RELATION_TEMPLATES = {
    "hypernym": "what more general kind of thing is {lemma} in '{example}'?",
    "part_holonym": "what is {lemma} in '{example}' a part of?",
    "member_holonym": "what group is {lemma} in '{example}' a member of?",
    "antonym": "what is the opposite of {lemma} in '{example}'?",
}

#: Held-out sample sizes: at most this many sense and this many relation queries.
HELDOUT_SENSE = 2_000
HELDOUT_RELATION = 2_000

#: Lexicographer file names by number (lexnames(5WN)); a ``lexnames`` file in the WordNet
#: folder, when there is one, takes precedence.
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)

PathLike = Union[str, "os.PathLike[str]"]


# ====================================================================== glosses


@dataclasses.dataclass(frozen=True)
class Gloss:
    """A gloss split into its definition and its usage examples (quotes removed)."""

    definition: str
    examples: tuple


# Between two examples written in one segment: a closing quote, maybe a separator, an opening
# quote ('"the head of the nail", "a pinhead is the head of a pin"', '"x" or "y"', '"x;" "y"').
_BETWEEN_EXAMPLES = re.compile(r'[,;.]?"\s*(?:[,:.;]|\bor\b)?\s*"')

# A quoted example at the end of a definition segment, after a colon, a comma, "e.g.", a
# parenthesis or a word: 'the act of putting one thing in the place of another: "he sent Smith
# in for Jones"', '(of persons) "his father was a hard-to-please taskmaster"'. Not right after
# "in", "phrase" or "expression", where the quoted words belong to the definition ('a workplace;
# as in the expression "on the job"', 'promise of reward as in "carrot and stick"').
_INLINE_EXAMPLE = re.compile(r'^(?P<definition>.*?\S)\s*(?P<separator>[:,]?)\s*"(?P<example>[^"]*\w[^"]*)"?\s*$')
_INLINE_NOT_AFTER = re.compile(r"(?:\bin|\bphrase|\bexpression)$", re.IGNORECASE)
_DANGLING = re.compile(r"[\s,;:]*(?:\b(?:as in\s+)?e\.g\.,?)?[\s,;:]*$", re.IGNORECASE)


def _quoted(segment: str) -> list:
    """The examples of a segment that starts with a quote: split where one example closes and
    the next opens; the last runs to its closing quote (an attribution after it, such as
    '- Shakespeare', is dropped) or, when unclosed, to the end."""
    pieces = _BETWEEN_EXAMPLES.split(segment)
    pieces[0] = pieces[0].removeprefix('"')
    last = pieces[-1]
    end = last.rfind('"')
    pieces[-1] = last[:end] if end >= 0 else last
    return [piece.strip() for piece in pieces]


def parse_gloss(gloss: str) -> Gloss:
    """Split a WordNet gloss, ``definition; "example 1"; "example 2"``, into its parts.

    The gloss is cut at semicolons. A segment that opens a quote it does not close takes the
    following segments up to the one that closes it (a semicolon inside an example), unless a
    segment opening a new quote comes first (a closing quote missing in the data). A segment
    that starts with a quote holds one or more examples. After the definition, a segment ending
    in a quote it never opened is an example missing its opening quote. An example quoted at the
    end of a definition segment (``...: "example"``, ``..., e.g. "example"``) is an example
    too. Every other segment is part of the definition (joined with ``"; "``).

    >>> parse_gloss('make a sizzling sound; "the fat sizzled in the pan"')
    Gloss(definition='make a sizzling sound', examples=('the fat sizzled in the pan',))
    >>> parse_gloss('an ambiguity; "I know not; nor care"; "a second"').examples
    ('I know not; nor care', 'a second')
    """
    definition: list = []
    examples: list = []
    pending: Optional[list] = None  # segments of an example whose closing quote is still missing

    def add_examples(texts: Iterable) -> None:
        for text in texts:
            if text and text not in examples:
                examples.append(text)

    for raw in gloss.split(";"):
        segment = raw.strip()
        if pending is not None:
            if segment and not segment.startswith('"'):
                pending.append(segment)
                joined = "; ".join(pending)
                if joined.count('"') % 2 == 0:
                    add_examples(_quoted(joined))
                    pending = None
                continue
            add_examples(_quoted("; ".join(pending)))  # never closed
            pending = None
        if not segment:
            continue
        if segment.startswith('"'):
            if segment.count('"') % 2:
                pending = [segment]
            else:
                add_examples(_quoted(segment))
        elif (definition or examples) and segment.endswith('"') and segment.count('"') == 1:
            add_examples([segment[:-1].strip()])
        else:
            inline = _INLINE_EXAMPLE.match(segment)
            if (inline and inline.group("definition").count('"') % 2 == 0
                    and (inline.group("separator") or not _INLINE_NOT_AFTER.search(inline.group("definition")))):
                segment = _DANGLING.sub("", inline.group("definition"))
                add_examples([inline.group("example").strip()])
            if segment:
                definition.append(segment)
    if pending is not None:
        add_examples(_quoted("; ".join(pending)))
    return Gloss("; ".join(definition), tuple(examples))


# ====================================================================== data files


@dataclasses.dataclass(frozen=True)
class Synset:
    """One line of a data file.

    Attributes:
        key: ``wn:<pos>:<offset>``.
        pos: the data file's letter (n, v, a, r).
        ss_type: WordNet's synset type (n, v, a, s for an adjective satellite, r).
        lex_filenum: the lexicographer file number.
        words: the words as written, adjective markers such as ``(p)`` removed.
        pointers: ``(symbol, target key, source word number, target word number)``; word
            numbers count from 1, and 0 / 0 marks a pointer between synsets.
        gloss: the raw gloss.
    """

    key: str
    pos: str
    ss_type: str
    lex_filenum: int
    words: tuple
    pointers: tuple
    gloss: str

    @property
    def lemmas(self) -> list:
        return [w.replace("_", " ") for w in self.words]


_ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def _key(pos: str, offset: str) -> str:
    return f"wn:{'a' if pos == 's' else pos}:{offset}"


def parse_data_line(line: str, pos: str) -> Synset:
    """Parse one synset line of ``data.<pos>`` (wndb(5WN))::

        offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] [frames...] | gloss

    Raises ValueError naming the line when it does not follow that layout.
    """
    head, bar, gloss = line.partition(" | ")
    if not bar:
        raise ValueError(f"data.{pos}: no ' | ' before the gloss in line {line[:40]!r}")
    fields = head.split()
    try:
        offset, lex_filenum, ss_type = fields[0], int(fields[1]), fields[2]
        count_words = int(fields[3], 16)
        words = tuple(_ADJ_MARKER.sub("", fields[4 + 2 * i]) for i in range(count_words))
        at = 4 + 2 * count_words
        count_pointers = int(fields[at])
        at += 1
        pointers = []
        for _ in range(count_pointers):
            symbol, target, target_pos, source_target = fields[at:at + 4]
            at += 4
            if symbol not in POINTER_NAMES:
                raise ValueError(f"unknown pointer symbol {symbol!r}")
            if len(target) != 8 or target_pos not in "nvasr" or len(source_target) != 4:
                raise ValueError(f"bad pointer {' '.join(fields[at - 4:at])!r}")
            pointers.append((symbol, _key(target_pos, target), int(source_target[:2], 16),
                             int(source_target[2:], 16)))
        if len(offset) != 8 or not offset.isdigit() or ss_type not in "nvasr":
            raise ValueError("bad offset or synset type")
    except (IndexError, ValueError) as error:
        raise ValueError(f"data.{pos}: malformed synset line {line[:40]!r}: {error}") from None
    return Synset(_key(pos, offset), pos, ss_type, lex_filenum, words, tuple(pointers), gloss.strip())


def _data_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("  "):  # the licence header: two spaces and a line number
                yield line.rstrip("\n")


def read_synsets(wordnet_dir: PathLike = DEFAULT_WORDNET_DIR) -> Iterator[Synset]:
    """Every synset of ``data.noun``, ``data.verb``, ``data.adj`` and ``data.adv``, in file order."""
    folder = Path(wordnet_dir)
    for pos, name in _POS_FILES:
        for line in _data_lines(folder / f"data.{name}"):
            yield parse_data_line(line, pos)


def _lexnames(folder: Path) -> tuple:
    path = folder / "lexnames"
    if not path.is_file():
        return LEXNAMES
    names = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            number, name = line.split()[:2]
            names[int(number)] = name
    return tuple(names.get(i, str(i)) for i in range(max(names) + 1))


def _licence(folder: Path) -> str:
    """The licence header of data.noun, without its line numbers."""
    lines = []
    with open(folder / "data.noun", encoding="utf-8") as f:
        for line in f:
            if not line.startswith("  "):
                break
            lines.append(re.sub(r"^  \d+ ?", "", line.rstrip("\n")).rstrip())
    return "\n".join(lines).strip("\n") + "\n"


def _irregular_forms(folder: Path) -> dict:
    """(pos, base form) -> inflected forms, from the morphology exception lists."""
    forms: dict = {}
    for pos, name in _EXCEPTION_FILES.items():
        path = folder / name
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            for base in parts[1:]:
                forms.setdefault((pos, base.replace("_", " ")), []).append(parts[0].replace("_", " "))
    return forms


# ====================================================================== tables


def _sha256(path: Path) -> str:
    return storage._sha256(str(path))


def _unit_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _example_id(qid: str) -> str:
    """The usage example a query comes from: its qid up to ``:ex<n>``."""
    match = re.match(r"^(wn:[nvar]:\d{8}:ex\d+)", qid)
    if not match:
        raise ValueError(f"{qid!r} is not a WordNet query id")
    return match.group(1)


def split_of(qids: Sequence[str], kinds: Sequence[str]) -> list:
    """The split of each query: ``"heldout"`` or ``"dev"``.

    Every query made from one usage example falls in the same split, so no example is seen in
    both. The examples are ranked by the sha256 of their id (``wn:n:00001740:ex0``, the qid of
    their sense query); the held-out examples are the longest prefix of that ranking that holds
    at most :data:`HELDOUT_SENSE` sense and :data:`HELDOUT_RELATION` relation queries.
    """
    count: dict = {}
    for qid, kind in zip(qids, kinds):
        per = count.setdefault(_example_id(qid), {"sense": 0, "relation": 0})
        per[kind] += 1
    held, sense, relation = set(), 0, 0
    for example in sorted(count, key=lambda e: (_unit_hash(e), e)):
        per = count[example]
        if sense + per["sense"] > HELDOUT_SENSE or relation + per["relation"] > HELDOUT_RELATION:
            break
        sense += per["sense"]
        relation += per["relation"]
        held.add(example)
    return ["heldout" if _example_id(q) in held else "dev" for q in qids]


_SUFFIXES = ("", "s", "es", "d", "ed", "ing", "er", "ers", "est", "ies", "ied", "ier", "iest")


def _words(text: str) -> list:
    return re.findall(r"[a-z0-9]+", text.lower())


def _inflects(token: str, word: str, forms: Iterable) -> bool:
    """Whether ``token`` is ``word`` as written, regularly inflected (sizzle: sizzled, stop:
    stopped, carry: carried) or one of its irregular ``forms``."""
    if token == word or token in forms:
        return True
    if len(word) < 3:
        return False
    stem = word[:-1] if word[-1] in "ey" else word
    if not token.startswith(stem):
        return False
    rest = token[len(stem):]
    return rest in _SUFFIXES or (rest[:1] == word[-1] and rest[1:] in _SUFFIXES)


def _lemma_in(example: str, synset: Synset, irregular: dict) -> str:
    """The first lemma of the synset that occurs in the example, as written, then the first that
    occurs with its first or last word inflected (regularly, or as an irregular form of WordNet's
    exception lists: "gave up", "itch mites"), else the first lemma."""
    tokens = _words(example)
    padded = " " + " ".join(tokens) + " "
    lemmas = synset.lemmas
    for lemma in lemmas:
        if " " + " ".join(_words(lemma)) + " " in padded:
            return lemma
    for lemma in lemmas:
        words = _words(lemma)
        if not words:
            continue
        forms = set()  # irregular forms of the lemma's words ("gave" for "give up")
        for word in {words[0], words[-1]}:
            for form in irregular.get((synset.pos, word), ()):
                forms.update(_words(form))
        last = len(words) - 1
        for i in range(len(tokens) - last):
            if all(tokens[i + j] == word or ((j == 0 or j == last) and _inflects(tokens[i + j], word, forms))
                   for j, word in enumerate(words)):
                return lemma
    return lemmas[0]


def build_tables(synsets: Iterable[Synset], lexnames: Sequence[str] = LEXNAMES,
                 irregular: Optional[dict] = None) -> dict:
    """The nodes, edges and queries tables (pyarrow) of the given synsets."""
    import pyarrow as pa

    irregular = irregular or {}
    synsets = list(synsets)
    nodes: dict = {"key": [], "label": [], "text": [], "props": []}
    edges: dict = {"src": [], "dst": [], "rel": []}
    seen_edges: set = set()
    examples: list = []  # (synset, index, text)
    by_key: dict = {}
    for s in synsets:
        if s.key in by_key:
            raise ValueError(f"two synsets have the key {s.key}")
        by_key[s.key] = s
        gloss = parse_gloss(s.gloss)
        lemmas = s.lemmas
        lexname = lexnames[s.lex_filenum] if s.lex_filenum < len(lexnames) else str(s.lex_filenum)
        nodes["key"].append(s.key)
        nodes["label"].append(_LABELS[s.pos])
        nodes["text"].append(", ".join(lemmas) + ": " + gloss.definition)
        nodes["props"].append(json.dumps({"lexname": lexname, "lemmas": lemmas}, ensure_ascii=False))
        for symbol, target, _, _ in s.pointers:
            edge = (s.key, target, POINTER_NAMES[symbol])
            if edge not in seen_edges:
                seen_edges.add(edge)
                edges["src"].append(edge[0])
                edges["dst"].append(edge[1])
                edges["rel"].append(edge[2])
        examples.extend((s, i, text) for i, text in enumerate(gloss.examples))
    for src, dst in zip(edges["src"], edges["dst"]):
        if dst not in by_key:
            raise ValueError(f"a pointer of {src} names {dst}, which is no synset")

    targets: dict = {}  # (key, rel) -> targets in pointer order
    for key, dst, rel in zip(edges["src"], edges["dst"], edges["rel"]):
        targets.setdefault((key, rel), []).append(dst)
    queries: dict = {"qid": [], "kind": [], "relation": [], "text": [], "relevant": [], "synset": []}

    def add_query(qid: str, kind: str, relation: Optional[str], text: str, relevant: list, key: str) -> None:
        queries["qid"].append(qid)
        queries["kind"].append(kind)
        queries["relation"].append(relation)
        queries["text"].append(text)
        queries["relevant"].append(relevant)
        queries["synset"].append(key)

    owners: dict = {}  # example text -> the synsets it illustrates (a few examples serve two)
    for s, _, example in examples:
        owners.setdefault(example, []).append(s.key)
    for s, index, example in examples:
        qid = f"{s.key}:ex{index}"
        add_query(qid, "sense", None, example, [s.key] + [k for k in owners[example] if k != s.key], s.key)
        lemma = None
        for relation, template in RELATION_TEMPLATES.items():
            related = targets.get((s.key, relation))
            if not related:
                continue
            lemma = lemma or _lemma_in(example, s, irregular)
            add_query(f"{qid}:{relation}", "relation", relation, template.format(lemma=lemma, example=example),
                      list(related), s.key)
    queries["split"] = split_of(queries["qid"], queries["kind"])

    string = pa.string()
    return {
        "nodes": pa.table({name: pa.array(values, string) for name, values in nodes.items()}),
        "edges": pa.table({
            "src": pa.array(edges["src"], string),
            "dst": pa.array(edges["dst"], string),
            "rel": pa.array(edges["rel"], string),
            "weight": pa.array([1.0] * len(edges["src"]), pa.float32()),
        }),
        "queries": pa.table({
            "qid": pa.array(queries["qid"], string),
            "kind": pa.array(queries["kind"], string),
            "relation": pa.array(queries["relation"], string),
            "text": pa.array(queries["text"], string),
            "relevant": pa.array(queries["relevant"], pa.list_(string)),
            "synset": pa.array(queries["synset"], string),
            "split": pa.array(queries["split"], string),
        }),
    }


# ====================================================================== files


def _counts(tables: dict, pointers: int) -> dict:
    import pyarrow.compute as pc

    queries = tables["queries"]

    def value_counts(table, column: str, mask=None) -> dict:
        values = table.column(column) if mask is None else table.filter(mask).column(column)
        return {str(v["values"]): int(v["counts"]) for v in pc.value_counts(values).to_pylist()}

    split = {}
    for kind in ("sense", "relation"):
        split[kind] = value_counts(queries, "split", pc.equal(queries.column("kind"), kind))
    relation = pc.equal(queries.column("kind"), "relation")
    heldout_relation = pc.and_(relation, pc.equal(queries.column("split"), "heldout"))
    return {
        "nodes": tables["nodes"].num_rows,
        "nodes_by_label": value_counts(tables["nodes"], "label"),
        "pointers": pointers,
        "edges": tables["edges"].num_rows,
        "edges_by_rel": dict(sorted(value_counts(tables["edges"], "rel").items())),
        "examples": len({_example_id(q) for q in queries.column("qid").to_pylist()}),
        "queries": queries.num_rows,
        "queries_by_kind": value_counts(queries, "kind"),
        "relation_queries_by_relation": value_counts(queries, "relation", relation),
        "heldout_relation_queries_by_relation": value_counts(queries, "relation", heldout_relation),
        "queries_by_kind_and_split": split,
    }


_README = """# WordNet 3.0 as a knowledge graph

Princeton WordNet 3.0 as Parquet files (zstd), made by `vecgraph.datasets.wordnet` from the
WordNet database files. The WordNet licence is in `{licence}` beside this file.
Load them with `vecgraph.datasets.wordnet.load(split="heldout")` (a dict of pyarrow Tables).

| file | rows | columns |
| --- | ---: | --- |
| `nodes.parquet` | {nodes:,} | key, label, text, props |
| `edges.parquet` | {edges:,} | src, dst, rel, weight |
| `queries.parquet` | {queries:,} | qid, kind, relation, text, relevant, synset, split |

**Nodes**: one per synset. key `wn:<pos>:<offset>` (pos `n`, `v`, `a` or `r`: the data file;
adjective satellites are `a`); label noun / verb / adj / adv; text: the lemmas, `": "` and the
definition (the gloss without its usage examples); props: JSON `{{"lexname", "lemmas"}}`.

By label: {nodes_by_label}.

**Edges**: the {pointers:,} pointers of the data files, semantic (synset to synset) and lexical
(word to word, here between their synsets), as synset-to-synset edges of weight 1.0, exact
duplicates of (src, dst, rel) dropped.

By rel: {edges_by_rel}.

**Queries**, from the {examples:,} usage examples of the glosses:

- {sense:,} sense queries: the text is a usage example; relevant: the synset it illustrates (and
  the other synset, for the few examples that two synsets share).
- {relation:,} relation queries: a question about a word as used in a usage example; relevant:
  the synsets its synset points to with that relation. By relation: {relation_by_relation}.

{templates}

`{{lemma}}` is the first lemma of the example's synset that occurs in the example (as written,
regularly inflected, or as an irregular form from WordNet's exception lists), else its first
lemma.

**Split**: all queries of one usage example share a split. The examples are ranked by the
sha256 of their id (the qid of their sense query, e.g. `wn:n:00001740:ex0`); the held-out ones
are the longest prefix of that ranking with at most {heldout_sense_cap:,} sense and
{heldout_relation_cap:,} relation queries. All other queries are `dev`.

Held out: {heldout_sense:,} sense and {heldout_relation:,} relation queries ({heldout_by_relation}).

Made with:

    apt-get install wordnet-base    # Debian: the WordNet 3.0 database in /usr/share/wordnet
    python -m vecgraph.datasets.wordnet --wordnet-dir /usr/share/wordnet

`{manifest}` records the counts and the sha256 of the source files and of each file here.
"""


def _readme(counts: dict) -> str:
    def listing(d: dict) -> str:
        return ", ".join(f"{k} {v:,}" for k, v in d.items())

    templates = "\n".join(f"| {relation} | `{template}` |" for relation, template in RELATION_TEMPLATES.items())
    templates = "| relation | question |\n| --- | --- |\n" + templates
    split = counts["queries_by_kind_and_split"]
    return _README.format(
        licence=LICENSE_FILE, manifest=MANIFEST_FILE, nodes=counts["nodes"], edges=counts["edges"],
        pointers=counts["pointers"], queries=counts["queries"], nodes_by_label=listing(counts["nodes_by_label"]),
        edges_by_rel=listing(counts["edges_by_rel"]), sense=counts["queries_by_kind"]["sense"],
        relation=counts["queries_by_kind"]["relation"], examples=counts["examples"],
        relation_by_relation=listing(counts["relation_queries_by_relation"]), templates=templates,
        heldout_sense_cap=HELDOUT_SENSE, heldout_relation_cap=HELDOUT_RELATION,
        heldout_sense=split["sense"].get("heldout", 0), heldout_relation=split["relation"].get("heldout", 0),
        heldout_by_relation=listing(counts["heldout_relation_queries_by_relation"]),
    )


def extract(wordnet_dir: PathLike = DEFAULT_WORDNET_DIR, out_dir: PathLike = DATA_DIR,
            compression_level: int = 19) -> dict:
    """Read the WordNet database in ``wordnet_dir`` and write, in ``out_dir``, the nodes, edges
    and queries Parquet files (zstd at ``compression_level``: 19 makes the smallest files, in
    about 20 s; 1 takes a second), the WordNet licence, a README and a manifest. Returns the
    counts.

    The files are written to a temporary folder beside ``out_dir`` and moved in when all are
    written.
    """
    import pyarrow.parquet as pq

    folder = Path(wordnet_dir)
    sources = [f"data.{name}" for _, name in _POS_FILES] + sorted(
        name for name in _EXCEPTION_FILES.values() if (folder / name).is_file())
    missing = [name for name in sources if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} is not a WordNet 3.0 database folder: no {', '.join(missing)} "
                                "(on Debian: apt-get install wordnet-base, then use /usr/share/wordnet)")
    synsets = list(read_synsets(folder))
    tables = build_tables(synsets, _lexnames(folder), _irregular_forms(folder))
    counts = _counts(tables, sum(len(s.pointers) for s in synsets))

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for name in TABLES:
            pq.write_table(tables[name], staging / f"{name}.parquet", compression="zstd",
                           compression_level=compression_level, use_dictionary=["label", "rel", "kind", "relation", "split"])
        (staging / LICENSE_FILE).write_text(_licence(folder), encoding="utf-8")
        (staging / README_FILE).write_text(_readme(counts), encoding="utf-8")
        manifest = {
            "source": {"name": "Princeton WordNet 3.0",
                       "sha256": {name: _sha256(folder / name) for name in sources}},
            "counts": counts,
            "sha256": {name: _sha256(staging / name) for name in
                       [f"{t}.parquet" for t in TABLES] + [LICENSE_FILE, README_FILE]},
        }
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        out.mkdir(parents=True, exist_ok=True)
        for entry in sorted(staging.iterdir()):
            os.replace(entry, out / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


def paths(root: Optional[PathLike] = None) -> dict:
    """name -> Path of the committed files: nodes, edges, queries, licence, readme, manifest."""
    folder = Path(root) if root is not None else DATA_DIR
    found = {name: folder / f"{name}.parquet" for name in TABLES}
    found.update(licence=folder / LICENSE_FILE, readme=folder / README_FILE, manifest=folder / MANIFEST_FILE)
    return found


def load(split: Optional[str] = "heldout", root: Optional[PathLike] = None) -> dict:
    """The nodes, edges and queries tables: ``{"nodes": ..., "edges": ..., "queries": ...}``.

    Args:
        split: the queries to keep: ``"heldout"`` (default), ``"dev"``, or None for all.
        root: a folder written by :func:`extract` (default: the files shipped with vecgraph).
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if split not in ("heldout", "dev", None):
        raise ValueError(f"split must be 'heldout', 'dev' or None, got {split!r}")
    files = paths(root)
    for name in TABLES:
        if not files[name].is_file():
            raise FileNotFoundError(f"{files[name]} is missing; rebuild it with "
                                    "python -m vecgraph.datasets.wordnet --wordnet-dir /usr/share/wordnet")
    tables = {name: pq.read_table(files[name]) for name in TABLES}
    if split is not None:
        queries = tables["queries"]
        tables["queries"] = queries.filter(pc.equal(queries.column("split"), split))
    return tables


def verify(root: Optional[PathLike] = None) -> dict:
    """Check each file against the sha256 in the manifest; returns the manifest. Raises
    ValueError naming the files that differ."""
    files = paths(root)
    manifest = json.loads(files["manifest"].read_text(encoding="utf-8"))
    folder = files["manifest"].parent
    bad = [name for name, digest in manifest["sha256"].items()
           if not (folder / name).is_file() or _sha256(folder / name) != digest]
    if bad:
        raise ValueError(f"{folder}: the sha256 of {', '.join(bad)} is not the one in {MANIFEST_FILE}; "
                         "regenerate the files with python -m vecgraph.datasets.wordnet")
    return manifest


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m vecgraph.datasets.wordnet",
        description="Turn the WordNet 3.0 database files into the nodes, edges and queries Parquet files.")
    parser.add_argument("--wordnet-dir", default=DEFAULT_WORDNET_DIR,
                        help="folder holding data.noun, data.verb, ... (default: %(default)s)")
    parser.add_argument("--out", default=str(DATA_DIR), help="output folder (default: the package's data)")
    args = parser.parse_args(argv)
    try:
        counts = extract(args.wordnet_dir, args.out)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(counts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
