"""Rank-1 inference as an app-ready graph (Harness-S Eq. 12)::

    START -> route (the router ranks the pool for this task, H0 included) -> the Rank-1 sibling's
             harness graph (a subgraph per sibling) -> END

``build_routed_graph(pool, router, model, episode)`` builds it for one episode (like
``build_harness_graph``); ``load_router`` (``coevo.app.bundle``) reads what
``coevo archive export-router RUN_ID`` wrote. The module-level ``graph`` is a demo for Studio:
the demo harness and a variant that answers tersely, routed by the offline Rule Router.
"""

from __future__ import annotations

from typing import Mapping

from langchain_core.language_models import BaseChatModel
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from coevo.aio import run_sync
from coevo.compat import node
from coevo.envs.base import Episode
from coevo.graphs.harness_s.router import Router
from coevo.harnesses.runtime import build_harness_graph
from coevo.harnesses.spec import HarnessSpec
from coevo.harnesses.state import HarnessState


class RoutedState(HarnessState, total=False):
    """The harness state plus ``harness``: the id of the sibling the router chose (replaced by ``route``)."""

    harness: str


def branch(harness_id: str) -> str:
    """The node name of the sibling ``harness_id``'s subgraph."""
    return f"harness_{harness_id[:12]}"


def build_routed_graph(pool: Mapping[str, HarnessSpec], router: Router, model: BaseChatModel, episode: Episode,
                       seed: int = 0) -> CompiledStateGraph:
    """Compile the routed graph of one episode: ``route`` asks ``router`` for its ranking of the
    pool (H0 included, Eq. 12) on the episode's task (or the input ``task`` text) and goes to the
    Rank-1 sibling's harness graph (``build_harness_graph(pool[id], model, episode, seed)``, a
    subgraph). Input ``{"task": str}`` (optional); output: ``RoutedState`` with ``answer`` and
    ``harness``. Works with ``invoke`` and ``ainvoke``. Raises ``ValueError`` when the router's pool
    names a harness ``pool`` lacks."""
    missing = [h for h in router.pool if h not in pool]
    if missing:
        raise ValueError(f"the router ranks harnesses the pool lacks: {[h[:12] for h in missing]}; pass every "
                         "sibling's spec (coevo.app.bundle.load_router returns both)")

    async def aroute(state: RoutedState) -> Command:
        prompt = state.get("task") or episode.task.prompt
        task = episode.task.model_copy(update={"prompt": prompt})
        chosen = (await router.rank(task, include_h0=True, purpose="app"))[0]
        return Command(goto=branch(chosen), update={"harness": chosen, "task": prompt})

    def route(state: RoutedState) -> Command:
        return run_sync(aroute(state))

    route.__name__ = "route"
    builder = StateGraph(RoutedState)
    builder.add_node("route", node(route, aroute), destinations=tuple(branch(h) for h in router.pool))
    for h in router.pool:
        builder.add_node(branch(h), build_harness_graph(pool[h], model, episode, seed))
    builder.add_edge(START, "route")
    return builder.compile(name="harness_s_routed")


def _demo() -> CompiledStateGraph:
    from coevo.graphs.demo import CALCULATOR, DEMO_SPEC, DEMO_TASK, demo_model
    from coevo.meta.pool import Profile
    from coevo.roles.voter import RuleVoter

    terse = DEMO_SPEC.model_copy(update={"prompt": DEMO_SPEC.prompt.model_copy(
        update={"system": DEMO_SPEC.prompt.system + " Answer tersely."})})
    pool = {DEMO_SPEC.id: DEMO_SPEC, terse.id: terse}
    profiles = {h: Profile(harness_id=h, checkpoint_id="demo", val_success=0.5 + 0.1 * (h == terse.id)) for h in pool}
    router = Router([RuleVoter()], profiles, {}, DEMO_SPEC.id)
    return build_routed_graph(pool, router, demo_model(), Episode(task=DEMO_TASK, tools=[CALCULATOR]))


graph = _demo()
