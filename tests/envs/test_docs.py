"""The docs against the repository: every relative link (and #anchor) resolves, every `nox -s NAME`
names a session the noxfile defines, and the README's session table lists every session.

Standard library only: runs offline in the tools venv (nox -s test).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


# --- the noxfile's sessions -----------------------------------------------------------------------


def sessions(noxfile: Path = ROOT / "noxfile.py") -> set[str]:
    """Names of the @nox.session functions (their name= when given), read without importing nox."""
    names = set()
    for node in ast.walk(ast.parse(noxfile.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            target = call.func if call else decorator
            if ast.unparse(target) not in ("nox.session", "session"):
                continue
            name = node.name
            for keyword in call.keywords if call else ():
                if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                    name = keyword.value.value
            names.add(name)
    return names


# --- Markdown, as far as links and commands go ----------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)


def split_blocks(text: str) -> tuple[str, list[str]]:
    """(text, lines): the text with its code blocks blanked, and the blocks' lines. An indented
    block is lines of 4+ spaces after a blank line (these docs indent list continuations by 2)."""
    prose, code, fence, indented, previous_blank = [], [], None, False, True
    for line in text.splitlines():
        opener = _FENCE.match(line)
        blank = not line.strip()
        indented = line.startswith("    ") and not blank and (previous_blank or indented) or (indented and blank)
        if fence:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            else:
                code.append(line)
            prose.append("")
        elif opener:
            fence = opener.group(1)
            prose.append("")
        elif indented:
            code.append(line)
            prose.append("")
        else:
            prose.append(line)
        previous_blank = blank
    return "\n".join(prose), code


def split_code(text: str) -> tuple[str, list[str]]:
    """(prose, code): the text without its code blocks and code spans, and the code they held, a
    block line or a span (its whitespace collapsed) per item."""
    prose, code = split_blocks(text)
    code += [" ".join(m.group(2).split()) for m in _CODE_SPAN.finditer(prose)]
    return _CODE_SPAN.sub(" ", prose), code


_LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)


def links(text: str) -> list[str]:
    prose, _ = split_code(text)
    return _LINK.findall(prose) + _REFERENCE.findall(prose)


def _heading_text(heading: str) -> str:
    heading = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    heading = re.sub(r"<[^>]+>", "", heading)  # inline HTML
    return heading.replace("`", "").replace("*", "").strip()


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lowercase, punctuation dropped, spaces as hyphens,
    -1, -2, ... on repeats; plus explicit <a id=...> / <a name=...>."""
    prose, _ = split_blocks(text)  # a heading's code spans are part of its text
    found, seen = set(), {}
    for match in re.finditer(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", prose, re.M):
        slug = "".join(c for c in _heading_text(match.group(1)).lower() if c.isalnum() or c in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    return found


def _page_of_a_deleted_operator(path: Path) -> bool:
    """docs/ops/NAME.md of an operator the tree does not have (no <package>/ops/NAME/)."""
    if path.suffix != ".md" or path.parent.name != "ops" or path.parent.parent.name != "docs":
        return False
    root = path.parent.parent.parent
    return not any(root.glob(f"*/ops/{path.stem}/__init__.py"))


def broken_links(page: Path) -> list[str]:
    """Relative links of `page` whose file or anchor does not exist."""
    text = page.read_text()
    problems = []
    for target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto:, ...: not checked offline
        path, _, anchor = target.partition("#")
        path = path.split("?")[0]
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() and _page_of_a_deleted_operator(resolved):
            continue  # a fork deleted that example: the template's docs still name it
        if not resolved.exists():
            problems.append(f"{target}: {resolved} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor.lower() not in anchors(resolved.read_text()):
            problems.append(f"{target}: no heading of {resolved.name} has the anchor #{anchor}")
    return problems


_NOX = re.compile(r"\bnox(?:==\S+)?\s+(?:-s|--sessions?)\s+(.*)")
_SESSION_TOKEN = re.compile(r"[A-Za-z_][\w-]*(?:\(.*\))?|\"[A-Za-z_][\w-]*\(.*?\)\"|'[A-Za-z_][\w-]*\(.*?\)'")


def nox_sessions_named(text: str) -> list[str]:
    """Every session a `nox -s A B ...` in the page's code names, up to `--`, a comment or the end."""
    _, code = split_code(text)
    named = []
    for snippet in code:
        for match in _NOX.finditer(snippet):
            for token in match.group(1).split():
                if not _SESSION_TOKEN.fullmatch(token):
                    break
                named.append(token.strip("\"'"))
    return named


def unknown_sessions(text: str, known: set[str]) -> list[str]:
    # A parametrized session, `nox -s "abi(torch='2.11.0')"`, is named by its function.
    return [name for name in nox_sessions_named(text) if name.split("(")[0] not in known]


# --- the repository's docs ------------------------------------------------------------------------


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = broken_links(page)
    assert not problems, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_nox_session_named_exists(page):
    unknown = unknown_sessions(page.read_text(), sessions())
    assert not unknown, f"{page.relative_to(ROOT)} names sessions noxfile.py does not define: {unknown}"


def test_the_readme_session_table_lists_every_session():
    table = re.findall(r"^\| `([\w-]+)` \|", (ROOT / "README.md").read_text(), re.M)
    assert len(table) == len(set(table)), f"a session listed twice: {table}"
    assert set(table) == sessions(), (
        f"README's session table: missing {sorted(sessions() - set(table))}, "
        f"not a session {sorted(set(table) - sessions())}"
    )


# --- the checks themselves catch what they are for ------------------------------------------------


def test_the_readme_runs_the_locked_nox_with_uv():
    """The quickstart's nox is the version requirements/nox.in pins, with its uv extra (uv fills the venvs)."""
    pin = next(line for line in (ROOT / "requirements" / "nox.in").read_text().splitlines() if line.startswith("nox=="))
    version = pin.removeprefix("nox==").split()[0]
    assert f'"nox[uv]=={version}"' in (ROOT / "README.md").read_text()


def test_a_broken_link_or_anchor_is_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# A guide\n\n## Step one: `nox -s build`\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/guide.md) [ok](docs/guide.md#step-one-nox--s-build) [ok](#top) [web](https://example.com/x)\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#step-two)\n\n"
        "# Top\n\n```bash\n[not a link](nowhere.md)\n```\n"
    )
    problems = broken_links(page)
    assert len(problems) == 2, problems
    assert "docs/missing.md" in problems[0] and "#step-two" in problems[1]


def test_a_link_to_a_deleted_operators_page_is_not_broken(tmp_path):
    """A fork that deletes an example keeps the docs that link its page; a page of an operator the
    tree has must exist."""
    (tmp_path / "pkg" / "ops" / "kept").mkdir(parents=True)
    (tmp_path / "pkg" / "ops" / "kept" / "__init__.py").write_text("")
    (tmp_path / "docs" / "ops").mkdir(parents=True)
    page = tmp_path / "README.md"
    page.write_text("[deleted](docs/ops/deleted.md) [kept](docs/ops/kept.md)\n")
    problems = broken_links(page)
    assert len(problems) == 1 and "docs/ops/kept.md" in problems[0], problems


def test_an_unknown_session_is_caught(tmp_path):
    noxfile = tmp_path / "noxfile.py"
    noxfile.write_text(
        "import nox\n\n@nox.session(python=False)\ndef build(session): ...\n\n"
        "@nox.session(name='format')\ndef format_(session): ...\n\n"
        "@nox.session\n@nox.parametrize('torch', ['2.11.0'])\ndef abi(session, torch): ...\n"
    )
    known = sessions(noxfile)
    assert known == {"build", "format", "abi"}
    text = (
        "Run `nox -s build format -- -k x` and `nox -s \"abi(torch='2.11.0')\"`, then\n"
        "`nox -s build\ntset`.\n\n```bash\npipx run nox==2026.10.20 -s build bench   # comment\n```\n\n"
        "    nox -s format_\n"
    )
    named = ["build", "format", "abi(torch='2.11.0')", "build", "tset", "build", "bench", "format_"]
    assert sorted(nox_sessions_named(text)) == sorted(named)
    assert sorted(unknown_sessions(text, known)) == ["bench", "format_", "tset"]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("## What `new` writes", "what-new-writes"),
        ("## A row-wise operator (RMSNorm)", "a-row-wise-operator-rmsnorm"),
        ("## rms_norm: the row-wise kernel", "rms_norm-the-row-wise-kernel"),
        ("## CI, the lock workflow and the GPU runner", "ci-the-lock-workflow-and-the-gpu-runner"),
        ("### 1. The machine image: driver, rootless Docker", "1-the-machine-image-driver-rootless-docker"),
    ],
)
def test_anchors_follow_githubs_rules(heading, anchor):
    assert anchor in anchors(heading + "\n")


def test_a_repeated_heading_gets_a_numbered_anchor():
    assert anchors("## Result\n\n## Result\n") == {"result", "result-1"}
