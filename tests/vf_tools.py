"""A verifiers v1 taskset whose task declares a tool server (``Task.toolsets``: an MCP ``Toolset``), which the
adapter refuses. Loaded as ``verifiers:vf_tools``."""

import verifiers.v1 as vf


class Echo(vf.Toolset):
    @vf.tool
    async def echo(self, text: str) -> str:
        """Echo the text."""
        return text


class ToolTask(vf.Task[vf.TaskData]):
    @classmethod
    def toolsets(cls, config):
        return [Echo(vf.ToolsetConfig())]


class ToolTaskset(vf.Taskset[ToolTask, vf.TasksetConfig]):
    def load(self):
        return [ToolTask(vf.TaskData(prompt="Echo hi."), self.config.task)]


__all__ = ["ToolTaskset"]
