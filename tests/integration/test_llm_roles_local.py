"""One VACE round whose LLM curator and editor are the local SmolLM2-135M decoding under their reply
schemas (``meta.model = "local:smollm2-135m"``, llguidance in the local engine): every reply parses,
and the editor's patches (decoded under ``patch_schema`` of the incumbent) are applied, checked and
gated. A proposal may still be rejected by a check, with its reason; the counts are asserted as
they are, not as one would like them."""

from __future__ import annotations

import asyncio
import json

import pytest
from model_kit import needs_smollm2

from coevo.app.run import run_meta
from coevo.config import RunConfig
from coevo.records import EditRecord, GateDecision, LLMCallRecord, RunRecord
from coevo.roles.curator import CuratorReply
from coevo.roles.editor import EditReply
from coevo.storage import Archive

pytestmark = [
    pytest.mark.integration,
    needs_smollm2(),
]


def test_a_vace_round_with_the_local_model_as_curator_and_editor_under_constrained_decoding(tmp_path):
    config = RunConfig(
        rounds=1, db=str(tmp_path / "run.db"), out_dir=str(tmp_path),
        env={"ref": "reasoning_gym:families=chain_sum,size=200,seed=0,chain_sum.max_terms=2,chain_sum.max_digits=1,"
                    "reward=partial", "reward": "partial", "n_train": 4, "n_val": 2, "n_test": 0},
        train={"steps": 1, "tasks_per_step": 2, "num_generations": 2, "max_new_tokens": 24},
        meta={"model": "local:smollm2-135m", "temperature": 0.0, "candidates": 1, "min_failed_tasks": 1,
              "smoke_tasks": 1, "local_check": False},
    )
    state = asyncio.run(run_meta(config, run_id="llm-local"))
    archive = Archive(config.db)
    assert archive.get(RunRecord, "llm-local").status == "done"

    curator = archive.list(LLMCallRecord, run_id="llm-local", role="curator")
    editor = archive.list(LLMCallRecord, run_id="llm-local", role="editor")
    assert len(curator) == 1 and editor  # one curation; one editor call per direction (plus any revision)
    for call, schema in [(c, CuratorReply) for c in curator] + [(c, EditReply) for c in editor]:
        assert call.model == "local:smollm2-135m" and call.output_tokens > 0
        schema.model_validate(json.loads(call.response["content"]))  # every reply parses at the first try

    edits = archive.list(EditRecord, run_id="llm-local")
    applied = [e for e in edits if e.child_id]
    rejected = [e for e in edits if e.status == "rejected"]
    assert applied, [e.reason for e in edits]
    assert all(e.reason for e in rejected)  # a rejection says why
    (decision,) = archive.list(GateDecision, run_id="llm-local")
    assert decision.pairs and decision.incumbent_id == state["start_harness"]
    gated = {e.child_id for e in applied if e.status != "rejected"}
    assert decision.candidate_id in gated | {decision.incumbent_id}
    print(f"curator calls {len(curator)}, editor calls {len(editor)}, edits {len(edits)}, applied {len(applied)}, "
          f"rejected {len(rejected)}, gate accepted={decision.accepted} b={decision.b:.3f} c={decision.c:.3f}; "
          "role calls (s, in/out tokens): " + ", ".join(f"{c.role} {c.latency_s:.1f} {c.input_tokens}/{c.output_tokens}"
                                                     for c in curator + editor))
