"""A user's LangGraph ReAct agent co-evolved by coevo (docs/how-to/own-agent.md).

This is what an app would write, with nothing coevo-specific but the params model: a ReAct loop
(model → tools → model …, the shape of LangGraph's ``react-agent`` template) with a calculator
tool, a system prompt, few-shot skills and a nudge after each tool result. ``ReactParams`` declares
what coevo may evolve — the prompt texts, the skills, the tool's description and the decoding —
as a subset of ``HarnessSpec``; the rest of the graph is the app's and runs unchanged::

    coevo run --harness coevo.examples.react_agent:make_agent        # evolve params, train the model

and back in the app, with the evolved harness exported (``coevo archive export ID -o evolved.json``)::

    from coevo import load_params
    from coevo.examples.react_agent import ReactParams, make_agent
    app = make_agent(load_params("evolved.json", ReactParams), model)
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import StructuredTool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel, Field

from coevo.envs.calculator import calculate
from coevo.harnesses.spec import Decoding, Prompt, Skill, ToolView

CALCULATOR = "Evaluate an arithmetic expression such as '3 + 4 * 2' and return the result."


class ReactParams(BaseModel):
    """The agent's evolvable part (field names are ``HarnessSpec`` components, so coevo's edits reach
    them): ``prompt`` (system text, guidance, output format, named rules), ``skills`` (procedures in
    the system prompt; input/output demonstrations as few-shot turns), ``tool_view.descriptions``
    (the calculator's description) and ``decoding`` (what coevo samples the model with)."""

    prompt: Prompt = Field(default_factory=lambda: Prompt(
        system="You are a careful assistant with a calculator tool.",
        action_guidance="Use the calculator for arithmetic, then answer.",
        output_format="End your reply with one line 'Final answer: <answer>'."))
    skills: dict[str, Skill] = Field(default_factory=dict)
    tool_view: ToolView = Field(default_factory=lambda: ToolView(descriptions={"calculator": CALCULATOR}))
    decoding: Decoding = Field(default_factory=lambda: Decoding(temperature=0.0))


def system_text(params: ReactParams) -> str:
    """The system prompt: the prompt's slots and rules, then the procedure skills."""
    p = params.prompt
    rules = [r.text for r in p.rules.values()]
    procedures = [s.text for s in params.skills.values() if s.text and not s.is_chat_turn]
    return "\n\n".join(t for t in [p.system, p.action_guidance, *rules, *procedures, p.output_format] if t)


def few_shot(params: ReactParams) -> list[BaseMessage]:
    """The demonstration skills as prior user/assistant turns."""
    turns: list[BaseMessage] = []
    for skill in params.skills.values():
        if skill.is_chat_turn:
            turns += [HumanMessage(skill.input or ""), AIMessage(skill.output or "")]
    return turns


def make_agent(params: ReactParams, model: BaseChatModel):
    """The app's agent graph: ``agent`` (the model with the calculator bound) and ``tools`` (runs the
    calls), looping until the model answers without a tool call. After a tool result the model is
    reminded of the output format (a harness injection: context the model did not write)."""
    calculator = StructuredTool.from_function(calculate, name="calculator",
                                              description=params.tool_view.descriptions.get("calculator", CALCULATOR))
    bound = model.bind_tools([calculator])
    head = [SystemMessage(system_text(params)), *few_shot(params)]

    def context(state: MessagesState) -> list[BaseMessage]:
        messages = [*head, *state["messages"]]
        if isinstance(messages[-1], ToolMessage) and params.prompt.output_format:
            messages.append(HumanMessage(f"Reminder: {params.prompt.output_format}"))
        return messages

    def call(state: MessagesState) -> dict:
        return {"messages": [bound.invoke(context(state))]}

    async def acall(state: MessagesState) -> dict:
        return {"messages": [await bound.ainvoke(context(state))]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", RunnableLambda(call, afunc=acall, name="agent"))
    builder.add_node("tools", ToolNode([calculator]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(name="react_agent")
