"""One definition of m* everywhere, and the two rules that shape what it measures written where
a reader looks (issue 49): the starter spec of ``attnsweep init`` said m* was "the smallest m at
which this fraction of seeds succeeds" while docs/method.md defines the logistic crossing; when
training stops was said only in the adaptive search's section, and what redrawing ambiguous
training sets does to m* nowhere."""

import re
from pathlib import Path

from attnsweep.api_specs import write_starter
from attnsweep.orchestrator.spec import AnalysisSettings
from attnsweep.workers import BooleanTrialConfig

ROOT = Path(__file__).resolve().parents[1]
DEFINITION = "logistic fit of success against ln m"
"""The reading of m* docs/method.md defines: every other place that defines m* names it."""


def _section(text: str, heading: str) -> str:
    """The body of the Markdown section ``heading`` (to the next heading of any level)."""
    start = text.index(heading + "\n") + len(heading) + 1
    following = re.search(r"^#{1,6} ", text[start:], re.M)
    return text[start : start + following.start()] if following else text[start:]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_method_md_defines_m_star_as_the_logistic_crossing():
    defined = _flat(_section((ROOT / "docs" / "method.md").read_text(), "## How m* is defined"))
    assert f"m* is where that rate crosses `analysis.success_frac` (1/2 by default), read off a {DEFINITION}" in defined


def test_the_starter_spec_says_what_method_md_says(tmp_path):
    text = write_starter(tmp_path / "sweep.yaml").read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("success_frac:"))
    comment = _flat(" ".join(line.split("#", 1)[1] for line in lines[at : at + 3] if "#" in line))
    assert DEFINITION in comment and "docs/method.md" in comment, comment
    assert "smallest m" not in comment


def test_the_settings_and_spec_md_say_it_too():
    assert DEFINITION in AnalysisSettings.model_fields["success_frac"].description
    analysis = _flat(_section((ROOT / "docs" / "spec.md").read_text(), "## Analysis"))
    assert f"crosses this fraction: a {DEFINITION}" in analysis


def test_no_doc_or_message_gives_another_definition():
    old = re.compile(r"smallest m at which this fraction|where this fraction of seeds succeeds", re.I)
    places = [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    places += [
        p
        for package in ("interface", "orchestrator", "presentation", "stats", "analysis")
        for p in (ROOT / package).rglob("*.py")
    ]
    said = [str(p.relative_to(ROOT)) for p in places if p.name != "decisions.md" and old.search(_flat(p.read_text()))]
    assert said == []


def test_method_md_says_when_training_stops_with_the_configs_default():
    assert BooleanTrialConfig.model_fields["stop"].default == "fit"
    method = (ROOT / "docs" / "method.md").read_text()
    defined = method[method.index("## How m* is defined") : method.index("### Three estimators")]
    stops = _flat(_section(defined, "### When training stops"))
    assert "The same rule holds in a grid and in an adaptive search" in stops
    assert "under the default `stop: fit` the trial stops there, without that step" in stops
    assert "it succeeds by its test accuracy alone, converged or not" in stops


def test_method_md_says_what_the_redraw_does_to_m_star_with_the_configs_defaults():
    fields = BooleanTrialConfig.model_fields
    assert fields["reject_ambiguous"].default is True
    redraw = _flat(_section((ROOT / "docs" / "method.md").read_text(), "### Redrawn training sets and m*"))
    assert "With `reject_ambiguous: true` (the default, the paper's protocol)" in redraw
    assert f"at most `max_redraws` ({fields['max_redraws'].default}) times" in redraw
    assert "Only the training set is conditioned" in redraw and "m* lower" in redraw
    assert "left out of the success rate" in redraw


def test_spec_md_states_both_rules_and_links_them():
    spec = _flat((ROOT / "docs" / "spec.md").read_text())
    assert "training stops at the first epoch whose weights classify every training sample right (`stop: fit`)" in spec
    assert "(method.md#when-training-stops)" in spec and "(method.md#redrawn-training-sets-and-m)" in spec
