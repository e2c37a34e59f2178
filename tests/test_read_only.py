"""Graph.open(..., read_only=True): same answers as a writable open, nothing in the folder
changes, writes are refused, readers share the folder and exclude writers."""

import hashlib
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import vecgraph as vg
from vecgraph import storage
from vecgraph.errors import ReadOnlyError, StorageError

DIM = 16


class _Embedder:
    name, dim = "constant", DIM

    def __call__(self, texts):
        return np.ones((len(texts), DIM), np.float32)


def _tree(folder):
    """{relative path: (size, mtime_ns, sha256)} of every file, and the set of folders."""
    files, folders = {}, set()
    for root, dirs, names in os.walk(folder):
        for d in dirs:
            folders.add(os.path.relpath(os.path.join(root, d), folder))
        for name in names:
            path = os.path.join(root, name)
            st = os.stat(path)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            files[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns, digest)
    return files, folders


def _make(folder, rng, checkpoint=True):
    """A folder graph with texts and edges: 300 nodes in the snapshot, 40 more in the WAL only."""
    g = vg.Graph.open(folder, dim=DIM)
    g.add_nodes(list(range(300)), rng.standard_normal((300, DIM)).astype(np.float32),
                texts=[f"node {i} {'apple' if i % 3 == 0 else 'pear'} w{i}" for i in range(300)])
    g.add_edges(list(range(299)), list(range(1, 300)), rels=["next"] * 299)
    if checkpoint:
        g.checkpoint()
    g.add_nodes(list(range(300, 340)), rng.standard_normal((40, DIM)).astype(np.float32),
                texts=[f"late {i} banana" for i in range(300, 340)])
    g.delete_nodes([5, 6])
    g.close()


def test_read_only_answers_as_a_writable_open_and_changes_nothing(tmp_path):
    rng = np.random.default_rng(7)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    queries = rng.standard_normal((20, DIM)).astype(np.float32)
    with vg.Graph.open(folder) as w:
        want = [(list(r.keys), r.scores.tolist()) for r in w.search_batch(queries, k=10)]
        want_bm25 = w._bm25("banana apple", 20)
        want_len, want_lsn = len(w), w._engine.last_lsn()
    before = _tree(folder)

    r = vg.Graph.open(folder, read_only=True)
    assert repr(r).endswith("read_only=True)")
    assert len(r) == want_len == 338 and r._engine.last_lsn() == want_lsn
    got = [(list(x.keys), x.scores.tolist()) for x in r.search_batch(queries, k=10)]
    assert got == want
    assert r._bm25("banana apple", 20) == want_bm25
    copy = r._text._folder
    assert not copy.startswith(folder) and os.path.isdir(copy)
    r.compact()  # in memory only
    r.close()
    assert not os.path.exists(copy)  # the private copy of the BM25 index goes with the graph
    assert _tree(folder) == before


def test_read_only_refuses_writes_and_changes_nothing(tmp_path):
    rng = np.random.default_rng(8)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    before = _tree(folder)
    with vg.Graph.open(folder, read_only=True) as r:
        n, lsn = len(r), r._engine.last_lsn()
        writes = [
            lambda: r.add_nodes([1000], rng.standard_normal((1, DIM)).astype(np.float32)),
            lambda: r.upsert_nodes([1], rng.standard_normal((1, DIM)).astype(np.float32)),
            lambda: r.add_edges([1], [2], rels=["x"]),
            lambda: r.delete_nodes([1]),
            lambda: r.delete_edges([1], [2]),
            lambda: r.delete_tenant("t"),
            lambda: r.add_aliases(1, ["one"]),
            r.checkpoint,
            lambda: r.use_embedder(_Embedder()),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyError, match="open read-only"):
                write()
        # The core refuses too (a write reaching it past the facade).
        with pytest.raises(ReadOnlyError, match="open read-only"):
            r._engine.delete_nodes(vg.arguments._keys([1], "keys"), False)
        assert len(r) == n and r._engine.last_lsn() == lsn and 1 in r and r.aliases(1) == []
        assert r.stats()["read_only"] is True
    assert _tree(folder) == before


def test_readers_share_a_folder_and_exclude_writers(tmp_path):
    rng = np.random.default_rng(9)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    a = vg.Graph.open(folder, read_only=True)
    b = vg.Graph.open(folder, read_only=True)
    q = rng.standard_normal(DIM).astype(np.float32)
    assert list(a.search(q).keys) == list(b.search(q).keys)
    # Another process reads too, while this one holds two readers.
    code = ("import vecgraph as vg, sys; g = vg.Graph.open(sys.argv[1], read_only=True); print(len(g)); g.close()")
    out = subprocess.run([sys.executable, "-c", code, folder], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "338"
    with pytest.raises(StorageError, match="open read-only in another Graph"):
        vg.Graph.open(folder)
    a.close()
    with pytest.raises(StorageError, match="open read-only in another Graph"):
        vg.Graph.open(folder)
    b.close()
    w = vg.Graph.open(folder)  # the last reader gone, a writer gets in
    with pytest.raises(StorageError, match="already open for writing"):
        vg.Graph.open(folder, read_only=True)
    w.close()


def test_read_only_skips_a_torn_tail_without_cutting_it(tmp_path):
    rng = np.random.default_rng(10)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    wal = os.path.join(folder, storage.WAL_DIR)
    last = os.path.join(wal, sorted(os.listdir(wal))[-1])
    with open(last, "ab") as f:
        f.write(b"\x07" * 37)  # half a record
    before = _tree(folder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = vg.Graph.open(folder, read_only=True)
    assert [str(w.message).split(" (")[0] for w in caught] == ["skipped 37 bytes at the end of the WAL"]
    assert str(caught[0].message).endswith("read_only leaves them in the folder (a writable open cuts them)")
    assert len(r) == 338
    r.close()
    assert _tree(folder) == before
    with pytest.warns(RuntimeWarning, match="cut 37 bytes"):
        vg.Graph.open(folder).close()  # a writable open cuts it


def test_read_only_rebuilds_a_missing_or_stale_bm25_index_in_memory(tmp_path):
    rng = np.random.default_rng(11)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    with vg.Graph.open(folder) as w:
        want = w._bm25("late banana", 50)
    assert len(want) == 40
    text = os.path.join(folder, "text")
    saved = str(tmp_path / "text.saved")
    os.rename(text, saved)
    with vg.Graph.open(folder, read_only=True) as r:
        # The same documents; scores differ a little, as the writable index still counts the
        # deleted nodes 5 and 6 in its statistics (see TextIndex).
        assert sorted(k for k, _ in r._bm25("late banana", 50)) == sorted(k for k, _ in want)
        assert not os.path.exists(text)  # built in memory, not in the folder
    # An index behind the graph (as after a crash before its writes were published): the
    # copy is out of step, so a read-only graph builds its own.
    os.rename(saved, text)
    with vg.Graph.open(folder) as w:
        w._text.close()  # keeps the index on disk at this LSN
        w._text = None
        w._text_lock.acquire()
        try:
            w.add_nodes([900], rng.standard_normal((1, DIM)).astype(np.float32), texts=["late 900 banana"])
        finally:
            w._text_lock.release()
    with vg.Graph.open(folder, read_only=True) as r:
        got = r._bm25("late banana", 50)
    assert len(got) == 41 and 900 in dict(got)


def test_read_only_needs_an_existing_graph_and_a_bool(tmp_path):
    missing = tmp_path / "none.vg"
    with pytest.raises(StorageError, match="does not exist; read_only=True opens an existing graph only"):
        vg.Graph.open(missing, dim=DIM, read_only=True)
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StorageError, match="has no MANIFEST"):
        vg.Graph.open(empty, read_only=True)
    assert os.listdir(empty) == []
    folder = str(tmp_path / "g.vg")
    _make(folder, np.random.default_rng(12), checkpoint=False)
    with pytest.raises(TypeError, match="read_only must be True or False, got str"):
        vg.Graph.open(folder, read_only="yes")
    before = _tree(folder)
    with pytest.raises(vg.errors.DimensionMismatchError):
        vg.Graph.open(folder, dim=DIM + 1, read_only=True)
    assert _tree(folder) == before
    # A folder without a LOCK file (never opened for writing here) opens, and none is made.
    os.unlink(os.path.join(folder, storage.LOCK))
    with vg.Graph.open(folder, read_only=True) as r:
        assert len(r) == 338
    assert not os.path.exists(os.path.join(folder, storage.LOCK))


def test_cli_reads_a_folder_read_only(tmp_path, capsys):
    from vecgraph import cli

    rng = np.random.default_rng(13)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    np.save(tmp_path / "q.npy", rng.standard_normal(DIM).astype(np.float32))
    before = _tree(folder)
    with vg.Graph.open(folder, read_only=True):  # a reader holds the folder meanwhile
        assert cli.main(["stats", folder, "--json"]) == 0
        assert '"nodes": 338' in capsys.readouterr().out
        assert cli.main(["query", folder, "--vector", str(tmp_path / "q.npy"), "--json"]) == 0
        assert capsys.readouterr().out.count('"key"') == 10
        assert cli.main(["export", folder, str(tmp_path / "out.parquet")]) == 0
        assert "exported 338 nodes, 296 edges"  # 299 less the 3 edges of the deleted 5 and 6 in capsys.readouterr().out
        assert cli.main(["checkpoint", folder]) == 1  # a writer's command is refused
        assert "open read-only in another Graph" in capsys.readouterr().err
    assert _tree(folder) == before


def test_read_only_of_a_fully_checkpointed_graph_reads_the_folders_bm25_index(tmp_path):
    # No WAL record after the snapshot: the graph's LSN is the snapshot's, so the folder's BM25
    # index is in step and its copy is searched (same scores as the writer's, which still counts
    # the deleted nodes 5 and 6; an index rebuilt in memory would not).
    rng = np.random.default_rng(14)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    with vg.Graph.open(folder) as w:
        w.checkpoint()
        lsn, text_lsn = w._engine.last_lsn(), w._engine.last_text_lsn()
        want = w._bm25("late banana apple", 30)
    with vg.Graph.open(folder, read_only=True) as r:
        assert (r._engine.last_lsn(), r._engine.last_text_lsn()) == (lsn, text_lsn)
        assert r._bm25("late banana apple", 30) == want


def test_read_only_bm25_copies_go_with_close_in_forked_children_and_none_after_close(tmp_path, monkeypatch):
    import glob
    import multiprocessing
    import tempfile

    rng = np.random.default_rng(15)
    folder = str(tmp_path / "g.vg")
    _make(folder, rng)
    # A temp folder of this test's own: tests running beside it (pytest -n) make copies too.
    os.mkdir(tmp_path / "tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    pattern = os.path.join(tempfile.gettempdir(), "vecgraph-text-*")
    before = set(glob.glob(pattern))
    g = vg.Graph.open(folder, read_only=True)
    want = g._bm25("late banana", 5)

    def work(out):
        out.put(g._bm25("late banana", 5))  # the child's own copy
        g.close()

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    children = [ctx.Process(target=work, args=(out,)) for _ in range(2)]
    for child in children:
        child.start()
    got = [out.get(timeout=60) for _ in children]
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    assert got == [want, want]
    g.close()
    assert set(glob.glob(pattern)) == before  # the children's copies and the parent's are gone
    # After close a BM25 search builds its index in memory from the graph, not from the folder.
    after = g._bm25("late banana", 5)
    assert [k for k, _ in after] == [k for k, _ in want]
    # Rebuilt, not copied: the copy's statistics still count the deleted nodes 5 and 6.
    assert [s for _, s in after] != [s for _, s in want]
    assert g._text.path is None and len(set(glob.glob(pattern)) - before) == 1
    g._text.close()
