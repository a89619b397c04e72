"""A Kubernetes node made of a network namespace and a root directory, for running the
DaemonSet's containers (podspec.py) and calling CNI as the node's runtime does.

- network: namespace `rdmanet-node-<id>` with an uplink veth (192.0.2.10/24, its peer in a
  "switch" namespace) and the devices pods get (veths whose peers sit in the switch);
- root: a directory with the real host's /usr (read-only), /dev, a procfs, a sysfs mounted
  from the node's namespace (so /sys/class/net shows the node's devices) and the host's
  netns pins (/run/netns, a slave of the real one: pins made later appear, nothing done
  here propagates back). Everything else (/opt/cni/bin, /etc, /var/lib) is the node's own;
  hostPath volumes are paths under it.

The runtime stand-in calls CNI from the node's namespace, chrooted into the node's root,
with CNI_NETNS=/run/netns/<pod>: the paths a record holds are then those the node agent
(which chroots into the same root) sees.
"""
import json
import os
import shutil
import subprocess
import tempfile

NODE_IP = "192.0.2.10"


def sh(*cmd, check=True, **kw):
    r = subprocess.run(list(cmd), capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


class NodeEnv:
    def __init__(self, tag):
        self.tag = tag  # short, unique: interface names are built from it
        self.netns = f"rdmanet-node-{tag}"
        self.switch = f"rdmanet-sw-{tag}"
        self.tmp = tempfile.mkdtemp(prefix=f"rdmanet-node-{tag}.")
        self.root = os.path.join(self.tmp, "root")
        self.pods = []
        self._mounted = False

    def __enter__(self):
        try:
            self._net()
            self._root()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _net(self):
        sh("ip", "netns", "add", self.netns)
        sh("ip", "netns", "add", self.switch)
        sh("ip", "-n", self.netns, "link", "set", "lo", "up")
        up = f"{self.tag}up"
        sh("ip", "link", "add", up, "netns", self.netns, "type", "veth", "peer", "name",
           f"{self.tag}sw", "netns", self.switch)
        sh("ip", "-n", self.netns, "addr", "add", f"{NODE_IP}/24", "dev", up)
        sh("ip", "-n", self.netns, "link", "set", up, "up")
        sh("ip", "-n", self.switch, "link", "set", f"{self.tag}sw", "up")

    def _root(self):
        r = self.root
        os.makedirs(r)
        sh("mount", "--bind", r, r)
        self._mounted = True
        # Shared, so that a container mounting it HostToContainer sees mounts made later.
        sh("mount", "--make-rshared", r)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"),
                             ("lib64", "usr/lib64")):
            if os.path.islink("/" + link):
                os.symlink(target, os.path.join(r, link))
        for d in ("usr", "proc", "dev", "sys", "run/netns", "tmp", "etc", "var"):
            os.makedirs(os.path.join(r, d), exist_ok=True)
        os.chmod(os.path.join(r, "tmp"), 0o1777)
        os.symlink("../run", os.path.join(r, "var/run"))
        sh("mount", "--bind", "/usr", f"{r}/usr")
        sh("mount", "-o", "remount,bind,ro", f"{r}/usr")
        sh("mount", "-t", "proc", "proc", f"{r}/proc")
        sh("mount", "--rbind", "/dev", f"{r}/dev")
        sh("mount", "--make-rslave", f"{r}/dev")
        sh("nsenter", f"--net=/run/netns/{self.netns}", "mount", "-t", "sysfs", "sysfs",
           f"{r}/sys")
        # The host's pins: a slave (nothing propagates back to the real /run/netns) that is
        # shared onwards (so the node agent's HostToContainer mount receives new pins).
        sh("mount", "--rbind", "/run/netns", f"{r}/run/netns")
        sh("mount", "--make-rslave", f"{r}/run/netns")
        sh("mount", "--make-shared", f"{r}/run/netns")

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def add_device(self, i):
        """A device for a pod: veth `<tag>d<i>` in the node, its peer in the switch."""
        name = f"{self.tag}d{i}"
        sh("ip", "link", "add", name, "netns", self.netns, "type", "veth", "peer", "name",
           f"{self.tag}p{i}", "netns", self.switch)
        sh("ip", "-n", self.switch, "link", "set", f"{self.tag}p{i}", "up")
        return name

    def link_in(self, netns, name):
        return sh("ip", "-n", netns, "link", "show", "dev", name, check=False).returncode == 0

    def add_pod_netns(self, name):
        ns = f"rdmanet-pod-{self.tag}-{name}"
        sh("ip", "netns", "add", ns)
        self.pods.append(ns)
        return ns

    def cni(self, command, config, container_id, netns=None, ifname="net1", binary="rdmanet",
            timeout=60):
        """A CNI call as the node's runtime makes it: from the node's network namespace,
        chrooted into its root. Returns (rc, stdout, stderr)."""
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container_id, "CNI_IFNAME": ifname,
               "CNI_PATH": "/opt/cni/bin", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
               "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=team;K8S_POD_NAME={container_id}"}
        if netns:
            env["CNI_NETNS"] = f"/run/netns/{netns}"
        r = subprocess.run(["nsenter", f"--net=/run/netns/{self.netns}", "chroot", self.root,
                            f"/opt/cni/bin/{binary}"], input=json.dumps(config), env=env,
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def close(self):
        for ns in self.pods:
            sh("ip", "netns", "del", ns, check=False)
        if self._mounted:
            sh("umount", "-R", "-l", self.root, check=False)
        # Deleting the namespaces deletes their veths (and the peers in the other one).
        for ns in (self.netns, self.switch):
            sh("ip", "netns", "del", ns, check=False)
        # Never remove files through a mount still there (the host's /dev, /usr, ...).
        with open("/proc/self/mountinfo") as f:
            left = [line.split()[4] for line in f if line.split()[4].startswith(self.tmp)]
        if left:
            raise RuntimeError(f"mounts left under {self.tmp}: {left}; not removed")
        shutil.rmtree(self.tmp, ignore_errors=True)
