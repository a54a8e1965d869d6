"""User agent factories for the bring-your-own-agent tests (``coevo.harnesses.agent``): one that works
and takes the episode's tools, and the bad ones a user might write. Imported by reference
(``agent_kit:NAME``; pytest puts this directory on ``sys.path``)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel, Field, field_validator

from coevo.harnesses.spec import Prompt


class StrictParams(BaseModel):
    """Params whose system prompt must keep mentioning the app's product name."""

    prompt: Prompt = Field(default_factory=lambda: Prompt(system="You are Acme's assistant."))

    @field_validator("prompt")
    @classmethod
    def _names_acme(cls, prompt: Prompt) -> Prompt:
        if "Acme" not in prompt.system:
            raise ValueError("the system prompt must name Acme")
        return prompt


def make_tool_agent(params: StrictParams, model, tools):
    """A ReAct loop over the episode's tools (handed by coevo) with the params' system prompt."""
    bound = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict:
        messages: list[BaseMessage] = [("system", params.prompt.system), *state["messages"]]
        return {"messages": [await bound.ainvoke(messages)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def one_argument(params: StrictParams):
    """Wrong signature: no model."""


def unannotated(params, model):
    """No params model declared."""


class Unknown(BaseModel):
    """A params field that is no harness component."""

    persona: str = "pirate"


def unknown_field(params: Unknown, model):
    """Params that coevo's edits could not reach."""


def raising_factory(params: StrictParams, model):
    """A factory that fails when built."""
    raise RuntimeError("no API key configured")


def not_a_graph(params: StrictParams, model):
    """Returns the model instead of a graph."""
    return "graph"


def raising_graph(params: StrictParams, model):
    """A graph whose node raises."""

    def broken(state: MessagesState) -> dict:
        raise KeyError("profile")

    builder = StateGraph(MessagesState)
    builder.add_node("broken", broken)
    builder.add_edge(START, "broken")
    return builder.compile()


class SystemOnly(BaseModel):
    """An app's own prompt type: only the system text (the spec's other prompt fields never reach it)."""

    system: str = "You are Acme's assistant."


class SystemParams(BaseModel):
    """Params whose ``prompt`` is the app's narrower type: an edit of ``/prompt/rules`` changes the spec
    but not what the factory receives."""

    prompt: SystemOnly = Field(default_factory=SystemOnly)


def make_system_agent(params: SystemParams, model):
    """A one-call agent with the params' system text."""

    async def agent(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke([("system", params.prompt.system), *state["messages"]])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile()
