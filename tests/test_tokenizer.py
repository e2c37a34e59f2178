"""The tokenizer (vecgraph.tokenizer): identifiers kept whole and split, words, Chinese through
jieba, kana and Hangul bigrams, Unicode normalisation, stopwords, invisible format characters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vecgraph.tokenizer import STOPWORDS, _tokenize_ascii, _tokenize_general, tokenize


@pytest.mark.parametrize("text, expected", [
    ("A7-Pro", ["a7-pro", "a7", "pro"]),
    ("ERR_0x9941", ["err_0x9941", "err", "0x9941"]),
    ("v2.0", ["v2.0", "v2", "0"]),
    ("foo.bar_baz", ["foo.bar_baz", "foo", "bar", "baz"]),
    ("user@example.com", ["user@example.com", "user", "example", "com"]),
    ("std::vector", ["std::vector", "std", "vector"]),
    ("__init__", ["__init__", "init"]),
    ("Install v2.0.", ["install", "v2.0", "v2", "0"]),        # a trailing joiner is punctuation
    ("a--b", ["a--b", "b"]),                                  # "a" is a stopword, the whole run is not
])
def test_identifiers_whole_and_parts(text, expected):
    assert tokenize(text) == expected


def test_plain_words_split_on_punctuation_without_stemming():
    assert tokenize("Prices, prices; PRICE!") == ["prices", "prices", "price"]
    assert tokenize("don't stop (now)") == ["stop"]  # don, t, now: stopwords
    assert tokenize("café, cafe") == ["café", "cafe"]  # diacritics kept


def test_chinese_segmented_by_jieba():
    assert tokenize("A7-Pro 多少钱？") == ["a7-pro", "a7", "pro", "多少", "钱"]
    assert tokenize("最近公共祖先") == ["最近", "公共", "祖先"]
    # search mode: the long word and the words inside it
    assert tokenize("中华人民共和国") == ["中华", "华人", "人民", "共和", "共和国", "中华人民共和国"]
    assert tokenize("价格是多少") == ["价格", "多少"]  # 是: stopword
    assert tokenize("A7-Pro多少钱") == ["a7-pro", "a7", "pro", "多少", "钱"]  # no space needed


def test_kana_and_hangul_bigrams():
    assert tokenize("カタカナ") == ["カタ", "タカ", "カナ"]
    assert tokenize("한국어 텍스트") == ["한국", "국어", "텍스", "스트"]
    assert tokenize("ｶﾀｶﾅ") == ["カタ", "タカ", "カナ"]       # half-width -> full-width first
    assert tokenize("東京に行きます") == ["東京", "に", "行", "きま", "ます"]


def test_unicode_normalisation_and_casefolding():
    assert tokenize("ＦＵＬＬ－ｗｉｄｔｈ Ａ７") == ["full-width", "full", "width", "a7"]
    assert tokenize("ﬁle ﬂow") == ["file", "flow"]
    assert tokenize("Straße STRASSE") == ["strasse", "strasse"]
    assert tokenize("ÉCOLE école e\u0301cole") == ["école"] * 3
    assert tokenize("A7\u2010Pro") == tokenize("A7-Pro")      # Unicode hyphen
    assert tokenize("①②") == ["12"]


def test_scripts_with_combining_marks_stay_whole():
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert tokenize("กรุงเทพ") == ["กรุงเทพ"]


def test_stopwords_empty_and_type():
    assert tokenize("") == []
    assert tokenize("the of and 的") == []
    assert tokenize("!!! --- ...") == []
    assert "the" in STOPWORDS
    with pytest.raises(TypeError, match="text must be a str"):
        tokenize(b"bytes")
    with pytest.raises(TypeError, match="text must be a str"):
        tokenize(None)


def test_long_compound_keeps_only_its_parts():
    run = "-".join(["part"] * 20)  # 99 characters
    assert tokenize(run) == ["part"] * 20


def test_invisible_format_characters_do_not_split_words():
    assert tokenize("A7\u00adPro") == tokenize("A7Pro") == ["a7pro"]
    assert tokenize("zero\u200bwidth \ufeffword") == ["zerowidth", "word"]
    assert tokenize("ERR_0x99\u200d41") == tokenize("ERR_0x9941")


_ASCII_PIECES = st.sampled_from(["a", "Z", "7", "_", "-", ".", "@", ":", "/", " ", "!", "'", "\x00", "\t", "\x7f",
                                 "A7", "v2.0", "__init__", "the", "Don't", "x" * 70, "ERR_0x9941", "ann@b.co"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_ASCII_PIECES, max_size=30).map("".join) | st.text(st.characters(max_codepoint=127), max_size=80))
def test_ascii_fast_path_equals_the_general_rules(text):
    assert _tokenize_ascii(text) == _tokenize_general(text)
    assert tokenize(text) == _tokenize_general(text)


def test_ascii_fast_path_on_whole_texts():
    texts = ["The A7-Pro's price: $99 (see ERR_0x9941, std::vector and __init__)!",
             "order-service is written in Go 1.22; email ann@example.com.",
             "_leading trailing_ __both__ a--b a-- --b " + "y" * 65 + "-z"]
    for text in texts:
        assert _tokenize_ascii(text) == _tokenize_general(text)
    assert tokenize(texts[0]) == ["a7-pro", "a7", "pro", "price", "99", "see", "err_0x9941", "err", "0x9941",
                                  "std::vector", "std", "vector", "__init__", "init"]
