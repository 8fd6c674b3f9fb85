from typing import Literal

import pytest

from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools import tool_from_function
from ratchet.runtime.tools.registry import json_schema


def sample(ctx, path: str, count: int = 3, mode: Literal["a", "b"] = "a", tags: list[str] | None = None) -> str:
    """Do a sample thing.

    Longer explanation that is not part of the first paragraph.

    Args:
        path: where to look.
        count: how many
            (continued on the next line).
        mode: which mode.
    """
    return f"{path}:{count}:{mode}:{tags}"


def test_schema_from_signature_and_docstring():
    tool = tool_from_function(sample)
    fn = tool.schema()["function"]
    assert fn["name"] == "sample"
    assert fn["description"] == "Do a sample thing.\n\nLonger explanation that is not part of the first paragraph."
    props = fn["parameters"]["properties"]
    assert list(props) == ["path", "count", "mode", "tags"]  # ctx is not shown
    assert props["path"] == {"type": "string", "description": "where to look."}
    assert props["count"]["type"] == "integer" and props["count"]["default"] == 3
    assert props["count"]["description"] == "how many (continued on the next line)."
    assert props["mode"]["enum"] == ["a", "b"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "default": None}
    assert fn["parameters"]["required"] == ["path"]


def test_call_checks_and_coerces_arguments():
    tool = tool_from_function(sample)
    assert tool.call(None, {"path": "x", "count": "5"}) == "x:5:a:None"  # "5" from a small model is accepted
    with pytest.raises(ToolError, match="missing argument"):
        tool.call(None, {})
    with pytest.raises(ToolError, match="unknown argument.*bogus"):
        tool.call(None, {"path": "x", "bogus": 1})
    with pytest.raises(ToolError, match="expected integer"):
        tool.call(None, {"path": "x", "count": "many"})


def test_unsupported_annotation_is_refused():
    with pytest.raises(TypeError, match="no JSON schema"):
        json_schema(complex)
