#!/usr/bin/env python3
"""deploy/Containerfile, checked statically (the image tier, tests/image/, builds it for
real): the build stage copies the whole tree and .containerignore leaves out nothing the
build uses (every directory CMake adds, every file a RUN line names), the first COPY has
every script its RUN calls, and the runtime stage ships both binaries and the installer
as its entrypoint.
Usage: deploy_containerfile_test.py REPO_ROOT"""
import fnmatch
import os
import re
import shlex
import sys

root = sys.argv[1]
text = open(os.path.join(root, "deploy/Containerfile")).read()
# Join continuation lines, drop comments.
lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def ignored(path, patterns):
    """Whether .containerignore's patterns leave `path` (relative, '/'-separated) out of the
    build context: a pattern matches the path or one of its parent directories; '!'
    patterns re-include; the last match wins (Docker's rule)."""
    parts = path.split("/")
    out = False
    for p in patterns:
        neg = p.startswith("!")
        pat = p[1:] if neg else p
        pat = pat.strip("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatchcase(prefix, pat) or (pat.startswith("**/") and
                                                    fnmatch.fnmatchcase(parts[i - 1], pat[3:])):
                out = not neg
                break
    return out


patterns = [l.strip() for l in open(os.path.join(root, ".containerignore"))
            if l.strip() and not l.startswith("#")]
check(os.path.islink(os.path.join(root, ".dockerignore")) and
      os.readlink(os.path.join(root, ".dockerignore")) == ".containerignore",
      ".dockerignore is .containerignore (docker reads only the former)")

# Everything the build uses: the directories CMake adds (recursively), the files the RUN
# lines name, and the files CMakeLists.txt refers to.
needed = set()
cmake_dirs = [""]
while cmake_dirs:
    d = cmake_dirs.pop()
    cm = os.path.join(root, d, "CMakeLists.txt")
    needed.add(os.path.join(d, "CMakeLists.txt").lstrip("/"))
    for sub in re.findall(r"add_subdirectory\(\s*([^\s)]+)", open(cm).read()):
        path = os.path.normpath(os.path.join(d, sub))
        needed.add(path)
        cmake_dirs.append(path)
for d in [x for x in needed if os.path.isdir(os.path.join(root, x))]:
    for dirpath, dirs, files in os.walk(os.path.join(root, d)):
        dirs[:] = [x for x in dirs if x != "__pycache__"]  # Python's caches: not build inputs
        for f in files:
            if not f.endswith(".md"):  # documentation is not a build input
                needed.add(os.path.relpath(os.path.join(dirpath, f), root))
runs = " ".join(l for l in lines if l.startswith("RUN "))
for script in re.findall(r"\b(tests/[\w./-]+\.sh)\b", runs):
    needed.add(script)
check("base" in needed and "plugin" in needed and "tests/tools/cross.sh" in needed,
      f"the list of what the build uses is complete enough to mean something ({len(needed)} paths)")
missing = sorted(p for p in needed if ignored(p, patterns))
check(not missing, f".containerignore leaves out nothing the build uses: {missing[:10]}")
check(ignored("build/agent/rdmanet", patterns) and ignored(".git/HEAD", patterns),
      ".containerignore leaves out build trees and VCS data")
check(any(re.fullmatch(r"COPY \. \.?/?", l.strip()) or l.strip() == "COPY . ." for l in lines),
      "the build stage copies the whole tree (COPY . .)")

# The first COPY carries every script the RUN before the whole tree's COPY calls.
first_copy = next(i for i, l in enumerate(lines) if l.startswith("COPY "))
whole = next(i for i, l in enumerate(lines) if l.strip() == "COPY . .")
early = set(shlex.split(lines[first_copy])[1:-1])
for l in lines[first_copy:whole]:
    if l.startswith("RUN "):
        for script in re.findall(r"\b(tests/[\w./-]+\.sh)\b", l):
            check(script in early, f"{script} is copied before the RUN that calls it")
            # Scripts that call siblings through $(dirname "$0") need them too.
            for sib in re.findall(r'\$\(dirname "\$0"\)/([\w./-]+\.sh)',
                                  open(os.path.join(root, script)).read()):
                sib = os.path.normpath(os.path.join(os.path.dirname(script), sib))
                check(sib in early, f"{sib} (called by {script}) is copied before it runs")

froms = [l.split() for l in lines if l.startswith("FROM ")]
check(len(froms) >= 2 and all(any(w.startswith("debian:") for w in f) for f in froms),
      f"multi-stage, Debian bases: {froms}")
check("tests/tools/deps.sh build" in runs, "build stage installs dependencies with tests/tools/deps.sh build")
check("-DRDMANET_TESTS=OFF" in runs, "build without tests")
check(re.search(r"ninja -C \S+ rdmanet rdmanet-ipam", runs) is not None, "builds both binaries with ninja")
check("tests/binary/elf_deps.sh" in runs, "build stage checks the binaries depend only on glibc")
check(runs.count(" strip ") >= 2, "both binaries are stripped")
for l in lines:
    if not l.startswith("COPY "):
        continue
    args = shlex.split(l)[1:]
    if any(a.startswith("--from=") for a in args):
        continue
    for src in args[:-1]:
        check(os.path.exists(os.path.join(root, src)), f"COPY source {src} exists")
for f in ("tools/deps.sh", "binary/elf_deps.sh", "tools/cross.sh", "tools/debian_mirror.sh"):
    check(os.access(os.path.join(root, "tests", f), os.X_OK), f"tests/{f} is executable")
check(re.search(r"COPY --from=build .*rdmanet .*rdmanet-ipam", text) is not None, "runtime stage gets both binaries")
entry = [l for l in lines if l.startswith("ENTRYPOINT")]
check(bool(entry) and "/opt/rdmanet/install.sh" in entry[-1], "the installer is the entrypoint")
for f in ("install.sh", "node-prep.sh"):
    check(os.access(os.path.join(root, "deploy/installer", f), os.X_OK), f"deploy/installer/{f} is executable")
    check(f"/opt/rdmanet/{f}" in open(os.path.join(root, "deploy/base/daemonset.yaml")).read(),
          f"the DaemonSet runs /opt/rdmanet/{f}")

# The check above must be able to fail: an ignore list that drops plugin/ is caught.
check(ignored("plugin/main.cc", patterns + ["plugin"]) and not ignored("plugin/main.cc", patterns),
      "an ignore pattern for a directory the build uses would be caught")
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
