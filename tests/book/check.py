"""The built book holds together, and every `kerf` command it shows exists.

    python3 tests/book/check.py BOOK_DIR KERF_BIN [MARKDOWN…]

BOOK_DIR is mdBook's output (docs/book). Checked:

1. Links: every relative `href` and `src` in its HTML pages (not 404.html, whose links are
   relative to the site's root) names a file of the book, and a `#fragment` an `id` in that page.
   External links (http:, mailto:, …) are not followed: the test machine may be offline. In the
   MARKDOWN files given, every relative link must name a file of the repository.
2. Commands: every `kerf …` in the book's code, in blocks and inline (the built pages, so
   `{{#include}}`d text counts), and in the MARKDOWN files given (the README): its command path
   (`kerf eval resume`) must be a command of KERF_BIN, and every option it shows (`--max-tokens`)
   one that command takes. The commands and their options come from the binary itself
   (`kerf help-markdown`, the generated CLI reference), and each command path shown must also
   answer `kerf PATH --help` with exit 0 (a hidden command, which the reference leaves out, only
   that).

Standard library only. Prints what it checked; exits 1 naming every problem with its page.
"""

import html.parser
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


class Page(html.parser.HTMLParser):
    """One HTML page: its ids, its links, and the text of its code elements."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (attribute, value)
        self.code = []  # (is_block, text)
        self._code_depth = 0
        self._in_pre = 0
        self._buf = []
        self._block = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value and tag != "meta":
                self.ids.add(value)
            if value is not None and (
                (name == "href" and tag in ("a", "link")) or (name == "src" and tag in ("img", "script"))
            ):
                self.links.append((name, value))
        if tag == "pre":
            self._in_pre += 1
        elif tag == "code":
            if self._code_depth == 0:
                self._buf = []
                self._block = self._in_pre > 0
            self._code_depth += 1

    def handle_endtag(self, tag):
        if tag == "pre":
            self._in_pre = max(0, self._in_pre - 1)
        elif tag == "code" and self._code_depth:
            self._code_depth -= 1
            if self._code_depth == 0:
                self.code.append((self._block, "".join(self._buf)))

    def handle_data(self, data):
        if self._code_depth:
            self._buf.append(data)


def parse_page(path):
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def check_links(book, pages):
    problems, checked = [], 0
    for path, page in pages.items():
        if path.name == "404.html":
            continue
        for attr, value in page.links:
            if not value or EXTERNAL.match(value):
                continue
            checked += 1
            target, _, fragment = value.partition("#")
            target = urllib.parse.unquote(target.partition("?")[0])
            dest = path if target == "" else (path.parent / target).resolve()
            if target.endswith("/"):
                dest = dest / "index.html"
            where = f"{path.relative_to(book)}: {attr}={value!r}"
            try:
                dest.relative_to(book.resolve())
            except ValueError:
                problems.append(f"{where} leaves the book")
                continue
            if not dest.is_file():
                problems.append(f"{where}: no such file")
                continue
            if fragment and dest.suffix == ".html":
                fragment = urllib.parse.unquote(fragment)
                ids = pages[dest].ids if dest in pages else parse_page(dest).ids
                if fragment not in ids:
                    problems.append(f"{where}: no id {fragment!r} in {dest.relative_to(book.resolve())}")
    return problems, checked


def command_tree(kerf):
    """{("eval", "resume"): {"options": {...}, "subs": {...}, "positionals": bool}} from the
    generated reference the binary prints."""
    out = subprocess.run([kerf, "help-markdown"], capture_output=True, text=True, check=True).stdout
    tree, current = {}, None
    for line in out.splitlines():
        m = re.match(r"^## (kerf(?: [a-z0-9-]+)*)$", line)
        if m:
            current = tuple(m.group(1).split()[1:])
            tree[current] = {"options": {"--help", "-h"}, "subs": set(), "positionals": False}
            continue
        if current is None:
            continue
        m = re.match(r"^- \[`([a-z0-9-]+)`\]\(#", line)
        if m:
            tree[current]["subs"].add(m.group(1))
            continue
        m = re.match(r"^- `((?:-[a-zA-Z], )?--[a-z0-9-]+|-[a-zA-Z])", line)
        if m:
            tree[current]["options"].update(part.strip() for part in m.group(1).split(","))
            continue
        if re.match(r"^- `[<\[]", line):
            tree[current]["positionals"] = True
    globals_ = tree[()]["options"] | {"--version", "-V"}
    for path, node in tree.items():
        node["options"] |= globals_ if path else {"--version", "-V"}
    return tree


# Where a command starts within a line of shell: the line's start, or after ; && || | $( (
SEGMENT = re.compile(r";|&&|\|\||\s\|\s|\$\(|`")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def invocations(text, block):
    """Each `kerf …` in a piece of code: (text of the invocation, with continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in text.splitlines():
        # A shell comment (` # …`) is not part of the command; a `#` inside a word is.
        line = re.sub(r"(^|\s)#(\s.*)?$", r"\1", line) if block else line
        for segment in SEGMENT.split(line):
            segment = segment.strip()
            if segment.startswith("$ "):
                segment = segment[2:].strip()
            if re.match(r"^kerf(\s|$)", segment):
                found.append(segment)
    return found


def check_invocation(kerf, tree, text, helped):
    """Problems with one `kerf …`: an unknown command, or an option its command does not take."""
    words = text.split()[1:]
    path, i = (), 0
    while i < len(words):
        word = words[i]
        node = tree[path]
        if word.startswith("-"):
            if path == () and word == "--data-dir":
                i += 2
                continue
            if path == () and word.split("=")[0] in node["options"]:
                i += 1
                continue
            break
        if word in node["subs"]:
            path += (word,)
            i += 1
            continue
        if node["subs"] and not node["positionals"] and re.fullmatch(r"[a-z][a-z0-9-]*", word):
            # A hidden command (`kerf help-markdown`) is not in the reference but runs.
            hidden = subprocess.run([kerf, *path, word, "--help"], capture_output=True)
            if hidden.returncode == 0:
                return []
            return [f"`{text}`: `kerf {' '.join(path + (word,))}` is not a command"]
        break
    if path not in helped:
        run = subprocess.run([kerf, *path, "--help"], capture_output=True, text=True)
        helped[path] = run.returncode
    if helped[path] != 0:
        return [f"`{text}`: `kerf {' '.join(path)} --help` exits {helped[path]}"]
    problems = []
    allowed = tree[path]["options"]
    for option in OPTION.findall(" ".join(words[i:])):
        if option not in allowed:
            problems.append(f"`{text}`: `kerf {' '.join(path)}` takes no option {option}")
    return problems


def markdown_code(text):
    """(is_block, text) of the code in a Markdown file: fenced blocks and inline spans."""
    code, rest, fence = [], [], None
    for line in text.splitlines(keepends=True):
        if fence is None and line.lstrip().startswith("```"):
            fence = []
            rest.append("\n")
        elif fence is not None and line.lstrip().startswith("```"):
            code.append((True, "".join(fence)))
            fence = None
            rest.append("\n")
        elif fence is not None:
            fence.append(line)
        else:
            rest.append(line)
    code += [(False, m) for m in re.findall(r"`([^`]+)`", "".join(rest))]
    return code


def markdown_links(path):
    """Problems with the relative links and images of a Markdown file (the README): each must
    name a file of the repository. Fragments are not checked here (GitHub's anchors are its own)."""
    problems, checked = [], 0
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"`[^`]*`", "", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if EXTERNAL.match(target) or target.startswith("#"):
            continue
        checked += 1
        file = urllib.parse.unquote(target.partition("#")[0])
        if not (path.parent / file).exists():
            problems.append(f"{path}: link ({target}): no such file")
    return problems, checked


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    book, kerf, extra = Path(sys.argv[1]).resolve(), sys.argv[2], [Path(p) for p in sys.argv[3:]]
    pages = {p.resolve(): parse_page(p) for p in sorted(book.rglob("*.html"))}
    if not pages:
        sys.exit(f"no HTML pages under {book}: build the book first (mdbook build docs)")
    problems, links = check_links(book, pages)
    for path in extra:
        more, checked = markdown_links(path)
        problems += more
        links += checked

    tree = command_tree(kerf)
    sources = [
        (str(path.relative_to(book)), page.code)
        for path, page in pages.items()
        if path.name not in ("print.html", "404.html", "toc.html")
    ] + [(str(p), markdown_code(p.read_text(encoding="utf-8"))) for p in extra]
    helped, shown = {}, 0
    for where, code in sources:
        for block, text in code:
            for inv in invocations(text, block):
                shown += 1
                for problem in check_invocation(kerf, tree, inv, helped):
                    problems.append(f"{where}: {problem}")
    paths = set(helped)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(
        f"book: {len(pages)} pages, {links} internal links and anchors, {shown} `kerf` commands "
        f"({len(paths)} command paths, each answering --help): {len(problems)} problem(s)"
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
