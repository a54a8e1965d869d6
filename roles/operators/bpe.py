"""The BPE settings operator (``/bpe``): EvoHarness-RL's harness state is a component the meta-loop
may edit like any other ("Learning Runtime Harness Coordination for Self-Evolving Agents",
arXiv:2608.05446). It applies only to a spec that has ``bpe`` (``Operator.needs``), so a spec without BPE state
is offered exactly the operators, in exactly the order, it was before.

Its variants (coevo's choice; the abstract fixes no settings) read the direction's causes as context
pressure (``truncated:``, ``no_answer:budget:context_tokens``) or not:

- render: ``always`` -> ``on_read`` under pressure (the state leaves the context until read);
  ``on_read`` -> ``always`` otherwise (a policy that fails without reading its state sees it);
- ``max_experience``: halved (at least 2) under pressure, doubled (at most 64) otherwise;
- the ``bpe_read`` cost: doubled (at most 1) under pressure, halved otherwise (cheaper reads, so
  cost-aware GRPO does not teach the policy to stop reading).

A setting the step would move the wrong way (a cap of 1 under pressure, one above 64 otherwise, a
read cost above 1 under pressure) is not a variant.
"""

from __future__ import annotations

import random

from coevo.roles.operators.base import Edit, Material, operator

PRESSURE = ("truncated:", "no_answer:budget:context_tokens")
"""Cause prefixes that say the context is too full."""


@operator("bpe_settings", "bpe", ("no_answer", "loop:", "wrong_answer", "value:", "truncated:"),
          ("/bpe/render", "/bpe/max_experience", "/bpe/costs/read"), needs=lambda spec: spec.bpe is not None)
def bpe_settings(m: Material, rng: random.Random) -> Edit | None:
    """One of the BPE setting steps of the module doc that changes something, chosen by ``rng``."""
    bpe = m.spec.bpe
    if bpe is None:
        return None
    full = any(k.startswith(PRESSURE) for k in m.kinds)
    render = "on_read" if full else "always"
    cap = max(bpe.max_experience // 2, 2) if full else min(bpe.max_experience * 2, 64)
    read = min(bpe.costs.read * 2, 1.0) if full else round(bpe.costs.read / 2, 4)
    moves = [("/bpe/render", "BPE state rendered", bpe.render, render, render != bpe.render),
             ("/bpe/max_experience", "experience cap", bpe.max_experience, cap,
              cap < bpe.max_experience if full else cap > bpe.max_experience),
             ("/bpe/costs/read", "bpe_read cost", bpe.costs.read, read,
              read > bpe.costs.read if full else read < bpe.costs.read)]  # never the wrong way (module doc)
    steps = [Edit([{"op": "replace", "path": path, "value": new}], f"{what} {now} -> {new}")
             for path, what, now, new, ahead in moves if ahead]
    return rng.choice(steps) if steps else None
