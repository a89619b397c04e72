"""A Kubernetes node's runtime side, for tests: a private containerd (Debian's package)
with its CRI plugin, and a CRI v1 client that calls it the way kubelet does.

Everything containerd writes lives under one work directory (config, root, state,
socket, the CNI config and plugin directories, netns pins); the packaged service is
never started. libcni's result cache (/var/lib/cni, fixed in containerd 1.6) is kept off
the host by running the test in a mount namespace of its own with a tmpfs there
(enter_private_mounts). The CRI api.proto comes from Debian 13's
golang-github-kubernetes-cri-api-dev (tests/lab/fetch.sh cri-api) and is compiled here
with Debian's protoc and grpc_python_plugin; nothing of it is kept in the repo.
"""

import gzip
import hashlib
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_CACHE = os.environ.get("RDMANET_LAB_CACHE", "/var/cache/rdmanet-lab")
SANDBOX_IMAGE = "rdmanet.test/pause:1"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def run(*argv, check=True, **kw):
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def start_time_of(pid):
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), which tells the
    process from a later one with its pid; None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def wait_for_end(pid, start_time, limit):
    """Waits until process `pid` (started at `start_time`, see start_time_of; not
    necessarily a child of ours) has ended, at most `limit` seconds. True when it has."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        # A later process may have taken the pid before it was opened: its start time tells.
        if start_time_of(pid) != start_time:
            return True
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(limit * 1000))
    finally:
        os.close(fd)


def enter_private_mounts():
    """Re-executes this program in a mount namespace of its own (private propagation),
    with a tmpfs on /var/lib/cni, so that libcni's result cache and anything else under
    it stay out of the host's. Returns once inside."""
    if os.environ.get("RDMANET_CRI_MOUNTNS") == str(os.getpid()):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700", "rdmanet-cri", "/var/lib/cni"],
                       check=True)
        return
    os.makedirs("/var/lib/cni", mode=0o700, exist_ok=True)
    # unshare execs the program itself: its pid is the child's.
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'RDMANET_CRI_MOUNTNS=$$ exec "$@"', "sh", sys.executable] + sys.argv
    os.execvp("unshare", argv)


def compile_cri_api(out_dir):
    """Fetches api.proto (cached by the lab's fetch.sh) and compiles the Python stubs into
    out_dir. protoc 3.21 cannot read cri-api's gogoproto options, which only shape Go
    code: they are dropped."""
    proto = os.path.join(LAB_CACHE, "cri-api", "api.proto")
    if not os.path.exists(proto):
        r = subprocess.run(["bash", os.path.join(REPO, "tests/lab/fetch.sh"), "cri-api"])
        if r.returncode != 0 or not os.path.exists(proto):
            fail("cannot fetch the CRI api.proto (tests/lab/fetch.sh cri-api)")
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    with open(proto) as f:
        for line in f:
            if "gogoproto" in line:
                if line.lstrip().startswith(("import", "option")):
                    continue
                line = line.split(" [(gogoproto")[0] + ";\n"
            lines.append(line)
    with open(os.path.join(out_dir, "api.proto"), "w") as f:
        f.writelines(lines)
    plugin = shutil.which("grpc_python_plugin")
    if not plugin or not shutil.which("protoc"):
        fail("protoc or grpc_python_plugin missing (tests/tools/deps.sh installs them)")
    r = run("protoc", "-I" + out_dir, "--python_out=" + out_dir, "--grpc_python_out=" + out_dir,
            "--plugin=protoc-gen-grpc_python=" + plugin, os.path.join(out_dir, "api.proto"),
            check=False)
    if r.returncode != 0:
        fail("protoc on the CRI api.proto: " + r.stderr)
    sys.path.insert(0, out_dir)


def _tar_add(tar, name, data=None, mode=0o755, link=None, directory=False):
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.mtime = 0
    if directory:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    elif link is not None:
        info.type = tarfile.SYMTYPE
        info.linkname = link
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def build_sandbox_image(path, tools=("sh", "sleep", "ip", "cat", "ping", "ls")):
    """Writes an OCI image archive of busybox-static whose entrypoint sleeps, named
    SANDBOX_IMAGE through the annotation containerd's import reads."""
    busybox = shutil.which("busybox")
    if not busybox:
        fail("busybox missing (tests/tools/deps.sh installs busybox-static)")
    with open(busybox, "rb") as f:
        bb = f.read()
    layer_io = io.BytesIO()
    with tarfile.open(fileobj=layer_io, mode="w") as tar:
        for d in ("bin", "dev", "proc", "sys", "etc", "tmp"):
            _tar_add(tar, d, directory=True)
        _tar_add(tar, "bin/busybox", bb)
        for t in tools:
            _tar_add(tar, "bin/" + t, link="busybox")
    layer = layer_io.getvalue()
    layer_gz = gzip.compress(layer, mtime=0)

    def blob(data):
        return "sha256:" + hashlib.sha256(data).hexdigest()

    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/bin/sleep", "2147483647"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [blob(layer)]},
    }).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": blob(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": blob(layer_gz), "size": len(layer_gz)}],
    }).encode()
    index = json.dumps({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": blob(manifest), "size": len(manifest),
                       "annotations": {"io.containerd.image.name": SANDBOX_IMAGE,
                                       "org.opencontainers.image.ref.name": "1"}}],
    }).encode()
    with tarfile.open(path, "w") as tar:
        _tar_add(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644)
        _tar_add(tar, "index.json", index, 0o644)
        _tar_add(tar, "blobs", directory=True)
        _tar_add(tar, "blobs/sha256", directory=True)
        for data in (config, manifest, layer_gz):
            _tar_add(tar, "blobs/sha256/" + blob(data)[7:], data, 0o644)


CONFIG = """version = 2
root = "{w}/root"
state = "{w}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{w}/containerd.sock"

[ttrpc]
  address = "{w}/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{w}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{image}"
  # CRI asks oom_score_adj -998 for sandboxes; roots without CAP_SYS_RESOURCE cannot set it.
  restrict_oom_score_adj = true
  # Netns pins under containerd's state, not /var/run/netns.
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{w}/cni/bin"
    conf_dir = "{w}/cni/net.d"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
"""


class Containerd:
    """A private containerd. bin_dir and conf_dir are its CNI directories."""

    def __init__(self, work):
        self.work = work
        self.sock = os.path.join(work, "containerd.sock")
        self.bin_dir = os.path.join(work, "cni", "bin")
        self.conf_dir = os.path.join(work, "cni", "net.d")
        self.log_path = os.path.join(work, "containerd.log")
        self.proc = None
        for d in (self.bin_dir, self.conf_dir):
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(work, "config.toml"), "w") as f:
            f.write(CONFIG.format(w=work, image=SANDBOX_IMAGE))

    def start(self, timeout=30):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            ["containerd", "--config", os.path.join(self.work, "config.toml")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail("containerd exited with %d; its log: %s\n%s" %
                     (self.proc.returncode, self.log_path, self.log_tail()))
            if os.path.exists(self.sock) and self.ctr("version", check=False).returncode == 0:
                return
            time.sleep(0.05)
        fail("containerd did not answer on %s within %ds\n%s" % (self.sock, timeout, self.log_tail()))

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stops containerd alone: its shims (and so the pods) live on, as on a node."""
        if not self.proc or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def ctr(self, *args, check=True):
        return run("ctr", "--address", self.sock, "--namespace", "k8s.io", *args, check=check)

    def log_tail(self, n=40):
        try:
            with open(self.log_path) as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def kill_everything(self):
        """Test cleanup: containerd, then the shims and pod processes it left."""
        self.stop(signal.SIGKILL)
        # Shims were started with the containerd address in their command line.
        r = run("pgrep", "-f", "containerd-shim-runc-v2 .*-address " + self.sock, check=False)
        for pid in r.stdout.split():
            try:
                os.killpg(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
