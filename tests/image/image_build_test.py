#!/usr/bin/env python3
"""deploy/Containerfile built for real with podman, from this tree, at the two tags the
DaemonSet tier runs (the manifest's own and the one an upgrade moves to), on base images
made with debootstrap (imagelib.py says why). Then the image as shipped: what it holds
(the list and the size deploy/README.md states), stripped glibc-only binaries that print
the tag's version, the installer as entrypoint, and an install that needs no network.
Usage: image_build_test.py      (root)"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import imagelib  # noqa: E402

failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + (f"  [{detail}]" if detail and not cond else ""),
          flush=True)
    if not cond:
        failures.append(what)


def readme_image_section():
    text = open(os.path.join(imagelib.REPO, "deploy/README.md")).read()
    m = re.search(r"^## The image\n(.*?)(?=^## )", text, re.M | re.S)
    return m.group(1) if m else ""


# The names container engines give the links they make: podman's CNI backend (cni-podman0,
# veth<hex>), netavark (podman0, veth0...), buildah and docker. Other tiers of the suite
# add and delete links of their own while this runs beside them (ctest -j), so the whole
# link list is not compared.
ENGINE_LINK = re.compile(r"^(cni|podman|veth|netavark|buildah|docker|br-)")


def machine_network():
    """What a container engine could change on the machine's network: its links, firewall
    rules, IPv4 forwarding."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout if \
        shutil.which("iptables-save") else ""
    forward = open("/proc/sys/net/ipv4/ip_forward").read()
    names = re.findall(r"^\d+: ([^:@]+)", links, re.M)
    return (sorted(n for n in names if ENGINE_LINK.match(n)),
            [r for r in rules.splitlines() if not r.startswith("#")], forward)


def main():
    if os.geteuid() != 0:
        print("FAIL: needs root (podman, debootstrap)")
        return 1
    podman = imagelib.Podman()
    before = machine_network()
    try:
        timings = imagelib.ensure_images(podman)
    except RuntimeError as e:
        check(False, "the image builds from this tree", str(e))
        return 1
    after = machine_network()
    check(before == after, "the builds left the machine's links, firewall and forwarding alone",
          f"{before} -> {after}")
    print("     timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()), flush=True)
    check(True, "the image builds from this tree at both tags")
    # Old build-stage layers of earlier runs (this run's stay: the next build reuses them).
    podman("image", "prune", "-f", "--filter", "until=24h", check=False)

    img = imagelib.IMAGE
    run = lambda *a: podman("run", "--rm", "--network", "none", "--entrypoint", *a, check=False)
    listing = run("find", img, "/opt/rdmanet", "-mindepth", "1", "-maxdepth", "2",
                  "-not", "-path", "/opt/rdmanet/conf/*").stdout.split()
    entries = sorted(listing)
    check(entries == ["/opt/rdmanet/bin", "/opt/rdmanet/bin/rdmanet", "/opt/rdmanet/bin/rdmanet-ipam",
                      "/opt/rdmanet/conf", "/opt/rdmanet/install.sh", "/opt/rdmanet/node-prep.sh"],
          "the image holds the two binaries, the installer, node-prep and the example configs",
          str(entries))
    section = readme_image_section()
    for e in entries:
        if e != "/opt/rdmanet/bin":
            check(f"`{e}" in section, f"deploy/README.md \"The image\" lists {e}")
    size = int(podman("image", "inspect", "--format", "{{.Size}}", img).stdout)
    stated = re.search(r"(\d+) MB in all", section)
    check(stated is not None and abs(int(stated.group(1)) * 10**6 - size) <= 0.1 * size,
          f"deploy/README.md states the image's size ({size / 1e6:.0f} MB)",
          stated.group(0) if stated else "no \"N MB in all\" in the section")
    with tempfile.TemporaryDirectory() as tmp:
        for b in ("rdmanet", "rdmanet-ipam"):
            data = subprocess.run(podman.base + ["run", "--rm", "--network", "none", "--entrypoint",
                                                 "cat", img, f"/opt/rdmanet/bin/{b}"],
                                  env=podman.env, capture_output=True).stdout
            path = os.path.join(tmp, b)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, 0o755)
            sections = subprocess.run(["readelf", "-S", "-W", path], capture_output=True,
                                      text=True).stdout
            check(".symtab" not in sections and ".debug_info" not in sections,
                  f"{b} is stripped ({len(data) / 1e6:.1f} MB)")
            stated = re.search(rf"`/opt/rdmanet/bin/{re.escape(b)}`[^|]*\|\s*([\d.]+) MB", section)
            check(stated is not None and abs(float(stated.group(1)) * 1e6 - len(data)) <= 0.15 * len(data),
                  f"deploy/README.md states {b}'s size", stated.group(0) if stated else "")
        r = subprocess.run([os.path.join(imagelib.REPO, "tests/binary/elf_deps.sh"),
                            os.path.join(tmp, "rdmanet"), os.path.join(tmp, "rdmanet-ipam")],
                           capture_output=True, text=True)
        check(r.returncode == 0, "the image's binaries depend on glibc alone", r.stdout + r.stderr)
    for tag, version in imagelib.VERSIONS.items():
        out = podman("run", "--rm", "--network", "none", "--entrypoint",
                     "/opt/rdmanet/bin/rdmanet", tag, "version", check=False).stdout.strip()
        check(out == f"rdmanet {version}", f"{tag}: rdmanet version says {version}", out)
    entry = podman("image", "inspect", "--format", "{{json .Config.Entrypoint}}", img).stdout
    check("/opt/rdmanet/install.sh" in entry, "the installer is the image's entrypoint", entry)

    # Nothing at run time needs a network: an install with none, onto a scratch "host".
    with tempfile.TemporaryDirectory() as host:
        r = podman("run", "--rm", "--network", "none", "--read-only", "--read-only-tmpfs=false",
                   "--cap-drop", "ALL", "--cap-add", "DAC_OVERRIDE,FOWNER,CHOWN",
                   "--volume", f"{host}:/host:rw", img, "--once", check=False)
        installed = sorted(os.listdir(os.path.join(host, "opt/cni/bin"))) if os.path.isdir(
            os.path.join(host, "opt/cni/bin")) else []
        check(r.returncode == 0 and installed == ["rdmanet", "rdmanet-ipam"],
              "the image installs with no network, a read-only root and three capabilities",
              r.stderr[-500:])
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
