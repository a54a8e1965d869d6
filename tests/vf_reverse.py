"""A single-turn verifiers v1 taskset package (what ``prime env init`` makes: a module exporting its ``Taskset``
through ``__all__``), in the shape of verifiers' own ``reverse-text`` example, offline: reverse a word inside
``<reversed>`` tags, an LCS-ratio reward, a ``@vf.stop`` after one turn; the gold reversal is task data. Its
config's ``split`` picks the rows (``train``; ``test``: held-out words, one repeating a train word; ``empty``).
tests/ is on the test path, so the adapter loads it as ``verifiers:vf_reverse``."""

import re
from difflib import SequenceMatcher
from typing import Literal

import verifiers.v1 as vf

TRAIN_WORDS = ["plum", "apple", "mango", "lemon", "fig", "pear", "kiwi", "lime"]
TEST_WORDS = ["grape", "melon", "peach", "cherry", "apple"]  # "apple" repeats a train row
_TAG = re.compile(r"<reversed>(.*?)</reversed>", re.DOTALL)


class ReverseData(vf.TaskData):
    answer: str


class ReverseTask(vf.Task[ReverseData]):
    @vf.stop
    async def single_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def lcs(self, trace: vf.Trace) -> float:
        match = _TAG.search(trace.last_reply or "")
        return SequenceMatcher(None, match.group(1).strip() if match else "", self.data.answer).ratio()

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class ReverseConfig(vf.TasksetConfig):
    split: Literal["train", "test", "empty"] = "train"


class ReverseTaskset(vf.Taskset[ReverseTask, ReverseConfig]):
    def load(self) -> list[ReverseTask]:
        words = {"train": TRAIN_WORDS, "test": TEST_WORDS, "empty": []}[self.config.split]
        return [ReverseTask(ReverseData(prompt=f"Reverse the word: {w}", answer=w[::-1],
                                        system_prompt="Put your answer in <reversed> tags."), self.config.task)
                for w in words]


__all__ = ["ReverseTaskset"]
