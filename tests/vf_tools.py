"""A tool-using verifiers v1 taskset package, offline: each task asks for a product and its task declares a
tool server (``Task.toolsets``: an MCP ``Toolset`` with a ``multiply`` tool) whose calls count on the rollout
state; the reward checks the last reply against the product, a metric reads the state's call count.
Loaded as ``verifiers:vf_tools``."""

import verifiers.v1 as vf


class CalcState(vf.State):
    calls: int = 0


class Calc(vf.Toolset[vf.ToolsetConfig, CalcState]):
    @vf.tool
    async def multiply(self, a: int, b: int) -> int:
        """Multiply two integers."""
        self.state.calls += 1
        return a * b


class ProductData(vf.TaskData):
    answer: int


class ProductTask(vf.Task[ProductData, CalcState]):
    @classmethod
    def toolsets(cls, config):
        return [Calc(vf.ToolsetConfig())]

    @vf.reward
    async def right(self, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == str(self.data.answer))

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(trace.state.calls)


class ProductTaskset(vf.Taskset[ProductTask, vf.TasksetConfig]):
    def load(self):
        pairs = [(17, 23), (31, 29), (12, 12), (41, 7)]
        return [ProductTask(ProductData(prompt=f"What is {a} * {b}? Use the tool.", answer=a * b), self.config.task)
                for a, b in pairs]


__all__ = ["ProductTaskset"]
