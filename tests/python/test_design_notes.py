"""Every `Note [name]` cited anywhere in the tree has its body in docs/DESIGN.md.

The code states an invariant once, as a Note in docs/DESIGN.md (a paragraph that
starts with **Note [name].**), and cites it by name elsewhere. A citation whose
Note has no body sends a reader nowhere; this test fails on the first such
citation, naming the files that cite it. It reads files only (no `dtr` import
is needed, though conftest.py makes one)."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESIGN = os.path.join(ROOT, "docs", "DESIGN.md")

# Files that may cite a Note: sources, scripts, build files and documents.
SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".py", ".pyi", ".sh", ".cmake",
            ".md", ".txt", ".toml", ".in")
NAMES = ("run", "dtr.sh")  # .ci/run, dtr.sh
# `Note [name]` is how README and DESIGN describe the citation form itself.
PLACEHOLDERS = {"name"}

# A comment continued on the next line: the newline, indentation and the
# comment leader (//, ///, #, *, --) are one space, so a citation broken
# across lines of a comment reads as written.
LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?:(?://+|#+|\*+(?!\*)|--)[ \t]*)?")
CITATION = re.compile(r"\bNote \[([^\[\]]+)\]")
HEADING = re.compile(r"^\*\*Note \[([^\[\]]+)\]\.\*\*", re.M)


def _source_files():
    for dirpath, dirnames, filenames in os.walk(ROOT):
        # Build trees, virtual environments and VCS folders are not the tree's sources.
        dirnames[:] = [d for d in dirnames
                       if not (d.startswith("build") or d in (".git", "__pycache__", "node_modules")
                               or os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg")))]
        for f in filenames:
            if f.endswith(SUFFIXES) or f in NAMES:
                yield os.path.join(dirpath, f)


def _normalize(name):
    return " ".join(name.split())


def citations():
    """name -> the files (relative to the root) that cite Note [name]."""
    cited = {}
    for path in _source_files():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        for m in CITATION.finditer(LINE_BREAK.sub(" ", text)):
            name = _normalize(m.group(1))
            if name not in PLACEHOLDERS:
                cited.setdefault(name, set()).add(os.path.relpath(path, ROOT))
    return cited


def bodies():
    """The Notes DESIGN.md writes out, in order of appearance."""
    with open(DESIGN, encoding="utf-8") as f:
        return [_normalize(n) for n in HEADING.findall(f.read())]


def test_every_cited_note_has_a_body_in_design():
    cited = citations()
    # The scan itself works: the tree cites dozens of Notes, some across lines.
    assert len(cited) >= 30, sorted(cited)
    assert "host tier" in cited and "planner" in cited
    have = set(bodies())
    missing = {name: sorted(files) for name, files in cited.items() if name not in have}
    assert not missing, "Notes cited with no **Note [name].** paragraph in docs/DESIGN.md: " + "; ".join(
        f"[{name}] cited in {', '.join(files)}" for name, files in sorted(missing.items()))


def test_each_note_is_written_once():
    names = bodies()
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"Notes with more than one body in docs/DESIGN.md: {twice}"


def test_a_citation_across_lines_is_read_whole():
    # Split so that this file cites nothing itself.
    text = "// see No" "te [host\n  // tier] and No" "te\n# [planner], and\n * No" "te [what may\n * be evicted]"
    found = [_normalize(m.group(1)) for m in CITATION.finditer(LINE_BREAK.sub(" ", text))]
    assert found == ["host tier", "planner", "what may be evicted"]
