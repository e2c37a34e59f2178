"""The README's knowledge-base example runs and prints what it says."""

from __future__ import annotations

from test_readme_examples import run_readme_block


def test_the_knowledge_base_example_runs(tmp_path):
    _, out = run_readme_block("## GraphRAG over documents", tmp_path)
    printed = out.getvalue().splitlines()
    assert printed[0] == "['manual/billing.md', 'manual/search.md'] 4 4"
    chunks, entities = printed[1].split("] [")
    chunks, entities = eval(chunks + "]"), eval("[" + entities)
    assert chunks[0] == ("manual/billing.md", "The billing-job runs nightly and depends")
    assert set(entities) == {"billing-job", "ledger-db", "search-api"}
    assert printed[2] == "## Sources"
    assert printed[3] == "[1] [manual/billing.md v3.0 | 2024-01-01 | current] Billing"
    context = out.getvalue()
    assert "old-billing" not in context.split("Community")[0]  # deprecated: not in the current answers
    titles = eval(next(line for line in printed if line.startswith("['Community")))
    assert len(titles) == 2
    assert printed[-1].startswith("['doc:0::11:old-billing@#c0'")
    assert (tmp_path / "kb.vg" / "MANIFEST").exists()
