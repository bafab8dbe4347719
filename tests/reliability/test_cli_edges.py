#!/usr/bin/python3
"""Small things the CLI must get right (docs/reliability.md), through the real `attnsweep_test`
(the program with the store's test hooks, src/store/testhook.h):

  start_race        a run started while another has just created the output's journal (held
                    there by the journal_created hook: no config record yet) is refused with
                    "in use" naming the lock, not "journal holds no config record"; the first
                    run then finishes
  status_no_journal_models  `status` of a two-model output without its journal: each model's
                    total is windows x L (not twice that), the sum of the models' is the total
  include_fifo      `run OUT.h5` and `plan OUT.h5` whose stored config @includes a FIFO: refused
                    in one line naming it (a timeout fails the case instead of hanging)
  set_group         `--set 'grid={...}'` (a whole group, which would reset N, T, eps to their
                    defaults) is refused in one line that says to set grid.L etc. one by one
  plan_memory       `plan` warns in one line when the master needs more than MemTotal (a grid
                    whose master needs ~1 TiB), and not for a small grid
  status_dead_writer  `status CONFIG` reports on the config's output as `status OUT.h5` does;
                    a writer killed (held at journal_synced, then SIGKILL) leaves state
                    "running" in the status file: status marks it stale beside "writer: DEAD"

usage: test_cli_edges.py ATTNSWEEP_TEST MODEL_DIR SCRATCH [case ...]
"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from sweeptest import ENV, check, run_cases, summary, wait_for_phase

BIN, MODEL, SCRATCH = sys.argv[1:4]
BIN, MODEL, SCRATCH = os.path.abspath(BIN), os.path.abspath(MODEL), os.path.abspath(SCRATCH)
ONLY = set(sys.argv[4:])


def setup(name, model=None, T="[8.0]", commit_every=1):
    d = os.path.join(SCRATCH, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    rng = np.random.default_rng(3)
    np.save(f"{d}/tokens.npy", rng.integers(0, 50257, size=300).astype("<u2"))
    with open(f"{d}/a.cfg", "w") as f:
        f.write(f"""model = {model or '"' + MODEL + '"'};
text = {{ path = "tokens.npy"; format = "tokens"; }};
windows = {{ count = 2; offset = 0; stride = 64; }};
grid = {{ L = [16, 32]; N = [1, 2]; T = {T}; eps = [1e-3]; normalizer = ["softmax"]; }};
output = "out.h5";
runtime = {{ commit_every = {commit_every}; }};
""")
    return d


def cli(args, d, timeout=300):
    return subprocess.run([BIN] + args, cwd=d, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def lines(p):
    return [l for l in p.stderr.splitlines() if l.strip()]




def held_run(d, phase):
    """`run a.cfg` in d, held at the store's test hook `phase` (released by creating d/release);
    (the process, whether it got there)."""
    env = dict(ENV, ATTNSWEEP_TEST_PHASE_FILE=f"{d}/phases", ATTNSWEEP_TEST_RELEASE=f"{d}/release",
               ATTNSWEEP_TEST_HOLD=phase)
    a = subprocess.Popen([BIN, "run", "a.cfg"], cwd=d, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    return a, wait_for_phase(f"{d}/phases", phase, 1, a)


def case_status_dead_writer():
    d = setup("status_dead_writer")
    a, held = held_run(d, "journal_synced")
    check(held, "the run never reached its first commit")
    a.kill()
    a.communicate(timeout=60)
    by_out, by_cfg = cli(["status", "out.h5"], d), cli(["status", "a.cfg"], d)
    first = [p.stdout.splitlines()[0].split(": ", 1)[-1] if p.stdout else "" for p in (by_out, by_cfg)]
    check(by_cfg.returncode == by_out.returncode == 3 and first[0] and first[0] == first[1],
          f"status a.cfg reports as status out.h5: {by_cfg.returncode} {by_cfg.stderr!r} {first}")
    check(os.path.join(d, "out.h5") in by_cfg.stdout, f"status a.cfg names the output: {by_cfg.stdout!r}")
    state = [l for l in by_out.stdout.splitlines() if "state " in l]
    check("writer: DEAD" in by_out.stdout and state and "state running (stale: the writer is dead)" in state[0],
          f"a dead writer's 'running' is marked stale: {by_out.stdout!r}")
    bad = cli(["status", "nothere.cfg"], d)
    check(bad.returncode == 1 and len(lines(bad)) == 1 and "nothere.cfg" in bad.stderr,
          f"status of a missing config: one line: {bad.returncode} {bad.stderr!r}")
    p = cli(["run", "a.cfg"], d)
    done = cli(["status", "a.cfg"], d)
    check(p.returncode == 0 and done.returncode == 0 and "stale" not in done.stdout,
          f"resumed and finished: status a.cfg exit {done.returncode}: {done.stdout!r}")


def case_start_race():
    d = setup("start_race")
    a, held = held_run(d, "journal_created")
    check(held, "run A never stopped after creating its journal")
    b = cli(["run", "a.cfg"], d)
    msg = lines(b)
    check(b.returncode == 1 and len(msg) == 1 and "in use" in msg[0] and "out.h5.lock" in msg[0]
          and "config record" not in msg[0],
          f"run B, started while A writes its first journal records, is told 'in use': exit "
          f"{b.returncode}: {b.stderr!r}")
    open(f"{d}/release", "w").close()
    _out, err = a.communicate(timeout=300)
    check(a.returncode == 0, f"run A finishes: exit {a.returncode}: {err[-300:]}")


def case_status_no_journal_models():
    d = setup("status_no_journal_models", model='["tiny_a", "tiny_b"]')
    for m in ("tiny_a", "tiny_b"):
        shutil.copytree(MODEL, f"{d}/{m}")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"run: exit {p.returncode}: {p.stderr[-300:]}")
    os.unlink(f"{d}/out.h5.journal")
    s = cli(["status", "out.h5"], d)
    rows = re.findall(r"model \d+ (\S+): (\d+)/(\d+) cells done", s.stdout)
    check(len(rows) == 2 and all(done == total == "4" for _name, done, total in rows),
          f"status without the journal: each model 4/4 cells done (2 windows x 2 L): {s.stdout!r}")
    check("cells (model x window x L) 8/8 done" in s.stdout, f"status total 8/8: {s.stdout!r}")


def case_include_fifo():
    d = setup("include_fifo")
    p = cli(["run", "a.cfg"], d)
    check(p.returncode == 0, f"run: exit {p.returncode}: {p.stderr[-300:]}")
    os.mkfifo(f"{d}/fifo.cfg")
    # the config the file stores: without its journal, the view's config_text attribute
    os.unlink(f"{d}/out.h5.journal")
    with h5py.File(f"{d}/out.h5", "a") as f:
        text = f.attrs["config_text"]
        text = text.decode() if isinstance(text, bytes) else str(text)
        f.attrs["config_text"] = '@include "fifo.cfg"\n' + text
    for cmd in (["run", "out.h5"], ["plan", "out.h5"]):
        try:
            r = cli(cmd, d, timeout=60)
        except subprocess.TimeoutExpired:
            check(False, f"{' '.join(cmd)}: still waiting on the FIFO after 60 s")
            continue
        msg = lines(r)
        check(r.returncode > 0 and len(msg) == 1 and "fifo.cfg" in msg[0] and "FIFO" in msg[0],
              f"{' '.join(cmd)}: a stored config that @includes a FIFO is refused in one line "
              f"naming it: exit {r.returncode}: {r.stderr!r}")


def case_set_group():
    d = setup("set_group")
    for cmd in (["plan", "a.cfg"], ["run", "a.cfg"]):
        r = cli(cmd + ["--set", "grid={ L = [16]; }"], d)
        msg = lines(r)
        check(r.returncode > 0 and len(msg) == 1 and "--set grid" in msg[0] and "grid.L" in msg[0],
              f"{cmd[0]} --set 'grid={{...}}' is refused, saying to set grid.L etc.: exit "
              f"{r.returncode}: {r.stderr!r}")
    check(not os.path.exists(f"{d}/out.h5"), "set_group: no output was made")
    r = cli(["plan", "a.cfg", "--set", "grid.L=[16]"], d)
    check(r.returncode == 0, f"plan --set grid.L=[16] still works: exit {r.returncode}: {r.stderr!r}")


def mem_total():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def case_plan_memory():
    ram = mem_total()
    if ram is None:
        print("plan_memory: skipped: /proc/meminfo has no MemTotal")
        return
    # the master holds 2 x commit_every + 1 result blocks: ~1 TiB with 100000 T values
    d = setup("plan_memory", T="{ min = 0.1; max = 10.0; count = 100000; }", commit_every=4096)
    r = cli(["plan", "a.cfg"], d)
    m = re.search(r"the master ([\d.]+) (\w+)", r.stdout)
    units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
    master = float(m.group(1)) * units[m.group(2)] if m else 0
    warn = [l for l in lines(r) if "warning" in l and "master" in l]
    if master > ram:
        check(r.returncode == 0 and len(warn) == 1 and "MemTotal" in warn[0]
              and "runtime.commit_every" in warn[0],
              f"plan warns that the master's {master:.3g} bytes exceed MemTotal {ram}: {r.stderr!r}")
    else:
        print(f"plan_memory: this machine has {ram} bytes, more than the master's {master:.3g}: "
              "the warning is not checked")
    d = setup("plan_memory_small")
    r = cli(["plan", "a.cfg"], d)
    check(r.returncode == 0 and not [l for l in lines(r) if "master" in l],
          f"plan of a small grid gives no memory warning: {r.stderr!r}")


CASES = [case_start_race, case_status_dead_writer, case_status_no_journal_models, case_include_fifo, case_set_group,
         case_plan_memory]

if __name__ == "__main__":
    os.makedirs(SCRATCH, exist_ok=True)
    run_cases(CASES, ONLY)
    sys.exit(summary("test_cli_edges " + " ".join(sorted(ONLY))))
