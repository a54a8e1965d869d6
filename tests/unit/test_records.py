"""The persisted domain models are declared once: the meta state, the search state and the Harness-S and
CoEvo-RSI models the nodes return are ``coevo.records``' classes themselves, so what a node puts in the
state is what the archive stores (the layer contracts in pyproject.toml keep ``coevo.records`` low and
the archive out of nodes and graphs)."""

from coevo import records
from coevo.graphs.coevo_rsi.state import CoevoRsiState
from coevo.graphs.harness_s.state import HarnessSState
from coevo.meta import inheritance, pool, search, state


def test_the_state_carries_the_persisted_classes_themselves():
    assert state.GateDecision is records.GateDecision and search.Phase is records.Phase
    assert pool.PoolMember is records.PoolMember and pool.Profile is records.Profile and pool.Ballot is records.Ballot
    assert inheritance.Promotion is records.Promotion and inheritance.BaseChoice is records.BaseChoice
    models = set(state.state_models([state.MetaState, search.SearchState, HarnessSState, CoevoRsiState]))
    assert {records.GateDecision, records.GatePair, records.Phase, records.PoolMember, records.Profile,
            records.ModelProposal, records.Promotion, records.PairScore} <= models
