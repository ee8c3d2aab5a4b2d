"""The waves a plan.json shows and the batches an upgrade.yml run ran, read the same way by every test."""
import re

UPGRADE_PLAY = "PLAY [Upgrade the NVIDIA driver and toolkit, wave by wave]"


def planned_waves(plan):
    order = plan["order"]
    return [order[b["first"]:b["first"] + b["size"]] for b in plan["waves"]["batches"]]


def ran_waves(out):
    """The batches ansible-playbook ran: the hosts of each upgrade play's first task, per play, sorted (a batch's
    hosts run at once, and their results print in the order they finish)."""
    waves = []
    for chunk in out.split(UPGRADE_PLAY)[1:]:
        first_task = chunk.split("TASK [")[1]
        waves.append(sorted(re.findall(r"^(?:ok|changed|skipping|fatal): \[([^\]]+)\]", first_task, re.M)))
    return waves


def members(waves):
    """Each wave's hosts, sorted: what a batch is, whatever order its hosts finish in."""
    return [sorted(w) for w in waves]


def said_waves(out):
    """The wave N/M lines upgrade.yml printed (the YAML callback folds long ones)."""
    text = " ".join(out.split())
    return _waves(re.findall(r"wave (\d+)/(\d+): ([^'\"]+)['\"]", text))


def shown_waves(lines):
    """The wave N/M lines among ``lines``, such as the message of upgrade.yml's "Show the waves" task."""
    return _waves([m.groups() for m in (re.match(r"wave (\d+)/(\d+): (.+)$", line) for line in lines) if m])


def _waves(found):
    assert found and [int(n) for n, _t, _h in found] == list(range(1, len(found) + 1)), found
    assert all(int(total) == len(found) for _n, total, _h in found), found
    return [hosts.strip().split(", ") for _n, _t, hosts in found]
