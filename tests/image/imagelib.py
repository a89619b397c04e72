"""The image tier's podman: a private storage and configuration (the machine's own podman
setup and images are never touched), the Debian base images deploy/Containerfile names,
and builds of the image from the repository.

No registry is reachable here, so `debian:12` and `debian:12-slim` are made with
debootstrap (minbase) from the machine's own Debian mirror and `podman import`, with the
APT sources a real debian:12 image has; `debian:12-slim` leaves out what the real slim
image leaves out (documentation, manuals, locales). They are cached between runs under
$RDMANET_IMAGE_CACHE (default /var/cache/rdmanet-image) and made again when missing.
"""
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.environ.get("RDMANET_IMAGE_CACHE", "/var/cache/rdmanet-image")
BASE_TAGS = ("docker.io/library/debian:12", "docker.io/library/debian:12-slim")
# The tag deploy/base/kustomization.yaml gives the image, and the one an upgrade moves to.
IMAGE = "localhost/rdmanet:0.1.0"
IMAGE_NEXT = "localhost/rdmanet:0.1.1-next"
VERSIONS = {IMAGE: "0.1.0", IMAGE_NEXT: "0.1.1-next"}
# What the real debian:12-slim's dpkg configuration keeps out (/etc/dpkg/dpkg.cfg.d/docker).
SLIM_EXCLUDES = ["./usr/share/doc/*", "./usr/share/man/*", "./usr/share/groff/*",
                 "./usr/share/info/*", "./usr/share/lintian/*", "./usr/share/locale/*"]


def log(msg):
    print(msg, flush=True)


class Podman:
    """podman with the tier's own storage, run root and configuration."""

    def __init__(self, cache=CACHE):
        self.cache = cache
        os.makedirs(os.path.join(cache, "conf"), exist_ok=True)
        conf = os.path.join(cache, "conf", "containers.conf")
        # Root here lacks CAP_SYS_RESOURCE: podman's default rlimits fail every run
        # (PEERS.md); crun fails on this machine's cgroup setup, runc works.
        with open(conf, "w") as f:
            f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
                    '[engine]\nruntime = "runc"\nevents_logger = "file"\n'
                    'cgroup_manager = "cgroupfs"\n')
        registries = os.path.join(cache, "conf", "registries.conf")
        with open(registries, "w") as f:
            f.write('unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n')
        self.env = dict(os.environ, CONTAINERS_CONF=conf, CONTAINERS_REGISTRIES_CONF=registries)
        self.base = ["podman", "--root", os.path.join(cache, "storage"),
                     "--runroot", "/run/rdmanet-image", "--storage-driver", "overlay"]

    def __call__(self, *args, check=True, capture=True, timeout=None, input=None):
        r = subprocess.run(self.base + list(args), env=self.env, text=True, input=input,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.PIPE if capture else None, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} failed ({r.returncode}): "
                               f"{(r.stderr or '')[-2000:]}")
        return r

    def exists(self, image):
        return self("image", "exists", image, check=False).returncode == 0


def debian_mirror():
    return subprocess.run([os.path.join(REPO, "tests", "tools", "debian_mirror.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()


def ensure_base_images(podman):
    """debian:12 and debian:12-slim in the tier's storage; returns seconds spent."""
    if all(podman.exists(t) for t in BASE_TAGS):
        log("base images: cached")
        return 0.0
    t0 = time.monotonic()
    mirror = debian_mirror()
    root = os.path.join(CACHE, "rootfs-bookworm")
    if not os.path.exists(os.path.join(root, ".complete")):
        shutil.rmtree(root, ignore_errors=True)
        debs = os.path.join(CACHE, "debootstrap-debs")
        os.makedirs(debs, exist_ok=True)
        log(f"base images: debootstrap --variant=minbase bookworm from {mirror}")
        r = subprocess.run(["debootstrap", "--variant=minbase", f"--cache-dir={debs}",
                            "bookworm", root, mirror], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("debootstrap failed: " + (r.stdout + r.stderr)[-3000:])
        # What a real debian:12 image carries: deb822 sources for the release, its updates
        # and security, no sources.list; no package lists.
        security = mirror.rsplit("/", 1)[0] + "/debian-security"
        with open(os.path.join(root, "etc/apt/sources.list.d/debian.sources"), "w") as f:
            f.write(f"Types: deb\nURIs: {mirror}\nSuites: bookworm bookworm-updates\n"
                    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
                    f"Types: deb\nURIs: {security}\nSuites: bookworm-security\n"
                    "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
        os.unlink(os.path.join(root, "etc/apt/sources.list"))
        subprocess.run(["sh", "-c", f"rm -rf {root}/var/lib/apt/lists/* {root}/var/cache/apt/*.bin"],
                       check=True)
        open(os.path.join(root, ".complete"), "w").close()
    for tag, excludes in ((BASE_TAGS[0], []), (BASE_TAGS[1], SLIM_EXCLUDES)):
        tar = subprocess.Popen(["tar", "-C", root, "--exclude", "./.complete"] +
                               [f"--exclude={e}" for e in excludes] + ["-c", "."],
                               stdout=subprocess.PIPE)
        r = subprocess.run(podman.base + ["import", "-q", "-", tag], env=podman.env,
                           stdin=tar.stdout, capture_output=True, text=True)
        tar.wait()
        if r.returncode != 0 or tar.returncode != 0:
            raise RuntimeError(f"podman import of {tag} failed: " + r.stderr)
    spent = time.monotonic() - t0
    log(f"base images: made in {spent:.0f} s")
    return spent


def apt_archive_cache():
    """A package cache for the build stage's apt-get: the machine's own downloaded .debs
    (hard links; the same mirror and release, so the same files) plus whatever earlier
    builds fetched. Only a speed-up: the build downloads what is missing."""
    d = os.path.join(CACHE, "apt-archives")
    os.makedirs(os.path.join(d, "partial"), exist_ok=True)
    host = "/var/cache/apt/archives"
    for name in os.listdir(host) if os.path.isdir(host) else []:
        if name.endswith(".deb") and not os.path.exists(os.path.join(d, name)):
            try:
                os.link(os.path.join(host, name), os.path.join(d, name))
            except OSError:
                shutil.copy2(os.path.join(host, name), os.path.join(d, name))
    return d


def build_image(podman, tag, version, platform=None, extra=()):
    """podman build of deploy/Containerfile from the repository; returns seconds spent."""
    t0 = time.monotonic()
    # --network host: the build's apt-get reaches the mirror through the machine's own
    # network; podman's default would create a bridge, firewall rules and turn on IPv4
    # forwarding on the machine.
    args = ["build", "--pull=never", "--network", "host",
            "-f", os.path.join(REPO, "deploy/Containerfile"),
            "-t", tag, "--build-arg", f"RDMANET_VERSION={version}",
            "-v", f"{apt_archive_cache()}:/var/cache/apt/archives"]
    if platform:
        # podman 4.3 does not fill in the automatic platform arguments in FROM lines.
        args += ["--platform", platform, "--build-arg", "BUILDPLATFORM=linux/amd64",
                 "--build-arg", f"TARGETPLATFORM={platform}"]
    r = podman(*args, *extra, REPO, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"podman build of {tag} failed:\n{(r.stdout + r.stderr)[-6000:]}")
    return time.monotonic() - t0


def ensure_images(podman, rebuild=True):
    """Base images, then the image at both tags the tiers use, built from this tree."""
    timings = {"base": ensure_base_images(podman)}
    for tag in (IMAGE, IMAGE_NEXT):
        if rebuild or not podman.exists(tag):
            timings[tag] = build_image(podman, tag, VERSIONS[tag])
            log(f"built {tag} in {timings[tag]:.0f} s")
    return timings


def build_arm64(tag="localhost/rdmanet:arm64"):
    """The image for linux/arm64, as deploy/README.md says to build it, in a storage of its
    own (local image names are per architecture there: its debian:12-slim is arm64, its
    debian:12 the builder's). The arm64 base is debootstrap's first stage (unpacked, not
    configured: the runtime stage runs nothing, so that is all the build needs; no
    emulation). Returns (podman, seconds)."""
    t0 = time.monotonic()
    podman = Podman(os.path.join(CACHE, "arm64"))
    if not podman.exists(BASE_TAGS[0]):
        ensure_base_images(Podman())  # the amd64 rootfs
        tar = subprocess.Popen(["tar", "-C", os.path.join(CACHE, "rootfs-bookworm"),
                                "--exclude", "./.complete", "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(podman.base + ["import", "-q", "-", BASE_TAGS[0]], env=podman.env,
                       stdin=tar.stdout, check=True, capture_output=True)
        tar.wait()
    if not podman.exists(BASE_TAGS[1]):
        root = os.path.join(CACHE, "rootfs-bookworm-arm64")
        if not os.path.exists(os.path.join(root, ".complete")):
            shutil.rmtree(root, ignore_errors=True)
            r = subprocess.run(["debootstrap", "--foreign", "--arch=arm64", "--variant=minbase",
                                "bookworm", root, debian_mirror()], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("debootstrap arm64 failed: " + (r.stdout + r.stderr)[-3000:])
            open(os.path.join(root, ".complete"), "w").close()
        tar = subprocess.Popen(["tar", "-C", root, "--exclude", "./.complete"] +
                               [f"--exclude={e}" for e in SLIM_EXCLUDES] + ["-c", "."],
                               stdout=subprocess.PIPE)
        subprocess.run(podman.base + ["import", "--arch", "arm64", "--variant", "v8", "-q", "-",
                                      BASE_TAGS[1]],
                       env=podman.env, stdin=tar.stdout, check=True, capture_output=True)
        tar.wait()
    build_image(podman, tag, VERSIONS[IMAGE], platform="linux/arm64")
    return podman, time.monotonic() - t0


if __name__ == "__main__":
    # `imagelib.py base`: the base images only (the tier's first fixture, which needs the
    # network and little CPU, so it runs beside other tests); without arguments both tags
    # are built as the tier does.
    if sys.argv[1:] == ["base"]:
        ensure_base_images(Podman())
    elif sys.argv[1:] == ["arm64"]:
        print(build_arm64()[1])
    else:
        print(ensure_images(Podman()))
    sys.exit(0)
