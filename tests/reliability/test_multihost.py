#!/usr/bin/python3
"""A real run across several hosts: three "hosts" on this machine, each a network + UTS
namespace with its own hostname and a veth link to a private bridge (multihost/net.sh), and
Open MPI's mpirun started on the first one, reaching the others through an rsh agent that
enters their namespace (multihost/agent.sh), over TCP on the veths only. Every case makes
its own hosts (names unique to the run: asmh<PID>...) and removes them when it ends, also
on SIGTERM/SIGINT; a run killed harder is cleaned up by the next (net.sh reap).

  pss        3 hosts x 2 ranks: one weights copy per host -- the PSS of each rank's
             weights mapping (the node's shared window, src/mpi/weights.c), summed over a
             host's ranks, is one copy; the ranks of a host share one segment, other hosts
             have their own -- the hosts are the three names in /provenance, and the file
             equals a one-host run bit for bit
  kill_master  the master's host killed mid-run (SIGKILL to every process of its namespace,
             after a commit): the other hosts' processes end by themselves, the same
             command resumes and the file equals the one-host run; work committed before
             the kill is kept
  kill_worker  the same with a worker's host: mpirun ends the job, the resume equals it
  usr1       SIGUSR1 to mpirun while the windows are out on the other hosts: every rank
             ends with exit code 3 (docs/usage.md, Exit codes), the windows in hand are committed
             (none abandoned inside the grace), the resume equals the one-host run
  usr1_remote  SIGUSR1 to one worker on another host only: the whole job stops gracefully
             (exit 3) and resumes to the same file

Exits 77 (ctest's SKIP_RETURN_CODE) with one "SKIPPED: ..." line when this machine cannot make
namespaces (not root, no iproute2, a container without CAP_SYS_ADMIN/CAP_NET_ADMIN).
Every wait is for an event (a hook's phase line, a process's exit), bounded only by a hang
limit, never a duration a verdict depends on.

usage: test_multihost.py ATTNSWEEP_TEST MODEL_DIR SCRATCH [case ...]
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import (ENV, check, run_cases, same_values, signal_delivered, summary, wait_for_phase,
                       write_tokens_config)

BIN, MODEL, SCRATCH = (os.path.abspath(a) for a in sys.argv[1:4])
ONLY = set(sys.argv[4:])
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multihost")
NET, AGENT = os.path.join(HERE, "net.sh"), os.path.join(HERE, "agent.sh")
HANG = 120  # s: a hang limit only, far above any loaded machine's run of this grid (~1 s)
RUN_ID = f"asmh{os.getpid()}"
WINDOWS, CELLS_PER_WINDOW = 12, 3
RANK_COMM = os.path.basename(BIN)[:15]  # /proc/PID/comm of a rank


def write_config(d, output):
    write_tokens_config(f"{d}/s.cfg", MODEL, output, WINDOWS, 3)


REFERENCE = None


def reference():
    """The one-host run every case compares with: one process, no namespaces."""
    global REFERENCE
    if REFERENCE is None:
        d = f"{SCRATCH}/ref"
        os.makedirs(d, exist_ok=True)
        shutil.copy(f"{SCRATCH}/tokens.npy", d)
        write_config(d, "ref.h5")
        p = subprocess.run([BIN, "run", "s.cfg"], cwd=d, env=ENV, capture_output=True, text=True,
                           timeout=HANG)
        check(p.returncode == 0, f"the one-host run: exit {p.returncode}: {p.stderr[-400:]}")
        REFERENCE = f"{d}/ref.h5"
    return REFERENCE


class Hosts:
    """N namespace hosts named RUN_ID + hK; `with Hosts(...)` removes them at the end."""
    count = 0

    def __init__(self, n, d):
        Hosts.count += 1
        self.id = f"{RUN_ID}x{Hosts.count}"
        self.n, self.dir = n, d
        self.names = [f"{self.id}h{i}" for i in range(n)]

    def __enter__(self):
        p = subprocess.run(["bash", NET, "up", self.id, str(self.n), self.dir], capture_output=True,
                           text=True)
        if p.returncode != 0:
            self.__exit__()
            raise RuntimeError(f"net.sh up: {p.stderr.strip()}")
        return self

    def __exit__(self, *exc):
        subprocess.run(["bash", NET, "down", self.id])

    def pids(self, host, comm=None):
        """The processes in host's namespace (all of them, or those named comm)."""
        p = subprocess.run(["ip", "netns", "pids", self.names[host]], capture_output=True, text=True)
        out = []
        for s in p.stdout.split():
            try:
                with open(f"/proc/{s}/comm") as f:
                    c = f.read().strip()
            except OSError:
                continue
            if comm is None or c == comm:
                out.append(int(s))
        return out

    def mpirun(self, d, ranks, args, env, first=0, **kw):
        """`mpirun ... BIN run ARGS` started inside host `first` (with its own hostname), ranks
        spread over the hosts by node from there (rank 0, the master, on host `first`)."""
        order = self.names[first:] + self.names[:first]
        hostfile = f"{self.dir}/hostfile.{first}"
        with open(hostfile, "w") as f:
            f.writelines(f"{n} slots=8\n" for n in order)
        fwd = [a for k in sorted(env) if k.startswith(("ATTNSWEEP_", "OPENBLAS_", "OMPI_ALLOW"))
               for a in ("-x", k)]
        cmd = ["mpirun", "--hostfile", hostfile, "-np", str(ranks), "--map-by", "node",
               "--mca", "plm_rsh_agent", AGENT, "--mca", "plm_rsh_no_tree_spawn", "1",
               "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "eth0",
               "--mca", "oob_tcp_if_include", "eth0"] + fwd + [BIN, "run"] + args
        wrap = ["ip", "netns", "exec", self.names[first], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.names[first]] + cmd
        return subprocess.Popen(wrap, cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, **kw)

    def wait_empty(self, hosts, timeout=HANG):
        """Until no process is left in the given hosts' namespaces; True when so."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not any(self.pids(h) for h in hosts):
                return True
            time.sleep(0.05)
        return False


def case_dir(name):
    d = f"{SCRATCH}/{name}"
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(f"{SCRATCH}/tokens.npy", d)
    write_config(d, "out.h5")
    return d


def finish(p, what):
    try:
        out, err = p.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, f"{what}: still running after {HANG} s")
    return p.returncode, out, err


def done_cells(path):
    with h5py.File(path, "r") as f:
        return int((f["status"][()] == 1).sum())


def hosts_of(path):
    with h5py.File(path, "r") as f:
        return [h.decode() if isinstance(h, bytes) else h for h in f["provenance/hosts"][()]]


def digest(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def held_env(d, phase):
    return dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=f"{d}/phase", ATTNSWEEP_TEST_HOLD=phase,
                ATTNSWEEP_TEST_RELEASE=f"{d}/release")


# --- PSS: one weights copy per host ------------------------------------------------------

def weights_mappings(pid, copy):
    """[(dev:inode or "private", path, Pss bytes)] of pid's mappings of one weights copy's
    size (0.9 to 1 copy + 1 MiB: the arena holds the tensors without the file's header and
    names, plus its alignment and page rounding): the
    weights, in the node's shared window or in a private arena when a rank holds its own
    copy. Thread stacks (8 MiB) and BLAS buffers are of other sizes."""
    out, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                cur = None
                if 0.9 * copy <= hi - lo <= copy + 2**20:
                    ident = f"{parts[3]}:{parts[4]}" if parts[1][3] == "s" else "private"
                    cur = [ident, parts[5] if len(parts) > 5 else "[anon]", 0]
                    out.append(cur)
            elif cur is not None and parts[0] == "Pss:":
                cur[2] = int(parts[1]) * 1024
    return [tuple(m) for m in out]


def case_pss():
    d = case_dir("pss")
    st = os.stat(f"{MODEL}/model.safetensors")
    copy = st.st_size  # f32 safetensors: the arena holds the same tensors
    with Hosts(3, d) as h:
        # held after the first commit: every rank has mapped the weights (weights_load is
        # collective, before the first window), and the run is still going
        env = held_env(d, "journal_synced 1")
        p = h.mpirun(d, 6, ["s.cfg"], env)
        check(wait_for_phase(f"{d}/phase", "journal_synced", 1, p, timeout=HANG), "the run reached its first commit")
        per_host, segs = [], []
        for i in range(3):
            ranks = h.pids(i, RANK_COMM)
            check(len(ranks) == 2, f"host {i}: {len(ranks)} ranks, want 2")
            maps = [weights_mappings(r, copy) for r in ranks]
            pss = sum(m[2] for ms in maps for m in ms)
            per_host.append(pss)
            segs.append({m[0] for ms in maps for m in ms if m[0] != "private"})
            print(f"pss: host {i} ({h.names[i]}): ranks {ranks}, weights PSS {pss / 2**20:.2f} MiB "
                  f"(one copy {copy / 2**20:.2f} MiB): "
                  + "; ".join(f"{m[1]} {m[2] / 2**20:.2f}" for ms in maps for m in ms), flush=True)
        open(f"{d}/release", "w").close()
        rc, _, err = finish(p, "pss run")
        check(rc == 0, f"3-host run: exit {rc}: {err[-600:]}")
        for i, pss in enumerate(per_host):
            check(0.8 * copy <= pss <= 1.25 * copy,
                  f"host {i}: weights PSS {pss} B is not one copy ({copy} B) per host")
        for i in range(3):
            check(len(segs[i]) == 1, f"host {i}: its ranks map {len(segs[i])} shared weights segments, want 1")
            for j in range(i):
                check(not segs[i] & segs[j], f"hosts {j} and {i} map the same weights segment {segs[i]}")
    check(hosts_of(f"{d}/out.h5") == [",".join(h.names)],
          f"/provenance hosts {hosts_of(f'{d}/out.h5')} are not the three namespace hosts")
    same_values(reference(), f"{d}/out.h5", "3 hosts vs one host")


# --- a host killed mid-run -----------------------------------------------------------------

def kill_host(victim):
    d = case_dir(f"kill_{victim}")
    v = 0 if victim == "master" else 1
    with Hosts(3, d) as h:
        # held at the second commit: cells are durable, most windows are not done
        p = h.mpirun(d, 3, ["s.cfg"], held_env(d, "journal_synced 2"))
        check(wait_for_phase(f"{d}/phase", "journal_synced", 2, p, timeout=HANG), f"{victim}: the run reached its second commit")
        pids = h.pids(v)
        check(pids and any(RANK_COMM == open(f"/proc/{q}/comm").read().strip()
                           for q in pids if os.path.exists(f"/proc/{q}")),
              f"{victim}'s host {h.names[v]} runs a rank: {pids}")
        for q in pids:
            try:
                os.kill(q, signal.SIGKILL)
            except ProcessLookupError:
                pass
        open(f"{d}/release", "w").close()
        rc, _, err = finish(p, f"{victim}'s host killed")
        if victim == "worker":
            check(rc not in (0, 3), f"a lost host is a failed job, not a finished or saved one: mpirun exit {rc}")
        others = [i for i in range(3) if i != v]
        # the survivors must not hang on: Open MPI ends the job when a host is lost
        gone = h.wait_empty(range(3))
        check(gone, f"{victim}'s host killed: processes left on the hosts: "
              f"{[(i, h.pids(i)) for i in others]}")
        if not gone:
            return
        done = done_cells(f"{d}/out.h5") if os.path.exists(f"{d}/out.h5") else -1
        print(f"kill_{victim}: mpirun exit {rc}; {done} of {WINDOWS * CELLS_PER_WINDOW} cells in the file "
              f"after the kill; its last lines:\n  " + "\n  ".join(err.strip().splitlines()[-6:]), flush=True)
        if victim == "master":
            # The dead master's lock names its host: a resume whose master is on another
            # host cannot tell that run is dead, and refuses in one line saying how to
            # remove the lock (docs/reliability.md), leaving the files as they are.
            before = {x: digest(f"{d}/out.h5{x}") for x in ("", ".journal", ".lock")}
            r = h.mpirun(d, 3, ["s.cfg"], ENV, first=1)
            rc, _, err = finish(r, "resume with the master on another host")
            mine = [l for l in err.splitlines() if l.startswith("attnsweep")]
            check(rc != 0 and len(mine) == 1 and "locked by pid" in mine[0] and h.names[0] in mine[0]
                  and "remove the lock: rm '" in mine[0],
                  f"resume on another host: exit {rc}, want one line naming the dead master's host "
                  f"and the rm: {mine}")
            check(before == {x: digest(f"{d}/out.h5{x}") for x in before},
                  "the refused resume on another host left the files unchanged")
        r = h.mpirun(d, 3, ["s.cfg"], ENV)
        rc, _, err = finish(r, f"resume after the {victim}'s host was killed")
        check(rc == 0, f"resume after the {victim}'s host was killed: exit {rc}: {err[-600:]}")
        kept = [l for l in err.splitlines() if "before this run" in l]
        check(kept and " 0 before this run" not in kept[-1],
              f"the cells committed before the kill are kept: {kept[-1:]}")
        print(f"kill_{victim}: resume: {kept[-1:]}", flush=True)
    same_values(reference(), f"{d}/out.h5", f"{victim}'s host killed + resume vs one host")


def case_kill_master():
    kill_host("master")


def case_kill_worker():
    kill_host("worker")


# --- SIGUSR1 across hosts ------------------------------------------------------------------

def usr1(target):
    d = case_dir(f"usr1_{target}")
    with Hosts(3, d) as h:
        # The commit on the master's receiving thread (ATTNSWEEP_SYNC_COMMIT=1) journals each
        # dispatch (one record per cell) just before sending it; held at the first cell of
        # the third window, the master has sent two windows (normally one to each worker:
        # each starts with one) and received at least one result, and waits right before
        # sending the next: windows are out on the other hosts when the signal comes.
        third = 2 * CELLS_PER_WINDOW + 1
        env = dict(held_env(d, f"dispatch_written {third}"), ATTNSWEEP_SYNC_COMMIT="1")
        p = h.mpirun(d, 3, ["s.cfg"], env)
        check(wait_for_phase(f"{d}/phase", "dispatch_written", third, p, timeout=HANG),
              f"usr1 {target}: the third window's dispatch")
        ranks = [q for i in range(3) for q in h.pids(i, RANK_COMM)]
        check(len(ranks) == 3, f"usr1 {target}: 3 ranks, one per host: {ranks}")
        if target == "mpirun":
            # Every rank is stopped (SIGSTOP) while mpirun forwards the signal, so its arrival
            # is seen as a pending SIGUSR1 in each rank -- on every host -- before any
            # handler runs; then they go on (SIGCONT) and take it.
            for q in ranks:
                os.kill(q, signal.SIGSTOP)
            # stopped for certain before the signal comes (a SIGUSR1 arriving while the stop is
            # still pending would be taken first: it is the lower number)
            for q in ranks:
                check(wait_state(q, "T"), f"usr1: rank pid {q} stopped")
            mpirun = h.pids(0, "mpirun")
            check(len(mpirun) == 1, f"usr1: one mpirun on host 0: {mpirun}")
            os.kill(mpirun[0], signal.SIGUSR1)
            for q in ranks:
                check(wait_pending(q, signal.SIGUSR1), f"usr1: mpirun forwarded SIGUSR1 to rank pid {q} "
                      f"on host {[i for i in range(3) if q in h.pids(i)]}")
            for q in ranks:
                os.kill(q, signal.SIGCONT)
            targets = ranks
        else:
            targets = h.pids(2, RANK_COMM)
            os.kill(targets[0], signal.SIGUSR1)
        for q in targets:
            check(signal_delivered(q, signal.SIGUSR1), f"usr1 {target}: SIGUSR1 handled by rank pid {q}")
        open(f"{d}/release", "w").close()
        rc, _, err = finish(p, f"usr1 {target}")
        check(rc == 3, f"usr1 {target}: mpirun exit {rc}, want 3 (every rank saved and exited 3): "
              f"{err[-600:]}")
        check("stopping: no new windows; waiting up to 4m00s (stop grace)" in err,
              f"usr1 {target}: the stop line: {err[-600:]}")
        check("stop grace of" not in err, f"usr1 {target}: a window was abandoned inside the grace: {err[-600:]}")
        done = done_cells(f"{d}/out.h5")
        # at least the window whose result came back before the signal, and the ones out on
        # the hosts that had started (no "abandoning" line above: none was cut off)
        check(CELLS_PER_WINDOW <= done < WINDOWS * CELLS_PER_WINDOW,
              f"usr1 {target}: {done} cells done at the stop: want the windows received and in hand "
              f"(at least one) and not the whole sweep")
        print(f"usr1_{target}: mpirun exit {rc}; {done} of {WINDOWS * CELLS_PER_WINDOW} cells at the stop; "
              "the sweep's lines:\n  " + "\n  ".join(l for l in err.splitlines() if l.startswith(("sweep", "attnsweep"))),
              flush=True)
        r = h.mpirun(d, 3, ["s.cfg"], ENV)
        rc, _, err = finish(r, f"usr1 {target}: resume")
        check(rc == 0, f"usr1 {target}: resume: exit {rc}: {err[-600:]}")
    same_values(reference(), f"{d}/out.h5", f"SIGUSR1 to {target} + resume vs one host")


def wait_state(pid, state, timeout=HANG):
    """Until pid's /proc/PID/status State is `state` (a letter); True when so."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                if any(l.split()[1] == state for l in f if l.startswith("State:")):
                    return True
        except OSError:
            return False
        time.sleep(0.005)
    return False


def wait_pending(pid, signo, timeout=HANG):
    """Until signo is pending in pid (/proc/PID/status SigPnd or ShdPnd); True when so."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(f"/proc/{pid}/status") as f:
                masks = [int(l.split()[1], 16) for l in f if l.startswith(("ShdPnd:", "SigPnd:"))]
        except OSError:
            return False
        if any(m >> (signo - 1) & 1 for m in masks):
            return True
        time.sleep(0.005)
    return False


def case_usr1():
    usr1("mpirun")


def case_usr1_remote():
    usr1("remote")


def skip(why):
    print(f"SKIPPED: the multi-host test needs network and UTS namespaces: {why}", flush=True)
    sys.exit(77)


def main():
    if os.geteuid() != 0:
        skip("it must run as root")
    p = subprocess.run(["bash", NET, "check"], capture_output=True, text=True)
    if p.returncode != 0:
        skip((p.stdout + p.stderr).strip() or "net.sh check failed")
    subprocess.run(["bash", NET, "reap"])
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda signo, _: sys.exit(128 + signo))  # runs the with-blocks' cleanup
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    rng = np.random.default_rng(3)
    np.save(f"{SCRATCH}/tokens.npy", rng.integers(0, 50257, size=2000).astype("<u2"))
    cases = [case_pss, case_kill_master, case_kill_worker, case_usr1, case_usr1_remote]
    run_cases(cases, ONLY, label="case ")
    sys.exit(summary("test_multihost"))


main()
