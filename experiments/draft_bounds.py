"""How far better pruning could take a drafter: its candidate trees replayed against the known greedy
continuation, pruned as shipped and by a clairvoyant pruner, speed modelled on this hardware's cost curve.

Every prompt is decoded once with AR (the greedy continuation) and run once through the target over prompt +
continuation (the top-k at every true position). Each method is then replayed without the model: greedy is
deterministic, so the replay engine accepts exactly what verification would, and hands every accepted node
its true top-k. Two pruners per method:

- shipped: the method as configured (its fixed budget, or budget=auto's pruner on the same cost curve);
- clairvoyant: the tree the method builds (at budget=auto it builds 60 nodes) cut to exactly the nodes the
  walk will accept: given the same tree, no pruner that cannot see the future verifies fewer nodes for as many
  tokens. (Over a run the trees differ a little, as drafters adapt to what was accepted.)

Speed is modelled: tokens over the summed cost(width) of the verifications, with the cost curve budget=auto
uses on this backend (cached; prefill and drafting left out); "x AR" divides by AR's one-token steps on the
same curve. `hf-prompt-lookup` is Hugging Face's candidate rule (the earliest earlier match of the last 2,
else 1 tokens, 10 tokens), which is PLD with max_ngram=2.

Fidelity: rejected nodes harvest nothing in the replay (a real run also learns their top-k), so drafters fed
by an adjacency table (GOOSE's branches, TR) replay a few percent below their real tau; drafters that harvest
nothing (PLD, suffix, REST) replay their real steps exactly. Methods must support budget=auto (tree drafters;
Lookahead's window needs the logits of rejected nodes).

    python experiments/draft_bounds.py [--methods goose@auto pld@auto goose@auto:run] [--n-prompts 10]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from baselines.pld import PromptLookupDrafter  # noqa: E402
from goose.backends import apply_backend, default_backend  # noqa: E402
from goose.benchmarks import LOADERS, load_prompts  # noqa: E402
from goose.budget import AutoBudget, CostCurve, cost_curve  # noqa: E402
from goose.decode import generate  # noqa: E402
from goose.drafter import Drafter  # noqa: E402
from goose.engine import Draft, Engine, Verification  # noqa: E402
from goose.errors import GooseError  # noqa: E402
from goose.methods import arm, build_drafters, method_names, parse_spec  # noqa: E402
from goose.models import identify_model, load_model, model_config, model_config_names, stop_ids  # noqa: E402
from goose.tree import TreeNodes  # noqa: E402

DEFAULT_METHODS = ("pld", "pld@auto", "tr", "suffix@auto", "goose@auto", "goose@auto:run")
TOPK = 10  # the top-k kept per true position: at least every replayed drafter's k


class ReplayEngine:
    """Engine.prefill/verify against a known greedy continuation `seq[len(prompt):]`, without the model."""

    profile = False
    device = torch.device("cpu")

    def __init__(self, seq: list[int], topk_ids: torch.Tensor, topk_scores: torch.Tensor):
        self.seq, self.ids, self.scores = seq, topk_ids, topk_scores
        self.n = 0  # committed tokens: seq[self.n] is what the target predicts after the last of them

    def truth(self, k: int) -> list[int]:
        return self.seq[self.n : self.n + k]

    def prefill(self, prompt: list[int], topk: int = 0, sampler=None) -> Verification:
        P = len(prompt)
        self.n = P + 1
        res = Verification(path=[0], bonus=self.seq[P], width=P)
        if topk:
            res.topk_ids, res.topk_scores = self.ids[:P, :topk], self.scores[:P, :topk]
        return res

    def verify(self, draft: Draft, topk: int = 0, sampler=None) -> Verification:
        path = accepted_path(draft.tokens, draft.parents, self.truth(len(draft.tokens)))
        at = self.n - 1 + torch.arange(len(path))  # the root sits at position n - 1
        self.n += len(path)
        res = Verification(path=path, bonus=self.seq[self.n - 1] if self.n - 1 < len(self.seq) else 0,
                           width=len(draft.tokens))
        if topk:  # rows of accepted nodes only; the path-only harvest reads no others
            res.topk_ids = torch.zeros(len(draft.tokens), topk, dtype=torch.long)
            res.topk_scores = torch.zeros(len(draft.tokens), topk)
            res.topk_ids[path], res.topk_scores[path] = self.ids[at, :topk], self.scores[at, :topk]
        return res


def accepted_path(tokens: list[int], parents: list[int], truth: list[int]) -> list[int]:
    """The greedy walk given the target's next tokens `truth`: root first, down the matching children."""
    children: dict[int, dict[int, int]] = {}
    for i in range(1, len(tokens)):
        if parents[i] >= 0:  # parent -1: visible context the walk never enters
            children.setdefault(parents[i], {})[tokens[i]] = i
    path = [0]
    for t in truth:
        nxt = children.get(path[-1], {}).get(t)
        if nxt is None:
            break
        path.append(nxt)
    return path


class Clairvoyant(AutoBudget):
    """Keeps exactly the nodes the walk will accept (it reads the replay's continuation)."""

    def __init__(self, cost: CostCurve, engine: ReplayEngine):
        super().__init__(cost)
        self.engine = engine

    def prune(self, nodes: TreeNodes) -> TreeNodes:
        path = accepted_path(nodes.tokens, nodes.parents, self.engine.truth(len(nodes)))
        self.chosen.append(len(path))
        return nodes.subset(path)


def harvest_accepted_only(drafter: Drafter) -> None:
    """The replay knows the top-k of true positions only: a drafter's adjacency harvest takes accepted nodes."""
    harvester = getattr(drafter, "harvester", None)
    if harvester is None:
        return

    def harvest(nodes: TreeNodes, result: Verification) -> None:
        if result.topk_ids is None:
            return
        prev = [nodes.root_prev, *(nodes.tokens[nodes.parents[i]] for i in result.path[1:])]
        harvester.table.harvest([nodes.tokens[i] for i in result.path], prev, result.topk_ids[result.path],
                      result.topk_scores[result.path])

    harvester.harvest = harvest


def replay(drafter: Drafter, cases: list, cost: CostCurve, pruner=None) -> dict:
    """Replay `drafter` over every case, in order (memory=run keeps its state across them)."""
    harvest_accepted_only(drafter)
    per: dict[str, list[float]] = {}
    for bench, prompt, out, stops, ids, scores in cases:
        engine = ReplayEngine(prompt + out, ids, scores)
        if pruner is not None:
            drafter.enable_auto_budget(pruner(cost, engine))
        g = generate(engine, prompt, drafter, len(out), stops)
        if g.tokens != out:
            raise GooseError(f"replay of {type(drafter).__name__} left the greedy continuation: a drafter that "
                             "reads more than token ids and accepted top-k cannot be replayed.")
        row = per.setdefault(bench, [0, 0, 0.0])
        row[0] += len(out) - 1
        row[1] += g.steps - 1
        row[2] += sum(cost(w) for w in g.widths)
    return per


def summary(per: dict, cost: CostCurve) -> tuple[float, float, str]:
    tokens, steps, secs = (sum(r[i] for r in per.values()) for i in range(3))
    speed = tokens / secs * cost(1) if secs else 1.0
    detail = ", ".join(f"{b} {r[0] / r[1]:.2f} / {r[0] / r[2] * cost(1):.2f}x" for b, r in per.items() if r[1])
    return tokens / steps if steps else 1.0, speed, detail


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m", choices=model_config_names())
    ap.add_argument("--model-path", default=None, help="for --model hf/gguf: the local folder or GGUF file")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"], choices=sorted(LOADERS))
    ap.add_argument("--n-prompts", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), help="NAME[@BUDGET][:MEMORY] specs")
    args = ap.parse_args()
    if args.n_prompts < 1 or args.max_new_tokens < 1:
        ap.error("--n-prompts and --max-new-tokens must be >= 1")
    try:
        unknown = [m for m in args.methods if parse_spec(m)[0] not in method_names()]
        if unknown:
            ap.error(f"--methods: unknown {', '.join(unknown)}; choose from {', '.join(method_names())}")
        extra = [f"model.path={args.model_path}"] if args.model_path else []
        built = build_drafters(args.methods, args.model, (), extra)
        for spec, (d, _) in built.items():
            if not d.capabilities.auto_budget:
                raise GooseError(f"{spec}: only methods that support budget=auto (tree drafters) can be replayed.")
        cfg = model_config(args.model, args.model_path)
        model, tok, device, dtype = load_model(cfg, "auto", "auto")
        backend = default_backend(device, dtype)
        model = apply_backend(model, backend) if backend != "eager" else model
        engine = Engine(model)
        cost = cost_curve(engine, identify_model(cfg), device, dtype)
        drafters = arm(built, lambda: cost, tok, cfg.name)
        stops = stop_ids(tok, model)
        prompts = [(b, tok(p.text).input_ids) for b in args.benchmarks for p in load_prompts(b)[: args.n_prompts]]
    except GooseError as e:
        ap.exit(2, f"error: {e}\n")
    print(f"{args.model} on {device}, engine.backend={backend}: {len(prompts)} prompts x {args.max_new_tokens} "
          "new tokens; AR continuations and top-k ...", flush=True)
    cases = []
    for bench, prompt in prompts:
        out = generate(engine, prompt, Drafter(), args.max_new_tokens, stops).tokens
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt + out], device=device)).logits[0].float().cpu()
        scores, ids = logits.topk(TOPK, dim=-1)
        cases.append((bench, list(prompt), out, stops, ids, scores))
    print("cost curve (ms, budget=auto's on this backend): "
          + ", ".join(f"T={w} {cost(w) * 1e3:.1f}" for w in (1, 2, 4, 8, 16, 32, 64)))
    print("| method | tau shipped | x AR shipped | tau clairvoyant | x AR clairvoyant | per benchmark "
          "(shipped tau / x AR) |\n|---|---|---|---|---|---|")
    hf = PromptLookupDrafter(max_ngram=2, min_ngram=1, num_tokens=10)
    rows = [("hf-prompt-lookup", hf, PromptLookupDrafter(max_ngram=2, min_ngram=1, num_tokens=10))]
    rows += [(spec, d, built_again(spec, args.model, extra, tok, cfg.name)) for spec, d in drafters.items()]
    for name, shipped, blank in rows:
        tau, speed, detail = summary(replay(shipped, cases, cost), cost)
        c_tau, c_speed, _ = summary(replay(blank, cases, cost, Clairvoyant), cost)
        print(f"| {name} | {tau:.2f} | {speed:.2f} | {c_tau:.2f} | {c_speed:.2f} | {detail} |", flush=True)


def built_again(spec: str, model: str, extra: list[str], tokenizer, model_name: str) -> Drafter:
    """A second drafter of `spec` for the clairvoyant replay (nothing carried over from the shipped one)."""
    drafter = next(iter(build_drafters([spec], model, (), extra).values()))[0]
    if drafter.capabilities.tokenizer_bound:
        drafter.bind_tokenizer(tokenizer, model_name)
    return drafter


if __name__ == "__main__":
    main()
