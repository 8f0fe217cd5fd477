"""The checkpointer's pinned LangGraph channel names still match LangGraph's.

The saver avoids ``langgraph._internal`` (private, moves between releases); two channel names it
must recognise have no public import, so it pins them. This test, and only this test, reads the
private module: a LangGraph upgrade that renames or moves them fails here, not in production.
"""

from __future__ import annotations

from pathlib import Path

from langgraph._internal import _constants

from langorch.adapters.dynamodb.checkpointer import _buffer


def test_the_pinned_channel_names_are_langgraph_s():
    # Given LangGraph's private constants and the saver's pinned copies
    # Then they are equal
    assert _buffer.ERROR_SOURCE_NODE == _constants.ERROR_SOURCE_NODE
    assert _buffer.PUSH == _constants.PUSH


def test_no_checkpointer_module_imports_langgraph_internals():
    # Given the checkpointer package's sources
    package = Path(_buffer.__file__).parent

    # Then none of them imports LangGraph's private package
    imports = ("from langgraph._internal", "import langgraph._internal")
    offenders = [p.name for p in package.glob("*.py") if any(i in p.read_text() for i in imports)]
    assert offenders == []
