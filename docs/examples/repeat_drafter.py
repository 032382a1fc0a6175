"""An example drafter (docs/adding.md): it guesses that the last token repeats. One file plus one YAML
(method/repeat.yaml); run it with  python run.py hydra.searchpath=[file://$PWD/docs/examples] method=repeat"""

from dataclasses import dataclass

from goose.drafting.contract import budget_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes

REPEAT = Source("repeat")  # how its nodes are labelled: rows get repeat_drafted, repeat_accepted, repeat_rate


@dataclass(frozen=True)
class RepeatConfig:
    length: int = 4  # the method's hyperparameter, its default here
    budget: int = budget_setting(60)  # nodes per draft, set from the top-level budget=...


class RepeatDrafter(TreeDrafter):
    name = "repeat"
    Config = RepeatConfig
    sources = (REPEAT,)

    def propose(self, context):  # token ids so far; node 0 of the draft is the last one
        nodes = TreeNodes(context[-1])
        for i in range(min(self.config.length, self.config.budget - 1)):
            nodes.add(i, context[-1], REPEAT)  # (parent index, token, source)
        return self.finish(nodes)  # budget=auto prunes here
