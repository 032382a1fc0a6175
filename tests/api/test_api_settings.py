"""A Drafter instance given to goose.generate / goose.make_method drafts with its own Config: a budget or memory
passed beside it that differs from the instance's is refused in one line (the setting, both values, the fix), never
drafted as another configuration than the one asked for; the same value, or none, is taken."""

import pytest

import goose
from goose.errors import GooseError
from goose.methods.goose import GooseDrafter

TEXT = "abcabcabd abcabcabd abcabcab"


@pytest.fixture(scope="module")
def model(tiny_folder):
    return goose.load(str(tiny_folder), quiet=True)


def one_line(call, *says):
    with pytest.raises(GooseError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg and all(s in msg for s in says), msg
    return msg


def test_a_budget_beside_a_drafter_instance_that_differs_from_its_own_is_refused(model):
    """budget=5 beside a budget-60 instance drafted 60-node trees (its own budget), with nothing said."""
    ids = model.tokenizer(TEXT).input_ids
    for call in (lambda: goose.generate(model, ids, method=GooseDrafter(), budget=5, max_new_tokens=8),
                 lambda: goose.make_method(model, GooseDrafter(), budget=5)):
        msg = one_line(call, "budget=5", "budget=60", "GooseDrafter")
        assert "build the drafter with it" in msg and "method='goose', budget=5" in msg
    # the instance's own budget, given or not, is taken; and it drafts as the method by name does
    by_name = goose.generate(model, ids, method="goose", budget=5, max_new_tokens=24)
    for kwargs in ({"budget": 5}, {}):
        out = goose.generate(model, ids, method=GooseDrafter(budget=5), max_new_tokens=24, **kwargs)
        assert (out.tokens, out.steps, out.stats) == (by_name.tokens, by_name.steps, by_name.stats)
    # budget="auto" arms pruning on the instance (its budget the most it builds), as before
    auto = GooseDrafter(budget=5)
    goose.generate(model, ids, method=auto, budget="auto", max_new_tokens=8)
    assert auto.auto_budget_enabled


def test_a_fixed_budget_asked_of_an_instance_armed_for_auto_is_refused(model):
    """After budget='auto' armed an instance, budget=60 (its own) drafted budget=auto's trees without a word."""
    ids = model.tokenizer(TEXT).input_ids
    armed = GooseDrafter()
    goose.generate(model, ids, method=armed, budget="auto", max_new_tokens=8)
    one_line(lambda: goose.generate(model, ids, method=armed, budget=60, max_new_tokens=8), "budget=60",
             "made or used with budget='auto'", "goose.make_method(model, 'goose', budget=60)")
    goose.generate(model, ids, method=armed, budget="auto", max_new_tokens=8)  # asked as armed: fine
    by_default = goose.make_method(model, "goose", memory="run")  # auto: the default where a method prunes
    one_line(lambda: goose.generate(model, ids, method=by_default, budget=60, max_new_tokens=8),
             "(the default where a method prunes its drafts)")


def test_memory_beside_a_drafter_instance_that_differs_from_its_own_is_refused(model):
    """memory="prompt" beside a memory="run" instance kept its state across prompts: AR's tokens, but the tau of
    another configuration."""
    ids = model.tokenizer(TEXT).input_ids
    kept = GooseDrafter(memory="run")
    msg = one_line(lambda: goose.generate(model, ids, method=kept, memory="prompt", max_new_tokens=8),
                   "memory='prompt'", "memory='run'", "GooseDrafter")
    assert "method='goose', memory='prompt'" in msg
    one_line(lambda: goose.make_method(model, GooseDrafter(), memory="run"), "memory='run'", "memory='prompt'",
             "goose.make_method(model, 'goose', memory='run')")
    assert goose.generate(model, ids, method=kept, memory="run", max_new_tokens=8).tokens == \
        goose.generate(model, ids, method="ar", max_new_tokens=8).tokens
    # a drafter that keeps nothing records memory=none whatever is asked, as the method by name does
    from goose.baselines.pld import PromptLookupDrafter

    assert goose.generate(model, ids, method=PromptLookupDrafter(), memory="prompt", budget=5, max_new_tokens=8).tokens
