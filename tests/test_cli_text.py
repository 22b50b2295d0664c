"""Text the command line prints for people: ``paradnn run FAMILY --help`` says each framework
option once, and ``paradnn compare``'s legend explains exactly the columns its table prints."""

import re
from pathlib import Path

import pytest

import paradnn
from paradnn import frameworks
from paradnn.cli import main

import test_compare as TC


def _help(capsys, *args) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*args, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: join them


def test_run_help_says_each_framework_option_once(capsys):
    text = _help(capsys, "run", "fc")
    for name, declared in frameworks.option_fields().items():
        declaring = [fw for fw, _ in declared]
        # The option's flag is described once, naming every framework that declares it.
        entry = re.search(rf"--{name.replace('_', '-')} X framework option \(([^)]*)\)", text)
        assert entry, name
        assert entry.group(1).split(", ") == declaring
    # jax, tensorflow and torch declare matmul_precision with one text: it is printed once.
    paragraph = "internal precision of float32 matmuls and convolutions"
    assert text.count(paragraph) == 1
    assert "framework option (jax, tensorflow, torch) internal precision" in text
    # Where frameworks differ (step_loop), the shared clause once, then each one's own part.
    assert text.count("how a call runs its K steps") == 1
    assert "jax: device (a loop in the compiled program)" in text
    assert "tensorflow: device (a tf.while_loop in the XLA program)" in text


def test_option_help_names_frameworks_together_where_their_texts_agree(monkeypatch):
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class A:
        knob: str = dataclasses.field(default="x", metadata={"help": "what it does: a (fast) or b (slow)"})

    @dataclasses.dataclass(frozen=True)
    class B:
        knob: str = dataclasses.field(default="x", metadata={"help": "what it does: a (quick) or b"})

    fields = {"knob": [("one", dataclasses.fields(A)[0]), ("two", dataclasses.fields(A)[0]),
                       ("three", dataclasses.fields(B)[0])]}
    monkeypatch.setattr(frameworks, "option_fields", lambda: fields)
    assert frameworks.option_help("knob") == \
        "(one, two, three) what it does: one, two: a (fast) or b (slow); three: a (quick) or b"


# -- compare's legend --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("legend")
    base = TC._grid_store(tmp / "base.db", seed=30)
    TC._plant_copy(base, tmp / "new.db", seed=31, planted=lambda n, b: b <= 16)
    return paradnn.compare(str(base), str(tmp / "new.db"))


def _legend_names(lines: list[str], start: str, bullet: str) -> list[str]:
    """The column names of a legend: the lines after ``start`` that begin with ``bullet``,
    each ``<bullet><name>: <meaning>``, up to the first line that is not one."""
    at = lines.index(start) + 1
    names = []
    for line in lines[at:]:
        if not line.startswith(bullet) or ": " not in line:
            break
        names.append(line[len(bullet):].split(": ", 1)[0])
    return names


def test_compare_text_legend_explains_exactly_the_printed_columns(comparison):
    lines = paradnn.compare.text(comparison).splitlines()
    header = next(line for line in lines if line.startswith("verdict"))
    names = _legend_names(lines, "columns:", "  ")
    # Every column printed is explained, in order, and nothing else: no p column, bound in.
    assert " ".join(header.split()) == " ".join(" ".join(n.split()) for n in names)
    assert "bound" in names and "p" not in names
    assert not any(line.startswith(("p:", "  p:")) for line in lines)


def test_compare_markdown_legend_explains_exactly_the_printed_columns(comparison):
    lines = paradnn.compare.markdown(comparison).splitlines()
    header = next(line for line in lines if line.startswith("| verdict"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert _legend_names(lines, "Columns:", "- ") == columns
    assert "bound" in columns and "p" not in columns


def test_compare_cli_prints_the_legend_of_its_table(comparison, capsys, tmp_path):
    base, new = (Path(s) for s in comparison.source)
    main(["compare", str(base), str(new)])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("verdict"))
    names = _legend_names(lines, "columns:", "  ")
    assert " ".join(header.split()) == " ".join(" ".join(n.split()) for n in names)
