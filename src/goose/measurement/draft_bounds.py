"""How far better pruning could take a drafter: its candidate trees replayed against the known greedy
continuation, pruned as shipped and by a clairvoyant pruner, speed modelled on this hardware's cost curve.

Every prompt is decoded once with AR (the greedy continuation) and run once through the target over prompt +
continuation (the top-k at every true position). Each method is then replayed without the model: greedy is
deterministic, so the replay engine accepts exactly what verification would, and hands every accepted node
its true top-k. Greedy only. Three pruners per method:

- shipped: the method as configured (its fixed budget, or budget=auto's pruner on the same cost curve);
- foreseeing long runs (methods under budget=auto): the shipped pruner, told which steps the walk will accept
  8 or more drafted nodes in, verifies that path too in those steps. Long runs (a loop, a quoted span) are
  where a pruner loses most tokens; this says what telling them apart in advance would buy at most;
- clairvoyant: the tree the method builds (under budget=auto, as large as it builds before pruning) cut to
  exactly the nodes the walk will accept, each step costed at the cheapest width at least that large (a
  cost curve need not rise: 4 nodes may cost less than 1, and padding is free). Given the same tree, no
  pruner that cannot see the future verifies as cheaply for as many tokens. Over a run the trees differ a
  little, as drafters adapt to what was accepted.

tau is the project's (tokens per target forward, prefill included). Speed is modelled: new tokens over the
summed cost(width, context) of the verifications, with the cost curve budget=auto uses on this backend
(cached; measured after 256 and 1024 tokens of context, linear in between and beyond; prefill and drafting
left out); "x AR" divides by AR's one-token steps on the same curve, each at its context. The copy split
says how many of the tokens were drafted and accepted where the 4-gram they end was already in the answer
(the model repeating itself, which flatters copying methods on long answers), only in the prompt, or neither.
`hf-prompt-lookup` is Hugging Face's candidate rule (the earliest earlier match of the last 2, else 1
tokens, 10 tokens), which is PLD with max_ngram=2. Prompts as bench.py takes them: the first N of each
benchmark (MT-Bench and Spec-Bench: first turns).

Fidelity: drafters that harvest nothing (PLD, SuffixDecoding, REST) replay their real steps exactly. Rejected
nodes harvest nothing in the replay (a real run also learns their top-k), so drafters fed by an adjacency
table (GOOSE's branches, TR) replay with a sparser table: their tau and their tree sizes both differ from a
real run's, and their modelled speed may come out higher or lower. Methods must support budget=auto (tree
drafters; Lookahead's window needs the logits of rejected nodes). For goose-no-continuation, whose walk may
not enter every tree link, the clairvoyant cut keeps the tree's path, which the walk may take only in part.

`--real` also decodes each method on the model itself (every tree verified, every verified node harvested, as
in a run) and costs its steps on the same curve: the shipped pruner's tau and x AR without the replay's
sparser table (slower: one real decode per method).

`--cost-ms W:MS ...` replaces the measured curve with a hypothetical one (linear between the points given, as
budget=auto reads any curve): what a faster kernel would buy each method, budget=auto pruning for it too.

    python -m goose.measurement.draft_bounds [--methods goose@auto pld@auto goose@auto:run] [--n-prompts 10]
    python -m goose.measurement.draft_bounds --methods goose@auto --cost-ms 1:36 16:36 32:70   # verification free to 16
"""

from __future__ import annotations

import argparse
import math
import sys
from functools import partial

import torch
from tqdm import tqdm

from goose.baselines.pld import PromptLookupDrafter
from goose.benchmarks.prompts import benchmark_names, load_prompts
from goose.drafting.budget import AutoBudget, CostCurve, cost_curve
from goose.drafting.contract import Drafter
from goose.drafting.tree import TreeNodes
from goose.engine.backends import apply_backend, default_backend
from goose.engine.draft import Draft, Verification, walk
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.models.loading import identify_model, load_model, model_config, model_config_names, stop_ids
from goose.paths import REPO_ROOT
from goose.running.loop import BONUS, generate
from goose.running.registry import arm, build_drafters, method_names, parse_spec
from goose.storage.metrics import SPLIT_N, copy_split

ROOT = REPO_ROOT

DEFAULT_METHODS = ("pld@60", "pld@auto", "suffix@auto", "goose@16", "goose@auto", "goose@auto:run", "spine-only@auto")


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
        greedy_only(sampler)
        P = len(prompt)
        self.n = P + 1
        res = Verification(path=[0], bonus=self.seq[P], width=P)
        if topk:
            res.topk_ids, res.topk_scores = self.ids[:P, :topk], self.scores[:P, :topk]
        return res

    def verify(self, draft: Draft, topk: int = 0, sampler=None) -> Verification:
        greedy_only(sampler)
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


def greedy_only(sampler) -> None:
    if sampler is not None:
        raise GooseError("the replay knows the greedy continuation only: it cannot replay sampling.")


def accepted_path(tokens: list[int], parents: list[int], truth: list[int]) -> list[int]:
    """The engine's walk with the target's next tokens `truth` as its choices: it asks once per node on the
    path, in order, so the k-th node is followed by truth[k] (nodes with parent -1 are never entered)."""
    choices = iter(truth)
    return walk(parents, tokens, lambda node: next(choices, -1))


class Clairvoyant(AutoBudget):
    """Keeps exactly the nodes the walk will accept (it reads the replay's continuation); `padded` costs its
    steps."""

    def __init__(self, cost: CostCurve, engine: ReplayEngine):
        super().__init__(cost)
        self.engine = engine

    def prune(self, nodes: TreeNodes) -> TreeNodes:
        path = accepted_path(nodes.tokens, nodes.parents, self.engine.truth(len(nodes)))
        self.chosen.append(len(path))
        return nodes.subset(path)

    @staticmethod
    def padded(cost: CostCurve) -> CostCurve:
        """cost(w) lowered to the cheapest cost of any width >= w (at each context measured): a clairvoyant
        pruner pads for free."""
        widths = list(range(1, cost.widths[-1] + 1))
        rows = []
        for c in cost.contexts:
            seconds = [cost(w, c) for w in widths]
            for i in range(len(seconds) - 2, -1, -1):
                seconds[i] = min(seconds[i], seconds[i + 1])
            rows.append(seconds)
        return CostCurve(widths, rows[0], cost.contexts, rows)


LONG_RUN = 8  # a step whose walk takes this many drafted nodes or more is a long run (a loop, a quoted span)


class Foresighted(AutoBudget):
    """The shipped pruner, told in advance which steps are long runs: in those it verifies the path the walk
    will take besides what it chose. What estimates that could tell a run that will hold from one that will
    break would buy at most, on top of the shipped pruner."""

    def __init__(self, cost: CostCurve, engine: ReplayEngine):
        super().__init__(cost)
        self.engine = engine

    def choose(self, nodes: TreeNodes, order: list[int], value: list[float]) -> list[int]:
        keep = super().choose(nodes, order, value)
        path = accepted_path(nodes.tokens, nodes.parents, self.engine.truth(len(nodes)))
        return sorted(set(keep) | set(path)) if len(path) - 1 >= LONG_RUN else keep


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




def replay(drafter: Drafter, cases: list, cost: CostCurve, clairvoyant: bool = False,
           foresighted: bool = False, real: Engine | None = None) -> dict:
    """Replay `drafter` over every case, in order (memory=run keeps its state across them), pruned as shipped,
    by the clairvoyant pruner, or by the shipped one foreseeing long runs (`Foresighted`); or, given the `real`
    engine, decode on it (every verified node harvested, as in a run), and refuse a continuation that differs
    from AR's. Per benchmark:
    [tokens, target forwards incl. prefill, modelled seconds of the verifications, prompts, modelled seconds of
    AR's steps, accepted drafted tokens repeating the answer, from the prompt, neither (copy_split)]. Each
    verification is costed at its context (the prompt and the tokens committed before it)."""
    if real is None:
        harvest_accepted_only(drafter)
    paid = Clairvoyant.padded(cost) if clairvoyant else cost
    per: dict[str, list[float]] = {}
    for bench, prompt, out, stops, ids, scores in cases:
        engine = real or ReplayEngine(prompt + out, ids, scores)
        if clairvoyant or foresighted:
            drafter.enable_auto_budget((Clairvoyant if clairvoyant else Foresighted)(cost, engine))
        g = generate(engine, prompt, drafter, len(out), stops)
        if g.tokens != out:
            raise GooseError(f"{bench}: {type(drafter).__name__} decoded other tokens than AR: not lossless.")
        row = per.setdefault(bench, [0, 0, 0.0, 0, 0.0, 0, 0, 0])
        row[0] += len(g.tokens)
        row[1] += g.steps
        ends = [j + 1 for j, o in enumerate(g.origins) if o == BONUS] or [0]  # tokens committed after each step
        contexts = [len(prompt) + ends[min(k, len(ends) - 1)] for k in range(len(g.widths))]
        row[2] += sum(paid(w, c) for w, c in zip(g.widths, contexts))
        row[3] += 1
        row[4] += sum(cost(1, len(prompt) + j) for j in range(1, len(g.tokens)))  # AR: one token a step
        for k, c in enumerate(copy_split(prompt, g.tokens, [o != BONUS for o in g.origins])):
            row[5 + k] += c
    return per


def summary(per: dict, cost: CostCurve) -> tuple[float, float, str, str]:
    """(tau, modelled x AR, per benchmark, the copy split in % of all tokens): AR verifies every token after the
    prefill's at cost(1) (at its context)."""

    def rates(tokens, steps, secs, prompts, ar_secs, *_):
        return tokens / steps, ar_secs / secs if secs else 1.0

    total = [sum(r[i] for r in per.values()) for i in range(8)]
    tau, speed = rates(*total)
    detail = ", ".join("{} {:.2f} / {:.2f}x".format(b, *rates(*r)) for b, r in per.items())
    split = " / ".join(f"{100 * c / total[0]:.0f}" for c in total[5:])
    return tau, speed, detail, split


class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The docstring as written, and every option's default."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.draft_bounds", description=__doc__,
                                 formatter_class=Help)
    ap.add_argument("--model", default="smollm2-135m", choices=model_config_names(), help="a conf/model config")
    ap.add_argument("--model-path", default=None, help="for --model hf/gguf: the local folder or GGUF file")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"], choices=benchmark_names(),
                    help="first turns")
    ap.add_argument("--n-prompts", type=int, default=10, help="the first N prompts of each benchmark")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="per prompt")
    ap.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), help="NAME[@BUDGET][:MEMORY] specs")
    ap.add_argument("--cost-ms", nargs="+", default=None, metavar="W:MS",
                    help="a hypothetical cost curve instead of the measured one: ms per verification of W nodes")
    ap.add_argument("--real", action="store_true",
                    help="also decode each method for real (the model verifies every tree, every verified node "
                         "is harvested) and cost its steps on the same curve: tau and x AR free of the replay's "
                         "sparser adjacency table")
    args = ap.parse_args(argv)
    if args.model in ("hf", "gguf") and not args.model_path:
        ap.error(f"--model {args.model} needs --model-path: a local model folder (hf) or a .gguf file (gguf)")
    if args.n_prompts < 1 or args.max_new_tokens < 1:
        ap.error("--n-prompts and --max-new-tokens must be >= 1")
    args.given = parse_cost(args.cost_ms, ap.error) if args.cost_ms else None
    try:
        unknown = [m for m in args.methods if parse_spec(m)[0] not in method_names()]
    except GooseError as e:
        ap.error(f"--methods: {e}")
    if unknown:
        ap.error(f"--methods: unknown {', '.join(unknown)}; choose from {', '.join(method_names())}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    given = args.given
    try:
        extra = [f"model.path={args.model_path}"] if args.model_path else []
        built = build_drafters(args.methods, args.model, (), extra)
        for spec, (d, _) in built.items():
            if not d.capabilities.auto_budget:
                raise GooseError(f"{spec}: only methods that support budget=auto (tree drafters) can be replayed.")
        texts = [(b, p.id, p.text) for b in args.benchmarks for p in load_prompts(b)[: args.n_prompts]]  # 1st turns
        cfg = model_config(args.model, args.model_path)
        model, tok, device, dtype = load_model(cfg, "auto", "auto")
        backend = default_backend(device, dtype)
        model = apply_backend(model, backend) if backend != "eager" else model
        engine = Engine(model)
        cost = given or cost_curve(engine, identify_model(cfg), device, dtype)
        drafters = arm(built, lambda: cost, tok, cfg.name)
        stops = stop_ids(tok, model)
        prompts = []
        for b, pid, text in texts:
            ids = tok(text).input_ids
            if engine.max_positions and len(ids) + args.max_new_tokens > engine.max_positions:
                raise GooseError(f"{b} prompt '{pid}' has {len(ids)} tokens: with --max-new-tokens "
                                 f"{args.max_new_tokens} it exceeds the model's context of {engine.max_positions}.")
            prompts.append((b, ids))
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{args.model} on {device}, engine.backend={backend}: {len(prompts)} prompts x {args.max_new_tokens} "
          "new tokens; AR continuations and top-k ...", flush=True)
    topk = max([10, *(d.capabilities.topk for d in drafters.values())])  # every replayed drafter's k
    cases = []
    for bench, prompt in tqdm(prompts, desc="AR continuations", unit="prompt", file=sys.stderr, leave=False):
        out = generate(engine, prompt, Drafter(), args.max_new_tokens, stops).tokens
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt + out], device=device)).logits[0].float().cpu()
        scores, ids = logits.topk(topk, dim=-1)
        cases.append((bench, list(prompt), out, stops, ids, scores))
    print("cost curve (ms, " + ("hypothetical, from --cost-ms" if given else "budget=auto's on this backend") + "): "
          + ", ".join(f"T={w} {cost(w) * 1e3:.1f}" for w in (1, 2, 4, 8, 16, 32, 64)))
    print(f"| method | tau shipped | x AR shipped | x AR, runs of {LONG_RUN}+ foreseen | tau clairvoyant | x AR "
          f"clairvoyant | % of tokens drafted and accepted: repeating the answer / from the prompt / neither "
          f"({SPLIT_N}-grams, shipped; the rest are bonus tokens) | per benchmark (shipped tau / x AR) |"
          + (" tau real run | x AR real run |" if args.real else "")
          + "\n|---|---|---|---|---|---|---|---|" + ("---|---|" if args.real else ""))
    # The other pruners' replays (and real runs) use drafters of their own: nothing carried over from the shipped.
    clairvoyant, foreseeing, real_run = (arm(build_drafters(args.methods, args.model, (), extra), lambda: cost, tok,
                                             cfg.name) for _ in range(3))
    hf = partial(PromptLookupDrafter, max_ngram=2, min_ngram=1, num_tokens=10)
    rows = [("hf-prompt-lookup", hf(), hf(), None, hf()),
            *((spec, d, clairvoyant[spec], foreseeing[spec] if getattr(d, "auto", None) is not None else None,
               real_run[spec]) for spec, d in drafters.items())]
    for name, shipped, blank, foresighted, fresh in tqdm(rows, desc="methods", unit="method", file=sys.stderr,
                                                          leave=False):
        tau, speed, detail, split = summary(replay(shipped, cases, cost), cost)
        c_tau, c_speed, *_ = summary(replay(blank, cases, cost, clairvoyant=True), cost)
        f_speed = f"{summary(replay(foresighted, cases, cost, foresighted=True), cost)[1]:.2f}" if foresighted else "-"
        real = ""
        if args.real:
            r_tau, r_speed, *_ = summary(replay(fresh, cases, cost, real=engine), cost)
            real = f" {r_tau:.2f} | {r_speed:.2f} |"
        print(f"| {name} | {tau:.2f} | {speed:.2f} | {f_speed} | {c_tau:.2f} | {c_speed:.2f} | {split} | {detail} |"
              + real, flush=True)


def parse_cost(points: list[str], error) -> CostCurve:
    """`W:MS` points (distinct widths >= 1, ms > 0) as a CostCurve in seconds; `error` reports bad input."""
    widths, seconds = [], []
    for point in points:
        try:
            w, ms = point.split(":")
            widths.append(int(w))
            seconds.append(float(ms) / 1e3)
        except ValueError:
            error(f"--cost-ms: '{point}' is not W:MS (nodes:milliseconds), e.g. 16:36.5")
        if widths[-1] < 1 or not (0 < seconds[-1] < math.inf):
            error(f"--cost-ms: '{point}' needs a width >= 1 and a cost > 0 ms")
    if len(set(widths)) != len(widths):
        error("--cost-ms: each width once")
    return CostCurve(widths, seconds)


if __name__ == "__main__":
    main()
