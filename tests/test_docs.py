"""Every docstring example runs and prints what it says."""

import doctest
import importlib

import pytest

MODULES = ["torchalign.alphabet", "torchalign.batch", "torchalign.hamming", "torchalign.levenshtein", "torchalign.asm",
           "torchalign.scoring", "torchalign.align", "torchalign.primers",
           "torchalign.traceback"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
