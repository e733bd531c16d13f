from __future__ import annotations

import pytest
from pairedge.core.errors import FormatError, InputError, MissingDependencyError, PairedgeError
from pairedge.core.optional import require


def test_hierarchy_matches_builtins() -> None:
    assert issubclass(FormatError, ValueError) and issubclass(FormatError, PairedgeError)
    assert issubclass(InputError, ValueError)
    assert issubclass(MissingDependencyError, ImportError)


def test_format_error_names_file_and_record() -> None:
    err = FormatError("a/b.txt", "NaN in column w", record=12)
    assert str(err) == "a/b.txt, record 12: NaN in column w"
    assert (err.path, err.record) == ("a/b.txt", 12)


def test_require_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install '\.\[tensorrt\]' in the pairedge folder"):
        require("tensorrt_definitely_missing", extra="tensorrt", purpose="building engines")
    assert require("json").dumps([1]) == "[1]"
