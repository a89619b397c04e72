#!/usr/bin/env python3
"""deploy/installer/install.sh: atomic install, idempotence, --check, the
re-check loop, uninstall. A reader hashes the destination in a tight loop
while the installer replaces a large binary: it must only ever see the old
or the new content. The same reader against a plain in-place `cp` must see a
partial file, which shows the reader can catch one.
Usage: deploy_installer_test.py INSTALL_SH"""
import hashlib, os, signal, stat, subprocess, sys, tempfile, threading, time

install = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def sha(data):
    return hashlib.sha256(data).hexdigest()


class Reader(threading.Thread):
    """Reads PATH over and over; counts reads per content hash and records every
    content not in ALLOWED."""

    def __init__(self, path, allowed):
        super().__init__(daemon=True)
        self.path, self.allowed, self.stop, self.reads, self.bad = path, allowed, False, 0, []
        self.seen = {}

    def run(self):
        while not self.stop:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                self.bad.append("missing")
                continue
            self.reads += 1
            digest = sha(data)
            self.seen[digest] = self.seen.get(digest, 0) + 1
            if digest not in self.allowed:
                self.bad.append(len(data))

    def wait_for(self, digest, seconds=60):
        deadline = time.time() + seconds
        while self.seen.get(digest, 0) == 0 and time.time() < deadline:
            time.sleep(0.05)


with tempfile.TemporaryDirectory(prefix="rdmanet-installer-") as tmp:
    src, binDir, confDir, state = (os.path.join(tmp, d) for d in ("src", "bin", "conf", "state"))
    os.makedirs(src)
    old = os.urandom(16 << 20)
    new = os.urandom(48 << 20)
    for name, data in (("rdmanet", new), ("rdmanet-ipam", b"#!/bin/sh\necho ipam\n")):
        with open(os.path.join(src, name), "wb") as f:
            f.write(data)
    cfg = os.path.join(tmp, "rdmanet-default.conf")
    with open(cfg, "w") as f:
        f.write('{"cniVersion":"1.1.0","name":"x","type":"rdmanet"}\n')
    env = dict(os.environ, SRC_DIR=src, CNI_BIN_DIR=binDir, CNI_CONF_DIR=confDir,
               STATE_DIR=state, DEFAULT_CONFIG=cfg, RECHECK_SECONDS="1", NODE_NAME="",
               NODE_NAME_FILE=os.path.join(tmp, "var/node-name"),
               ETCD_TLS_SRC=os.path.join(tmp, "secret"), ETCD_TLS_DIR=os.path.join(tmp, "etc/etcd"))
    run = lambda *a: subprocess.run(["sh", install, *a], env=env, capture_output=True, text=True)

    # An old version in place, plus a temporary left by a killed installer.
    os.makedirs(binDir)
    dest = os.path.join(binDir, "rdmanet")
    with open(dest, "wb") as f:
        f.write(old)
    open(os.path.join(binDir, ".rdmanet.rdmanet-tmp.999"), "w").close()

    # The reader runs from before the install (it has read the old file) until it
    # has read the new one, however slow the machine: it read across the replacement.
    reader = Reader(dest, {sha(old), sha(new)})
    reader.start()
    reader.wait_for(sha(old))
    r = run("--once")
    reader.wait_for(sha(new))
    reader.stop = True
    reader.join()
    check(r.returncode == 0, f"install --once exits 0 ({r.stderr.strip()})")
    check(not reader.bad, f"reader never saw a partial or missing file "
          f"({reader.reads} reads, bad: {reader.bad[:5]})")
    check(reader.seen.get(sha(old), 0) > 0 and reader.seen.get(sha(new), 0) > 0,
          f"reader read the file before and after it was replaced ({reader.reads} reads)")
    for name in ("rdmanet", "rdmanet-ipam"):
        p = os.path.join(binDir, name)
        with open(p, "rb") as f, open(os.path.join(src, name), "rb") as g:
            check(f.read() == g.read(), f"{name} has the image's content")
        check(stat.S_IMODE(os.stat(p).st_mode) == 0o755, f"{name} is 0755")
    check(sorted(os.listdir(binDir)) == ["rdmanet", "rdmanet-ipam"],
          f"no temporaries left in the bin dir: {sorted(os.listdir(binDir))}")
    conf = os.path.join(confDir, "rdmanet-default.conf")
    check(os.path.exists(conf) and stat.S_IMODE(os.stat(conf).st_mode) == 0o644,
          "default config installed 0644")
    check(stat.S_IMODE(os.stat(state).st_mode) == 0o700, "state dir is 0700")

    # Idempotent: an identical file is not rewritten (same inode).
    ino = os.stat(dest).st_ino
    check(run("--once").returncode == 0 and os.stat(dest).st_ino == ino,
          "second install leaves identical files alone")
    check(run("--check").returncode == 0, "--check passes after install")
    with open(os.path.join(binDir, "rdmanet-ipam"), "wb") as f:
        f.write(b"tampered")
    check(run("--check").returncode != 0, "--check fails when a binary differs")

    # The default mode re-installs what changed, and exits promptly on SIGTERM.
    p = subprocess.Popen(["sh", install], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 10
    while time.time() < deadline and run("--check").returncode != 0:
        time.sleep(0.2)
    check(run("--check").returncode == 0, "the running installer repaired the tampered binary")
    os.remove(dest)
    deadline = time.time() + 10
    while time.time() < deadline and not os.path.exists(dest):
        time.sleep(0.2)
    check(os.path.exists(dest), "the running installer put back a removed binary")
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=5)
        check(p.returncode == 0, f"SIGTERM ends the installer cleanly (rc {p.returncode})")
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, "SIGTERM ends the installer within 5 s")

    check(run("--uninstall").returncode == 0 and os.listdir(binDir) == [] and not os.path.exists(conf),
          "--uninstall removes binaries and default config")
    check(os.path.isdir(state), "--uninstall keeps the state dir (running pods need it for DEL)")

    # UNINSTALL=true on the DaemonSet: every node removes, then idles.
    check(run("--once").returncode == 0, "reinstall before the UNINSTALL run")
    uenv = dict(env, UNINSTALL="true")
    p = subprocess.Popen(["sh", install], env=uenv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline and os.listdir(binDir):
        time.sleep(0.1)
    check(os.listdir(binDir) == [], "UNINSTALL=true removes the binaries")
    r = subprocess.run(["sh", install, "--check"], env=uenv)
    check(r.returncode == 0, "UNINSTALL=true: --check is ready once they are gone")
    time.sleep(1.5)
    check(os.listdir(binDir) == [] and p.poll() is None, "UNINSTALL=true: stays up and does not reinstall")
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=5)

    # Cluster-mode IPAM: the node name from NODE_NAME and the etcd client Secret.
    nenv = dict(env, NODE_NAME="gpu-node-7")
    os.makedirs(env["ETCD_TLS_SRC"])
    for name in ("ca.crt", "tls.crt", "tls.key"):
        with open(os.path.join(env["ETCD_TLS_SRC"], name), "w") as f:
            f.write("PEM " + name + "\n")
    r = subprocess.run(["sh", install, "--once"], env=nenv, capture_output=True, text=True)
    check(r.returncode == 0, "NODE_NAME + Secret: install succeeds")
    with open(env["NODE_NAME_FILE"]) as f:
        check(f.read() == "gpu-node-7\n", "NODE_NAME written to NODE_NAME_FILE")
    key = os.path.join(env["ETCD_TLS_DIR"], "tls.key")
    check(os.path.exists(key) and stat.S_IMODE(os.stat(key).st_mode) == 0o600,
          "etcd client key installed 0600")
    check(stat.S_IMODE(os.stat(env["ETCD_TLS_DIR"]).st_mode) == 0o700, "etcd TLS dir is 0700")
    r = subprocess.run(["sh", install, "--check"], env=nenv, capture_output=True, text=True)
    check(r.returncode == 0, "--check passes with node files in place")
    r = subprocess.run(["sh", install, "--check"], env=dict(nenv, NODE_NAME="other"),
                       capture_output=True, text=True)
    check(r.returncode != 0, "--check fails when the node name file names another node")
    with open(os.path.join(env["ETCD_TLS_SRC"], "tls.key"), "w") as f:
        f.write("rotated\n")
    r = subprocess.run(["sh", install, "--check"], env=nenv, capture_output=True, text=True)
    check(r.returncode != 0, "--check fails after the Secret was rotated")

    # Uninstall with an attachment left: the binaries (and the node files cluster-mode DEL
    # reads) stay for its DEL; the default config goes at once; the state dir always stays.
    check(subprocess.run(["sh", install, "--once"], env=nenv).returncode == 0
          and os.path.exists(conf), "reinstall before uninstalling under a pod")
    os.makedirs(os.path.join(state, "rail0"), exist_ok=True)
    os.makedirs(os.path.join(state, ".agent"), exist_ok=True)
    record = os.path.join(state, "rail0", "c1.6e657431.json")
    open(record, "w").close()
    open(os.path.join(state, ".agent", "orphans.json"), "w").close()
    r = subprocess.run(["sh", install, "--uninstall"], env=nenv, capture_output=True, text=True)
    check(r.returncode == 3, f"--uninstall exits 3 while an attachment is left (rc {r.returncode})")
    check(sorted(os.listdir(binDir)) == ["rdmanet", "rdmanet-ipam"]
          and os.path.exists(env["NODE_NAME_FILE"]) and os.path.exists(key),
          "--uninstall keeps the binaries and the node files for the attachment's DEL")
    check("1 attachment(s) still on this node" in r.stderr, f"--uninstall says why: {r.stderr.strip()}")
    check(not os.path.exists(conf), "--uninstall removes the default config at once")
    ulog = open(os.path.join(tmp, "uninstall.log"), "w+")
    p = subprocess.Popen(["sh", install], env=dict(nenv, UNINSTALL="true"),
                         stdout=subprocess.DEVNULL, stderr=ulog)
    time.sleep(1)
    r = subprocess.run(["sh", install, "--check"], env=dict(nenv, UNINSTALL="true"))
    check(r.returncode != 0 and os.listdir(binDir), "UNINSTALL=true waits (not ready) while "
          "an attachment is left")
    os.unlink(record)
    # It looks every 5 s and removes the binaries before the node files: wait for all of them.
    def gone():
        return (os.listdir(binDir) == [] and not os.path.exists(env["NODE_NAME_FILE"])
                and not os.path.exists(key))
    deadline = time.time() + 30
    while time.time() < deadline and not gone():
        time.sleep(0.2)
    removed = gone()
    check(removed, "after the last DEL it removes binaries and node files")
    if not removed:
        ulog.seek(0)
        print(ulog.read())
    check(os.path.isdir(os.path.join(state, ".agent")), "the state dir and the agent's own stay")
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=5)
        check(True, "the uninstalling installer ends on SIGTERM")
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, "the uninstalling installer ends on SIGTERM")

    # Control: an in-place copy is visibly non-atomic to the same reader.
    with open(dest, "wb") as f:
        f.write(old)
    reader = Reader(dest, {sha(old), sha(new)})
    reader.start()
    for _ in range(20):
        subprocess.run(["cp", os.path.join(src, "rdmanet"), dest], check=True)
        with open(dest, "wb") as f:
            f.write(old)
        if reader.bad:
            break
    reader.stop = True
    reader.join()
    check(bool(reader.bad), "control: the reader does catch a non-atomic in-place cp")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
