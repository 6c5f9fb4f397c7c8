"""The test helpers are one package, ``support``: a helper is imported as
``support.<name>``, never by a bare name (no import shim in conftest)."""

import ast
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HELPERS = {name[:-3] for name in os.listdir(os.path.join(HERE, "support"))
           if name.endswith(".py") and name != "__init__.py"}


def bare_imports(source):
    """The helper modules *source* imports by a bare name."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in HELPERS}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module in HELPERS:
            found.add(node.module)
    return found


def _test_files():
    for dirpath, _, files in os.walk(HERE):
        for name in files:
            if name.endswith(".py") and "support" not in dirpath.split(os.sep)[-1:]:
                yield os.path.join(dirpath, name)


@pytest.mark.parametrize("path", sorted(_test_files()), ids=lambda p: os.path.relpath(p, HERE))
def test_helpers_are_imported_from_support(path):
    with open(path) as f:
        assert bare_imports(f.read()) == set(), path


def test_the_check_can_fail():
    assert bare_imports("from messages import first_line\nimport leaks\n") == {"messages", "leaks"}
    assert bare_imports("from support.messages import first_line\n") == set()
