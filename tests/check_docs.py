#!/usr/bin/env python3
"""Checks that the documents match the repository and the binary. Standard library only.

    python3 tests/check_docs.py --gmlp build/gmlp [--root .]

Without --gmlp (a build without the command line) (b) and (c) are skipped, and it says so.

(a) Every relative link and image in README.md, CONTRIBUTING.md and docs/*.md resolves to a file
    or folder in the repository, and a link's #anchor to a heading of its target (GitHub's
    slugs). Links in code are not links.
(b) Every `gmlp SUBCOMMAND` those documents show in code (fenced blocks and inline code) names a
    subcommand of `gmlp --help`, and every --option after it is in `gmlp SUBCOMMAND --help`.
(c) docs/cli.md has a section `## gmlp SUBCOMMAND` for every subcommand, listing every option
    of its --help.
(d) No tracked text file (git ls-files) carries work history: numbered work periods or issues,
    or notes on who ran what when (HISTORY below).

Prints each problem as `path:line: message` and exits 1 if there is any, else 0.
"""
import argparse
import os
import re
import subprocess
import sys

DOCS = ["README.md", "CONTRIBUTING.md", "docs/*.md"]

# (d) Work-history phrases. This file is exempt; the brackets in s[e]ssion and the like keep
# its own lines out of a plain `git grep` for the phrases.
HISTORY = re.compile(
    r"\bs[e]ssions?\s+#?\d"
    r"|\bi[s]sues?\s+#?\d"
    r"|\b(?:this|that|the|a|each|every|one|next|previous|earlier|later|last|same|whole|another)"
    r"\s+s[e]ssion\b"
    r"|\bthe i[s]sue\b"
    r"|\bnext[ ]try\b|\bthe[ ]try after\b"
    r"|\b(?:was|were) lost\b"
    r"|\bon a slow day\b"
    r"|\bwork periods?\b",
    re.IGNORECASE)

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
COMMAND = re.compile(r"(?<![\w./-])(?:[\w./-]*/)?gmlp[ \t]+([a-z][a-z0-9-]*)([^|;&#\n]*)")
OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)


class Problems:
    def __init__(self):
        self.items = []

    def add(self, path, line, message):
        self.items.append(f"{path}:{line}: {message}")


def doc_files(root):
    files = []
    for pattern in DOCS:
        if "*" in pattern:
            folder = os.path.join(root, os.path.dirname(pattern))
            if os.path.isdir(folder):
                files += sorted(os.path.join(os.path.dirname(pattern), f) for f in os.listdir(folder)
                                if f.endswith(".md"))
        elif os.path.exists(os.path.join(root, pattern)):
            files.append(pattern)
    return files


def split_markdown(text):
    """Yields (line_number, line, in_fence) for each line of a markdown text."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and (fence is None or m.group(1) == fence):
            fence = m.group(1) if fence is None else None
            yield number, line, True
            continue
        yield number, line, fence is not None


def code_and_prose(text):
    """(line_number, code_text) pieces and (line_number, prose_line) lines of a markdown text.
    Code: fenced blocks (backslash continuations joined), indented blocks, inline code."""
    code, prose = [], []
    pending, pending_line = "", 0
    previous_blank, in_indented = True, False
    for number, line, in_fence in split_markdown(text):
        stripped = line.strip()
        # An indented block starts after a blank line (a list item's too, indented further).
        indented = (line.startswith("    ") and (previous_blank or in_indented) and
                    not re.match(r"^\s*([-*+]|\d+\.)\s", line))
        block = in_fence or indented
        in_indented = indented and not in_fence
        if block:
            if FENCE.match(line):
                continue
            if not pending:
                pending_line = number
            if stripped.endswith("\\"):
                pending += stripped[:-1] + " "
            else:
                code.append((pending_line, pending + stripped))
                pending = ""
        else:
            if pending:
                code.append((pending_line, pending))
                pending = ""
            for m in INLINE_CODE.finditer(line):
                code.append((number, m.group(2)))
            prose.append((number, INLINE_CODE.sub("", line)))
        previous_blank = not stripped
    if pending:
        code.append((pending_line, pending))
    return code, prose


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to
    hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(path, cache):
    if path not in cache:
        found, counts = set(), {}
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line, in_fence in split_markdown(text):
            m = None if in_fence else HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = counts.get(base, 0)
                counts[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
            found.add(m.group(1))
        cache[path] = found
    return cache[path]


def check_links(root, files, problems):
    cache, count = {}, 0
    for rel in files:
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            _, prose = code_and_prose(f.read())
        for number, line in prose:
            targets = [m.group(1) for m in LINK.finditer(line)] + \
                      [m.group(1) for m in HTML_SRC.finditer(line)]
            m = REF_DEF.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if EXTERNAL.match(target):
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                if file_part:
                    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                    if not resolved.startswith(os.path.abspath(root)) or not os.path.exists(resolved):
                        problems.add(rel, number, f"link target '{target}' does not exist")
                        continue
                else:
                    resolved = path
                if anchor and resolved.endswith(".md") and anchor not in anchors(resolved, cache):
                    problems.add(rel, number, f"link '{target}': no heading with anchor '#{anchor}' "
                                              f"in {os.path.relpath(resolved, root)}")
    return count


def help_text(gmlp, *args):
    proc = subprocess.run([gmlp, *args, "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"`gmlp {' '.join(args)} --help` exited {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[:200]}")
    return proc.stdout


def subcommands(gmlp):
    text = help_text(gmlp)
    section = text.split("Subcommands:", 1)
    if len(section) < 2:
        raise RuntimeError("`gmlp --help` lists no subcommands")
    return [line.split()[0] for line in section[1].splitlines()
            if line.startswith("  ") and line.strip()]


def options_of(gmlp, sub):
    text = help_text(gmlp, sub)
    options = set()
    for line in text.split("Options:", 1)[-1].splitlines():
        if re.match(r"^  -", line):
            spec = line.strip().split("  ")[0]
            options.update(OPTION.findall(spec.split(" Excludes:")[0]))
    return options


def check_commands(root, files, gmlp, problems):
    subs = subcommands(gmlp)
    opts = {s: options_of(gmlp, s) for s in subs}
    count = 0
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            code, _ = code_and_prose(f.read())
        for number, piece in code:
            for m in COMMAND.finditer(piece):
                count += 1
                sub, rest = m.group(1), m.group(2)
                if sub not in opts:
                    problems.add(rel, number, f"`gmlp {sub}`: no such subcommand "
                                              f"(gmlp --help lists {', '.join(subs)})")
                    continue
                for option in OPTION.findall(rest):
                    if option not in opts[sub]:
                        problems.add(rel, number, f"`gmlp {sub} {option}`: no such option in "
                                                  f"`gmlp {sub} --help`")
    return subs, opts, count


def check_cli_reference(root, subs, opts, problems):
    rel = "docs/cli.md"
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        problems.add(rel, 0, "missing: it must document every subcommand and option")
        return
    sections, current = {}, None
    with open(path, encoding="utf-8") as f:
        for number, line, in_fence in split_markdown(f.read()):
            m = None if in_fence else HEADING.match(line)
            if m and len(m.group(1)) == 2:
                title = m.group(2).replace("`", "").split()
                current = title[1] if len(title) == 2 and title[0] == "gmlp" else None
                if current:
                    sections[current] = (number, set())
            elif current:
                sections[current][1].update(OPTION.findall(line))
    for sub in subs:
        if sub not in sections:
            problems.add(rel, 0, f"no section '## gmlp {sub}'")
            continue
        number, documented = sections[sub]
        for option in sorted(opts[sub] - documented - {"--help"}):
            problems.add(rel, number, f"section 'gmlp {sub}' does not document {option}")


def tracked_files(root):
    try:
        proc = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                              timeout=60)
        if proc.returncode == 0:
            return [p for p in proc.stdout.decode("utf-8", "replace").split("\0") if p]
    except (OSError, subprocess.TimeoutExpired):
        pass
    skip = {".git", "runs", ".venv", "__pycache__"}
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip and not d.startswith("build")]
        files += [os.path.relpath(os.path.join(folder, n), root) for n in names]
    return files


def check_history(root, problems):
    me = os.path.abspath(__file__)
    count = 0
    for rel in tracked_files(root):
        path = os.path.join(root, rel)
        if os.path.abspath(path) == me or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read(4 << 20)
        if b"\0" in data[:8192]:
            continue
        count += 1
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if HISTORY.search(line):
                problems.add(rel, number, line.strip())
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gmlp", default="", help="the gmlp binary (empty: skip (b) and (c))")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the repository (default: this script's)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    problems = Problems()
    files = doc_files(root)
    links = check_links(root, files, problems)
    commands = 0
    if not args.gmlp:
        print("notice: no gmlp binary given, so commands and options are not checked")
    else:
        try:
            subs, opts, commands = check_commands(root, files, args.gmlp, problems)
            check_cli_reference(root, subs, opts, problems)
        except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
            problems.add(args.gmlp, 0, f"failed to read the command line's help: {e}")
    scanned = check_history(root, problems)
    for item in problems.items:
        print(item)
    summary = (f"{len(files)} documents, {links} links, {commands} gmlp commands, "
               f"{scanned} tracked files scanned for work history")
    if problems.items:
        print(f"FAIL: {len(problems.items)} problems ({summary})")
        return 1
    print(f"OK: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
