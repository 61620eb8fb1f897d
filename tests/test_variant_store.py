"""The kept variants' store: a file kept under its own digest, given back only as those bytes."""
from __future__ import annotations

from pypto_build.core.hashing import file_digest
from pypto_build.variants.store import VariantStore, store_dir


def test_a_kept_file_comes_back_as_its_bytes_and_only_as_them(tmp_path):
    store = VariantStore(tmp_path / "store")
    src = tmp_path / "k.so"
    src.write_bytes(b"\x7fELF one")
    digest = file_digest(str(src))
    store.add([(digest, src)])
    store.add([(digest, src)])                                  # there already: only used again
    assert store.restore(digest, tmp_path / "out.so") and (tmp_path / "out.so").read_bytes() == b"\x7fELF one"
    assert store.read(digest) == b"\x7fELF one"
    other = tmp_path / "other.so"                               # stored under a digest that is not its own
    other.write_bytes(b"\x7fELF two")                           # (a file changed while it was stored)
    wrong = file_digest(str(tmp_path / "out.so"))[::-1]
    store.add([(wrong, other)])
    assert not store.restore(wrong, tmp_path / "bad.so") and not (tmp_path / "bad.so").exists()
    assert not store.restore("0" * 32, tmp_path / "gone.so")    # never kept, or evicted
    store.add([("1" * 32, tmp_path / "vanished.so")])           # gone since it was digested: nothing kept, no error
    assert store.read("1" * 32) is None


def test_the_store_is_beside_the_cache_else_in_the_users_cache_folder(tmp_path):
    assert store_dir(str(tmp_path / "c")) == str(tmp_path / "c" / "variants")
    assert store_dir(None, {"XDG_CACHE_HOME": str(tmp_path / "x")}) == str(tmp_path / "x" / "pypto_build" / "variants")
