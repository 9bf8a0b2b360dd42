"""pipette-launch preflight: prove every group's links before the job starts.

Started on every rank with the job's own rendered environment (RANK,
WORLD_SIZE, MASTER_ADDR/PORT, NCCL_* and GLOO_SOCKET_IFNAME per host) in
place of the training script. It reads the plan's groups from the JSON file
given as its argument and runs, one group type at a time (the groups of one
type are disjoint, so they run at once):
  - an all-reduce in every TP, CP and DP group,
  - a send/recv on every pipeline link (even then odd stages),
each group on its own process group (no world group: a broken pair stalls
only the groups that use it), with NCCL when the host has CUDA GPUs, else
gloo. Every operation has a timeout. When a group fails, its hosts' first
ranks test each pair of its hosts at once, so the report names the pair.
Ranks meet between phases on the TCPStore at MASTER_ADDR:MASTER_PORT.

Each result is one line on stdout: "::pipette-preflight:: {json}".
"""
import datetime
import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

MARK = "::pipette-preflight::"


def emit(**kv):
    kv.setdefault("t", round(time.time(), 3))
    sys.stdout.write(MARK + " " + json.dumps(kv, sort_keys=True) + "\n")
    sys.stdout.flush()


class Watchdog(object):
    """Ends the rank when an operation outlives every timeout we gave it
    (a collective stuck in a driver ignores them); the launcher then stops
    the rest."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.what = None
        self.since = None
        self.lock = threading.Lock()
        t = threading.Thread(target=self.run)
        t.daemon = True
        t.start()

    def arm(self, what):
        with self.lock:
            self.what, self.since = what, time.time()

    def disarm(self):
        with self.lock:
            self.what = None

    def run(self):
        while True:
            time.sleep(0.5)
            with self.lock:
                what, since = self.what, self.since
            if what is not None and time.time() - since > self.seconds:
                emit(event="hang", what=what, seconds=round(time.time() - since, 1))
                os._exit(3)


class Runner(object):
    def __init__(self, spec):
        self.spec = spec
        self.rank = int(os.environ["RANK"])
        self.world = int(os.environ["WORLD_SIZE"])
        self.timeout = datetime.timedelta(seconds=spec["timeout_s"])
        self.cuda = torch.cuda.is_available() and spec.get("backend", "auto") != "gloo"
        if self.cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        self.backend = "nccl" if self.cuda else "gloo"
        self.store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), self.world,
                                   self.rank == 0, self.timeout + datetime.timedelta(seconds=spec.get("start_slack_s", 120)))
        self.watchdog = Watchdog(3 * spec["timeout_s"] + 10)

    def new_pg(self, prefix, ranks, net):
        """A process group of the given global ranks (this rank among them)."""
        store = dist.PrefixStore(prefix, self.store)
        me = ranks.index(self.rank)
        if self.backend == "gloo":
            return dist.ProcessGroupGloo(store, me, len(ranks), self.timeout)
        opts = dist.ProcessGroupNCCL.Options()
        if hasattr(opts, "_timeout"):
            opts._timeout = self.timeout
        if net and hasattr(opts, "config") and hasattr(opts.config, "net_name"):
            opts.config.net_name = net
        return dist.ProcessGroupNCCL(store, me, len(ranks), opts)

    def tensor(self, nbytes):
        t = torch.ones(max(nbytes // 4, 1), dtype=torch.float32)
        return t.cuda() if self.cuda else t

    def wait(self, work):
        work.wait(self.timeout)
        if self.cuda:
            torch.cuda.synchronize()
        self.progress = time.time()

    def bounded(self, fn, *args):
        """Runs fn in a thread and gives up once it makes no progress for
        the timeout: a rank whose peer failed fast can wait in gloo's
        connect longer than any timeout it was given."""
        box = {}

        def run():
            try:
                box["value"] = fn(*args)
            except Exception as e:  # noqa: BLE001 - reported as the group's error
                box["error"] = e

        self.progress = time.time()
        t = threading.Thread(target=run)
        t.daemon = True
        t.start()
        while t.is_alive():
            t.join(0.2)
            if t.is_alive() and time.time() - self.progress > self.spec["timeout_s"]:
                raise TimeoutError("no progress for %gs (connecting or in the collective)" % self.spec["timeout_s"])
        if "error" in box:
            raise box["error"]
        return box["value"]

    def allreduce(self, g):
        pg = self.new_pg("g/%s/" % g["id"], g["ranks"], g.get("net"))
        self.progress = time.time()
        t = self.tensor(self.spec["bytes"])
        self.wait(pg.allreduce([t]))  # warm-up: connects the group
        times = []
        for _ in range(self.spec["iters"]):
            t0 = time.time()
            self.wait(pg.allreduce([t]))
            times.append(time.time() - t0)
        return times

    def sendrecv(self, g):
        pg = self.new_pg("g/%s/" % g["id"], g["ranks"], g.get("net"))
        self.progress = time.time()
        t = self.tensor(self.spec["bytes"])
        me = g["ranks"].index(self.rank)
        peer = 1 - me
        times = []
        for i in range(self.spec["iters"] + 1):
            t0 = time.time()
            if me == 0:
                self.wait(pg.send([t], peer, i))
                self.wait(pg.recv([t], peer, 1000 + i))
            else:
                self.wait(pg.recv([t], peer, i))
                self.wait(pg.send([t], peer, 1000 + i))
            if i > 0:
                times.append((time.time() - t0) / 2)  # one direction
        return times

    def barrier(self, name):
        n = self.store.add("barrier/" + name, 1)
        if n == self.world:
            self.store.set("barrier/%s/done" % name, "1")
        self.store.wait(["barrier/%s/done" % name], self.timeout + datetime.timedelta(seconds=self.spec.get("start_slack_s", 120)))

    def run_phase(self, phase):
        mine = [g for g in phase["groups"] if self.rank in g["ranks"]]
        for g in mine:
            self.watchdog.arm("%s group %s" % (g["type"], g["id"]))
            ok, err, times = True, "", []
            t0 = time.time()
            try:
                times = self.bounded(self.sendrecv if g["op"] == "sendrecv" else self.allreduce, g)
            except Exception as e:  # timeout, refused connection, NCCL error
                ok, err = False, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            self.watchdog.disarm()
            emit(event="group", id=g["id"], rank=self.rank, ok=ok, error=err, seconds=times, backend=self.backend,
                 elapsed=round(time.time() - t0, 2))
            self.store.set("status/%s/%d" % (g["id"], self.rank), "ok" if ok else "fail")
        self.barrier(phase["name"])
        failed = []
        for g in mine:
            if any(self.store.get("status/%s/%d" % (g["id"], r)) != b"ok" for r in g["ranks"]):
                failed.append(g)
        for g in failed:
            self.isolate(g)

    def isolate(self, g):
        """Each pair of the failed group's hosts, by their first ranks, at once."""
        first = {}
        for r, h in zip(g["ranks"], g["hosts"]):
            first.setdefault(h, r)
        if first.get(g["hosts"][g["ranks"].index(self.rank)]) != self.rank:
            return
        hosts = sorted(first, key=lambda h: first[h])
        pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
        mine = [(a, b) for a, b in pairs if self.rank in (first[a], first[b])]

        def test(a, b):
            ranks = [first[a], first[b]]
            ok, err = True, ""
            try:
                self.pair_exchange("pair/%s/%s-%s/" % (g["id"], a, b), ranks, g.get("net"))
            except Exception as e:
                ok, err = False, "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
            emit(event="pair", id=g["id"], hosts=[a, b], rank=self.rank, ok=ok, error=err)

        threads = [threading.Thread(target=test, args=p) for p in mine]
        for t in threads:
            t.daemon = True
            t.start()
        deadline = time.time() + 2 * self.spec["timeout_s"]
        for t in threads:
            t.join(max(deadline - time.time(), 0))
        for (a, b), t in zip(mine, threads):
            if t.is_alive():
                emit(event="pair", id=g["id"], hosts=[a, b], rank=self.rank, ok=False,
                     error="no answer within %gs" % (2 * self.spec["timeout_s"]))

    def pair_exchange(self, prefix, ranks, net):
        pg = self.new_pg(prefix, ranks, net)
        t = self.tensor(4096)
        peer = 1 - ranks.index(self.rank)
        if ranks.index(self.rank) == 0:
            self.wait(pg.send([t], peer, 0))
            self.wait(pg.recv([t], peer, 1))
        else:
            self.wait(pg.recv([t], peer, 0))
            self.wait(pg.send([t], peer, 1))


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    r = Runner(spec)
    emit(event="start", rank=r.rank, backend=r.backend, torch=torch.__version__)
    # Ranks start seconds apart (importing torch on a busy host): meet
    # first, so each operation's timeout measures the network alone.
    r.barrier("start")
    for phase in spec["phases"]:
        r.run_phase(phase)
    r.barrier("end")
    emit(event="done", rank=r.rank)
    # Rank 0 serves the store: it leaves last, once every rank is past the
    # end barrier, or the others' last store call meets a closed socket.
    left = r.store.add("left", 1)
    deadline = time.time() + spec["timeout_s"] + 30
    while r.rank == 0 and left < r.world and time.time() < deadline:
        time.sleep(0.1)
        left = r.store.add("left", 0)
    # Threads left waiting on a peer that never came must not hold the exit.
    os._exit(0)


if __name__ == "__main__":
    main()
