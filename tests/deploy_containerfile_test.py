#!/usr/bin/env python3
"""deploy/Containerfile, checked statically (no container engine here):
multi-stage Debian, the build stage runs the project's own tests/deps.sh and
CMake/Ninja build without tests, every COPY source exists in the repository,
the runtime stage ships both binaries and the installer as its entrypoint.
Usage: deploy_containerfile_test.py REPO_ROOT"""
import glob, os, re, shlex, sys

root = sys.argv[1]
text = open(os.path.join(root, "deploy/Containerfile")).read()
# Join continuation lines, drop comments.
lines = [l for l in re.sub(r"\\\n", " ", text).splitlines() if l.strip() and not l.lstrip().startswith("#")]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


froms = [l.split()[1] for l in lines if l.startswith("FROM ")]
check(len(froms) >= 2 and all(f.startswith("debian:") for f in froms), f"multi-stage, Debian bases: {froms}")
runs = " ".join(l for l in lines if l.startswith("RUN "))
check("tests/deps.sh build" in runs, "build stage installs dependencies with tests/deps.sh build")
check("-DRDMANET_TESTS=OFF" in runs, "build without tests")
check(re.search(r"ninja -C \S+ rdmanet rdmanet-ipam", runs) is not None, "builds both binaries with ninja")
check("tests/elf_deps.sh" in runs, "build stage checks the binaries depend only on glibc")
for l in lines:
    if not l.startswith("COPY "):
        continue
    args = shlex.split(l)[1:]
    if any(a.startswith("--from=") for a in args):
        continue
    for src in args[:-1]:
        check(bool(glob.glob(os.path.join(root, src))), f"COPY source {src} exists")
for f in ("deps.sh", "elf_deps.sh"):
    check(os.access(os.path.join(root, "tests", f), os.X_OK), f"tests/{f} is executable")
check(re.search(r"COPY --from=build .*rdmanet .*rdmanet-ipam", text) is not None, "runtime stage gets both binaries")
entry = [l for l in lines if l.startswith("ENTRYPOINT")]
check(bool(entry) and "/opt/rdmanet/install.sh" in entry[-1], "the installer is the entrypoint")
for f in ("install.sh", "node-prep.sh"):
    check(os.access(os.path.join(root, "deploy/installer", f), os.X_OK), f"deploy/installer/{f} is executable")
    check(f"/opt/rdmanet/{f}" in open(os.path.join(root, "deploy/base/daemonset.yaml")).read(),
          f"the DaemonSet runs /opt/rdmanet/{f}")
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
