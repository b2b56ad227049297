"""A one-host Slurm for tests: munged, slurmctld and slurmd started as root from a config in
a temporary directory, the node at 127.0.0.1 (``proctrack/linuxproc``, ``task/none``,
``select/cons_tres``, no accounting daemon).

Debian's ``slurm-wlm`` and ``munge`` packages provide the daemons; run as root without them,
:func:`one_host_slurm` installs them with ``apt-get install -y slurm-wlm munge``. Every daemon
runs in the foreground as a child of the test (own munge socket and key, own ports, own
state and spool directories), so nothing of the machine's own Slurm or munge is used or
touched, and each is stopped by its process id when the ``with`` block ends, also on failure.
Clients find this cluster through ``$SLURM_CONF`` (:attr:`Slurm.env`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from sweeper.servers import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")
NODE = "sweepernode"
READY_S = 30.0
JOBS_END_S = 60.0


class SlurmUnavailable(RuntimeError):
    """This machine cannot run the test's Slurm (not root, or the packages missing)."""


@dataclass
class Slurm:
    """A running one-host cluster: its directory, the clients' environment, the daemons."""

    directory: Path
    env: dict[str, str]
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    leftovers: list[str] = field(default_factory=list)  # what had to be killed at the end

    def run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command (sbatch, squeue, scontrol, ...) against this cluster."""
        return subprocess.run(
            list(command), env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job``'s fields (JobState, ExitCode, Reason, ...) of a job."""
        done = self.run("scontrol", "--oneliner", "show", "job", job_id)
        assert done.returncode == 0, done.stderr
        return dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _binaries() -> dict[str, str]:
    found = {name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or ""
             for name in (*DAEMONS, "sbatch", "scontrol", "mungekey")}  # fmt: skip
    return {name: path for name, path in found.items() if path}


def ensure_installed() -> dict[str, str]:
    """The daemons' paths; installs ``slurm-wlm`` and ``munge`` with apt-get when they are
    missing and we are root; :class:`SlurmUnavailable` saying what to do otherwise."""
    if os.geteuid() != 0:
        raise SlurmUnavailable(
            "the Slurm test starts slurmctld, slurmd and munged as root: run it as root "
            "(sudo make test-slurm)"
        )
    found = _binaries()
    if len(found) < len(DAEMONS) + 3:
        install = subprocess.run(
            ["apt-get", "install", "-y", "slurm-wlm", "munge"], capture_output=True, text=True
        )
        found = _binaries()
        if len(found) < len(DAEMONS) + 3:
            raise SlurmUnavailable(
                "Slurm or munge is not installed and `apt-get install -y slurm-wlm munge` did "
                f"not install it: {(install.stderr or install.stdout)[-600:]}"
            )
    return found


def _config(directory: Path, cpus: int, kill_wait_s: int) -> str:
    return "\n".join(
        [
            "ClusterName=sweepertest",
            f"SlurmctldHost=localhost({'127.0.0.1'})",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={directory}/munge.socket",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            f"KillWait={kill_wait_s}",
            "MinJobAge=3600",
            f"StateSaveLocation={directory}/state",
            f"SlurmdSpoolDir={directory}/spool",
            f"SlurmctldPidFile={directory}/slurmctld.pid",
            f"SlurmdPidFile={directory}/slurmd.pid",
            f"SlurmctldLogFile={directory}/slurmctld.log",
            f"SlurmdLogFile={directory}/slurmd.log",
            f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname=localhost CPUs={cpus} State=UNKNOWN",
            f"PartitionName=test Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@contextmanager
def one_host_slurm(directory: Path, kill_wait_s: int = 30) -> Iterator[Slurm]:
    """munged, slurmctld and slurmd from a config in ``directory``, until the block ends;
    yields once ``sinfo`` shows the node idle."""
    binaries = ensure_installed()
    directory = Path(directory).resolve()
    for sub in ("state", "spool"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    conf = directory / "slurm.conf"
    conf.write_text(_config(directory, os.cpu_count() or 1, kill_wait_s))
    key = directory / "munge.key"
    subprocess.run([binaries["mungekey"], "--create", f"--keyfile={key}"], check=True)
    key.chmod(0o400)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    env["SLURM_CONF"] = str(conf)
    slurm = Slurm(directory, env)
    commands = {
        "munged": [binaries["munged"], "--foreground", "--force", f"--key-file={key}",
                   f"--socket={directory}/munge.socket", f"--pid-file={directory}/munged.pid",
                   f"--log-file={directory}/munged.log", f"--seed-file={directory}/munged.seed"],
        "slurmctld": [binaries["slurmctld"], "-D", "-i", "-f", str(conf)],
        "slurmd": [binaries["slurmd"], "-D", "-N", NODE, "-f", str(conf)],
    }  # fmt: skip
    with ExitStack() as stack:
        stack.callback(stop_daemons, slurm)
        for name, command in commands.items():
            slurm.daemons[name] = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(directory / f"{name}.stderr", "w"),  # noqa: SIM115
                start_new_session=True,
            )
            if name == "munged":
                _until(lambda: (directory / "munge.socket").exists(), "munged's socket", slurm)
        _until(lambda: _idle(slurm), "the node to be idle in sinfo", slurm)
        yield slurm


def _idle(slurm: Slurm) -> bool:
    done = slurm.run("sinfo", "--noheader", "--format=%t", timeout=10)
    return done.returncode == 0 and done.stdout.strip() == "idle"


def _until(predicate, what: str, slurm: Slurm) -> None:
    deadline = time.monotonic() + READY_S
    while not predicate():
        for name, process in slurm.daemons.items():
            if process.poll() is not None:
                raise SlurmUnavailable(
                    f"{name} exited ({process.returncode}) while waiting for {what}: "
                    f"{(slurm.directory / f'{name}.stderr').read_text()[-1500:]}"
                    f"{slurm.log(name)[-1500:]}"
                )
        if time.monotonic() > deadline:
            raise SlurmUnavailable(
                f"timed out after {READY_S:.0f}s waiting for {what}: slurmctld.log "
                f"{slurm.log('slurmctld')[-1500:]} slurmd.log {slurm.log('slurmd')[-1500:]}"
            )
        time.sleep(0.3)


def stop_daemons(slurm: Slurm) -> None:
    """Cancel every job and wait until none is left (its slurmstepd processes outlive
    slurmd otherwise); stop slurmd, slurmctld, then munged, each by its process id (SIGTERM,
    SIGKILL after 15 s); then SIGKILL any process still started from this cluster (its
    environment names this cluster's ``SLURM_CONF``), noting it in ``slurm.leftovers``."""
    if all(process.poll() is None for process in slurm.daemons.values()):
        slurm.run("scancel", "--full", f"--user={os.geteuid()}")
        deadline = time.monotonic() + JOBS_END_S
        while time.monotonic() < deadline:
            done = slurm.run("squeue", "--noheader", timeout=10)
            if done.returncode != 0 or not done.stdout.strip():
                break
            time.sleep(1)
    for name in reversed(DAEMONS):
        process = slurm.daemons.get(name)
        if process is None or process.poll() is not None:
            continue
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for pid, command in started_from(slurm.env["SLURM_CONF"]):
        slurm.leftovers.append(f"{pid} {command}")
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def started_from(conf: str) -> list[tuple[int, str]]:
    """Live processes whose environment names ``SLURM_CONF=conf`` (the daemons, their
    slurmstepd and the jobs' processes), with their command lines."""
    marker = f"SLURM_CONF={conf}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # a zombie: already dead, its parent not yet told
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # ended meanwhile
            continue
        found.append((int(entry.name), command.strip()))
    return found
