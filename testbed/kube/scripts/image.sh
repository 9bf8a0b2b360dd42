#!/bin/bash
# Build a container image from Debian packages installed on this machine (their files as dpkg lists them, with
# the installed packages they depend on, plus the shell tools the host script needs) in docker-save layout, and
# import it into the running stack's containerd (namespace k8s.io). Nothing is pulled. The tar is cached under
# $IMAGES keyed by the image name and the packages' versions; containerd's store is wiped by every up.sh.
# Usage: image.sh REF PACKAGE...     env: PIPETTE_K8S_DIR (state dir), IMAGES (cache dir)
set -euo pipefail
T=${PIPETTE_K8S_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pipette-k8s}
IMAGES=${IMAGES:-$T/images}
[ $# -ge 2 ] || { echo "usage: $0 REF PACKAGE..." >&2; exit 2; }
ref=$1; shift
mkdir -p "$IMAGES"
# The host script runs under sh with setsid, ps, awk, mktemp, date, timeout, env (util-linux, procps, mawk, coreutils).
base="dash coreutils util-linux procps mawk grep sed"
missing=$(for p in $base "$@"; do dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || echo "$p"; done)
[ -z "$missing" ] || { echo "image.sh: not installed: $missing (apt-get install them)" >&2; exit 1; }
pkgs=$(apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances $base "$@" 2>/dev/null |
  grep -v '^ ' | tr -d '<>' | sort -u |
  while read -r p; do dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package} ${Version}\n' "$p" 2>/dev/null; done | awk '$1 == "ii" {print $2, $3}' | sort -u)
key=$(printf 'recipe 4\n%s\n%s\n' "$ref" "$pkgs" | sha256sum | cut -c1-16)   # bump the recipe number when this script changes
tarfile=$IMAGES/$(echo "$ref" | tr '/:@' '___')-$key.tar
if [ ! -s "$tarfile" ]; then
  echo "$pkgs" | awk '{print $1}' | xargs dpkg-query -L 2>/dev/null | sort -u > "$IMAGES/files.$$"
  python3 - "$ref" "$IMAGES/files.$$" "$tarfile.new" <<'PY'
import hashlib, io, json, os, sys, tarfile
ref, listing, out = sys.argv[1:4]
# Canonical paths: with merged /usr, /bin/dash is usr/bin/dash (the parent resolved), and /bin etc. are links.
paths = set()
for line in open(listing):
    p = line.strip()
    if not p.startswith("/") or p == "/." or not os.path.lexists(p):
        continue
    d, b = os.path.split(p)
    paths.add(os.path.join(os.path.realpath(d), b))
# What Debian provides through alternatives (awk -> /etc/alternatives/awk -> mawk; libblas.so.3 -> openblas) is
# no package's files: the links whose target is in the image come along.
import subprocess, sysconfig
retarget = {}  # /etc/alternatives link -> the choice the image holds
multiarch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
for d in ("/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib/" + multiarch):
    if not os.path.isdir(d):
        continue
    for name in os.listdir(d):
        p = os.path.join(d, name)
        if p in paths or not os.path.islink(p) or not os.readlink(p).startswith("/etc/alternatives/"):
            continue
        if os.path.realpath(p) in paths:
            paths.add(p)
            paths.add(os.readlink(p))
            continue
        # The machine's choice is a package outside the image (libblas.so.3 -> openblas, installed later for
        # something else): point the image's link at a choice that is in it (libblas3's), or the library is missing.
        alt = os.readlink(p)
        q = subprocess.run(["update-alternatives", "--query", os.path.basename(alt)], capture_output=True, text=True)
        for line in q.stdout.splitlines():
            if line.startswith("Alternative: ") and line.split(" ", 1)[1] in paths:
                paths.add(p)
                paths.add(os.path.dirname(alt))
                retarget[alt] = line.split(" ", 1)[1]
                break
links = [d for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32") if os.path.islink(d)]
for p in list(paths):  # every parent directory, so the layer is complete on its own
    d = os.path.dirname(p)
    while d not in ("/", ""):
        paths.add(d)
        d = os.path.dirname(d)
layer = out + ".layer"
with tarfile.open(layer, mode="w", format=tarfile.PAX_FORMAT) as t:
    def add_bytes(name, data, mode=0o644):
        ti = tarfile.TarInfo(name); ti.size = len(data); ti.mode = mode
        t.addfile(ti, io.BytesIO(data))
    for name, mode in (("tmp", 0o1777), ("etc", 0o755), ("root", 0o700), ("proc", 0o755), ("sys", 0o755), ("dev", 0o755)):
        ti = tarfile.TarInfo(name); ti.type = tarfile.DIRTYPE; ti.mode = mode; t.addfile(ti)
    for l in links:
        ti = tarfile.TarInfo(l[1:]); ti.type = tarfile.SYMTYPE; ti.linkname = os.readlink(l); t.addfile(ti)
    add_bytes("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    add_bytes("etc/group", b"root:x:0:\n")
    for p in sorted(paths):
        if p in links or p in ("/tmp", "/etc", "/root"):
            continue
        t.add(p, arcname=p[1:], recursive=False, filter=lambda ti: (setattr(ti, "uid", 0), setattr(ti, "gid", 0), setattr(ti, "uname", "root"), setattr(ti, "gname", "root"), ti)[-1])
    for alt, target in sorted(retarget.items()):
        ti = tarfile.TarInfo(alt[1:]); ti.type = tarfile.SYMTYPE; ti.linkname = target; t.addfile(ti)
h = hashlib.sha256()
with open(layer, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
diff = "sha256:" + h.hexdigest()
cfg = json.dumps({"architecture": "amd64", "os": "linux",
                  "config": {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONUNBUFFERED=1"], "Cmd": ["/bin/sh"], "WorkingDir": "/"},
                  "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
cname = hashlib.sha256(cfg).hexdigest() + ".json"
with tarfile.open(out, "w") as t:
    t.add(layer, arcname="layer.tar")
    for name, body in ((cname, cfg), ("manifest.json", json.dumps([{"Config": cname, "RepoTags": [ref], "Layers": ["layer.tar"]}]).encode())):
        ti = tarfile.TarInfo(name); ti.size = len(body); t.addfile(ti, io.BytesIO(body))
os.remove(layer)
PY
  rm -f "$IMAGES/files.$$"; mv "$tarfile.new" "$tarfile"
fi
ctr -a "$T/containerd/containerd.sock" -n k8s.io images import "$tarfile" >/dev/null
echo "image $ref imported from $tarfile ($(du -h "$tarfile" | cut -f1))"
