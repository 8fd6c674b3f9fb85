"""Middleware around every model and tool call. Each hook gets the agent and may change what
passes through; return the value unchanged to do nothing."""


def before_model(agent, messages):
    """The messages about to be sent (after the context policy)."""
    return messages


def after_model(agent, message):
    """The assistant message just received."""
    return message


def before_tool(agent, call):
    """A tool call about to run (a ratchet.runtime.protocols.ToolCall); raise ToolError to refuse it."""
    return call


def after_tool(agent, call, result):
    """The text result the model will see."""
    return result
