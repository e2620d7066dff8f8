#!/usr/bin/env python3
# Checks docs/ARCHITECTURE.md against the tree: every room includes only rooms on lower floors of
# its drawing, no chain of #includes between files comes back to its start, and every path and
# `name` the document quotes exists.   scripts/check_architecture.py [DOC]
import collections
import os
import re
import subprocess
import sys

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOC = sys.argv[1] if len(sys.argv) > 1 else "docs/ARCHITECTURE.md"
TEXT = open(DOC, encoding="utf-8").read()
TRACKED = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
SOURCES = [f for f in TRACKED if re.search(r"\.(cpp|hpp|h|cu|cuh)$", f) and not f.startswith("tests/")]
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as source:
        return [m.group(1) for m in map(INCLUDE.match, source) if m and os.path.exists(m.group(1))]


def floors():
    """Room -> floor, from the drawing's "floor N" lines."""
    found = {}
    for line in TEXT.splitlines():
        m = re.match(r"\s*floor (\d+)\s+(.*)", line)
        if m:
            for room in re.findall(r"(?<![\w/])([a-z]+)/", m.group(2)):
                if os.path.isdir(room):
                    found[room] = int(m.group(1))
    return found


def room_problems():
    floor_of = floors()
    problems = []
    for path in SOURCES:
        room = path.split("/")[0]
        if room not in floor_of:
            continue
        for header in includes(path):
            other = header.split("/")[0]
            if other != room and other in floor_of and floor_of[other] >= floor_of[room]:
                problems.append(f"{path} includes {header}: floor {floor_of[room]} -> {floor_of[other]}")
    return problems


def cycle_problems():
    unit = lambda p: os.path.splitext(p)[0]  # a header and its source are one unit
    graph = collections.defaultdict(set)
    for path in SOURCES:
        graph[unit(path)] |= {unit(h) for h in includes(path)} - {unit(path)}
    seen, problems = {}, []

    def visit(node, stack):
        seen[node] = "open"
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == "open":
                problems.append("include circle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in seen:
                visit(nxt, stack + [nxt])
        seen[node] = "done"

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in seen:
            visit(node, [node])
    return problems


def reference_problems():
    known = set()
    for path in TRACKED:
        parts = path.split("/")
        known.update("/".join(parts[i:]) for i in range(len(parts)))  # a path or any tail of it
        known.update("/".join(parts[i:j]) + "/" for i in range(len(parts)) for j in range(i + 1, len(parts)))
    problems = []
    paths = set(re.findall(r"(?<![\w/.:])((?:[a-z_0-9]+/)+[\w.*-]*)", TEXT))
    paths |= set(re.findall(r"\b([\w-]+\.(?:cpp|hpp|cu|yaml|sh|md|html))\b", TEXT))
    for path in sorted(paths):
        stem = path.rstrip("*")
        if path.endswith("*") and any(k.startswith(stem) for k in known):
            continue
        if stem not in known and stem + "/" not in known:
            problems.append(f"path {path}: no such file or directory")
    names = set()
    prose = re.sub(r"^```.*?^```", "", TEXT, flags=re.S | re.M)  # the drawings quote nothing
    for quoted in re.findall(r"`([^`\n]+)`", prose):
        for word, star in re.findall(r"([A-Za-z_][\w:]*)(\*?)", quoted):
            if re.fullmatch(r"[A-Z][a-z0-9]+[A-Z]\w*|[a-z0-9]+_[a-z0-9_]+|[A-Z]\w+::\w+", word):
                names.add((word.split("::")[-1], star))  # NAME* stands for names that start so
    for name, star in sorted(names):
        pattern = ["-qE", rf"\b{name}"] if star else ["-qw", name]
        found = subprocess.run(["git", "grep", *pattern, "--", "*.cpp", "*.hpp", "*.cu", "*.cuh", "*.txt",
                                "*.cmake", "*.yaml", "*.html", "*.sh", "*.py"])
        if found.returncode != 0:
            problems.append(f"name {name}{star}: not in the code")
    return problems


problems = room_problems() + cycle_problems() + reference_problems()
for problem in problems:
    print(f"{DOC}: {problem}")
print(f"{DOC}: {len(floors())} rooms on their floors, {len(SOURCES)} files; {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
