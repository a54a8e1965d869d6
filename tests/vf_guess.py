"""A multi-turn verifiers v1 taskset package with its own ``Env``, in the shape of verifiers' TextArena games,
offline: the env's ``run`` plays a number-guessing game through ``agents.player.interaction(task)``, answering
each guess with "higher" or "lower" until it is right or five guesses are spent, and records the game's reward.
An infinite taskset. Loaded as ``verifiers:vf_guess``."""

import re

import verifiers.v1 as vf


class GuessData(vf.TaskData):
    info: dict


class GuessTask(vf.Task[GuessData, vf.State, vf.TaskConfig]):
    pass


class GuessEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class GuessEnv(vf.Env[GuessEnvConfig]):
    async def run(self, task, agents):
        secret, won = task.data.info["secret"], 0.0
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn()
            for guesses in range(1, 6):
                if segment.terminated:
                    break
                guess = re.findall(r"\d+", segment.last_reply)
                if guess and int(guess[-1]) == secret:
                    won = 1.0
                    break
                if guesses == 5:
                    break
                segment = await interaction.turn("higher" if guess and int(guess[-1]) < secret else "lower")
        interaction.trace.record_reward("won", won, 1.0)


class GuessTaskset(vf.Taskset[GuessTask, vf.TasksetConfig]):
    INFINITE = True

    def load(self):
        i = 0
        while True:
            yield GuessTask(GuessData(prompt=f"Game {i}: guess my number from 1 to 10.", info={"secret": 1 + i % 10}),
                            self.config.task)
            i += 1


__all__ = ["GuessEnv", "GuessTaskset"]
