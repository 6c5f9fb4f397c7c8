"""The test helpers are one package, ``support``; a test file importing a
helper by its bare name (``from kernels import ...``, the layout before the
package) gets the same module object."""

import importlib


def test_a_helper_by_its_bare_name_is_the_support_module():
    bare = importlib.import_module("messages")
    assert bare is importlib.import_module("support.messages")
    assert bare.first_line("a\nb") == "a"
