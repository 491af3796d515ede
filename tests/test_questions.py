"""The planner's questions are cleaned before explorers start: copies of its own prompt and
duplicates go, with a reason each."""

from orchestrator.config.definitions import load_agents
from orchestrator.evidence.questions import clean


def test_prompt_sentences_and_duplicates_are_dropped_as_a_small_planner_wrote_them():
    planner = load_agents()["planner"]
    task = "Fix the shared cart bug: two carts share one list."
    prompt = [planner.system, planner.render_task(task=task, localized="", repo_rules="")]
    asked = [
        "Where is the Cart class defined and how is `items` initialised?",
        "Two to six is usually right.",  # a sentence of the planner's own instructions
        "where is the Cart class defined, and how is items initialised",  # the same again
        "Where is the Cart class defined and how is `items` initialized?",  # near-identical
        "Which tests create more than one Cart?",
        "Which tests create more than one Order?",  # another name: another question
        "   ",
    ]
    kept, reasons = clean(asked, prompt=prompt)
    assert kept == ["Where is the Cart class defined and how is `items` initialised?",
                    "Which tests create more than one Cart?",
                    "Which tests create more than one Order?"]
    assert len(reasons) == 4
    assert "copied from the planner's own prompt" in reasons[0]
    assert sum("same as an earlier question" in r for r in reasons) == 2


def test_in_explore_mode_the_users_question_is_allowed_once():
    planner = load_agents()["planner"]
    question = "Where is the retry delay computed?"
    prompt = [planner.system, planner.render_task("explore", question=question)]
    kept, reasons = clean([question] * 4, prompt=prompt, allowed=[question])
    assert kept == [question] and len(reasons) == 3


def test_questions_that_name_nothing_to_search_for_are_dropped_with_the_reason():
    kept, reasons = clean(["What does the function do?", "How does it work?",
                           "Where is `median` defined?", "Which tax rate is used for QC?",
                           "What does --dry-run skip?", "What is in logs/app.log?"])
    assert kept == ["Where is `median` defined?", "Which tax rate is used for QC?",
                    "What does --dry-run skip?", "What is in logs/app.log?"]
    assert len(reasons) == 2 and all("names nothing to search for" in r for r in reasons)
    # in explore mode the user's own question is never dropped for it
    kept, _ = clean(["How does it work?"], allowed=["How does it work?"])
    assert kept == ["How does it work?"]


def test_plain_word_questions_must_share_a_word_with_the_task():
    task = "The catalogue lists books in the order they were catalogued, not by year."
    kept, reasons = clean(["What is the function called?", "Call only: submit.",
                           "Where are catalogue entries ordered?", "Where is `sorted` called?"],
                          allowed=[task], task=task)
    assert kept == ["Where are catalogue entries ordered?", "Where is `sorted` called?"]
    assert len(reasons) == 2 and all("nothing the task mentions" in r for r in reasons)


def test_a_question_mostly_lifted_from_the_instructions_is_a_copy():
    """What the 0.5B planner asked on xp-js-weekly-runs: the instructions' own example list,
    cut short and reworded at its start; a question that shares a few words with them, or
    quotes the task at length, is a question."""
    planner = load_agents()["planner"]
    task = ("The weekly summary covers 8 days instead of 7: `runlog week log.json 2024-03-10` "
            "reports '2024-03-03 to 2024-03-10'.")
    prompt = [planner.system, planner.render_task(task=task, localized="", repo_rules="")]
    lifted = ("What is the function, class, setting, flag, message or file ('Where is <name> "
              "computed?', never 'What does the function do?'), since explorers start b")
    asked = [lifted, "Where is the function that computes the week's start defined?",
             "Why does `runlog week log.json 2024-03-10` report '2024-03-03 to 2024-03-10'?"]
    kept, reasons = clean(asked, prompt=prompt, task=task)
    assert kept == asked[1:]
    assert len(reasons) == 1 and "copied from the planner's own prompt" in reasons[0]


def test_one_question_asked_once_per_kind_of_thing_starts_one_explorer():
    """The live 0.5B planner on xp-js-label-address (r18) asked the same words once per kind the
    prompt lists; four explorers were shown the same windows. What retrieval searches for, the
    kind aside, is the question: the first is kept. Other words, or a name, are another
    question."""
    asked = ["What is the function that prints labels?",
             "What is the class that prints labels?",
             "What is the setting that prints labels?",
             "What is the flag that prints labels?",
             "Which function prints invoices?",
             "Where is `printLabel` defined?"]
    kept, reasons = clean(asked, task="Shipping labels are printed with the billing address.")
    assert kept == [asked[0], asked[4], asked[5]]
    assert len(reasons) == 3
    assert all("searches for what an earlier question does" in r for r in reasons)
