"""Print the containerd facts the scenarios assert on, as JSON.

`containerd config dump` (the merged configuration: main file plus imports),
parsed with tomllib, and the daemon's PID, start time and `ctr version`.
"""
import json
import subprocess
import tomllib


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


unit = dict(
    line.split("=", 1)
    for line in run("systemctl", "show", "containerd", "-p", "ActiveState", "-p", "MainPID",
                    "-p", "ExecMainStartTimestampMonotonic", "-p", "ActiveEnterTimestamp").splitlines()
)
version = subprocess.run(["ctr", "version"], capture_output=True, text=True, check=False)
print(json.dumps({
    "config": tomllib.loads(run("containerd", "config", "dump")),
    "active": unit["ActiveState"],
    "main_pid": int(unit["MainPID"]),
    "started_monotonic": int(unit["ExecMainStartTimestampMonotonic"]),
    "started": unit["ActiveEnterTimestamp"],
    "ctr_version_rc": version.returncode,
    "ctr_version": version.stdout + version.stderr,
}))
