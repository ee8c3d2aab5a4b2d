"""A local connection that is not called local: a fake node that can be rebooted.

The upgrade never reboots over the local connection, so the node doubles use
this one. Commands run locally, except the two that ansible.builtin.reboot uses
on the machine itself: the shutdown binary becomes the fake-reboot stub of the
node, and the boot id is the node's own file. The node's state directory is
its ansible_host.
"""
import os
import re

from ansible.plugins.connection.local import Connection as LocalConnection

DOCUMENTATION = """
    name: fakenode
    short_description: local execution for node doubles (tests only)
    description:
        - Runs commands on the controller, with the reboot and boot id of a node double.
    author: gpuops.platform maintainers
    options: {}
"""

_SHUTDOWN = re.compile(r"(?<![\w/])/(?:usr/)?(?:s?bin)/shutdown\b")


class Connection(LocalConnection):
    transport = "fakenode"

    def exec_command(self, cmd, in_data=None, sudoable=True):
        state = self._play_context.remote_addr
        stub = os.path.join(os.environ["UPGRADE_BIN"], "fake-reboot")
        cmd = _SHUTDOWN.sub("MIG_FAKE_STATE=%s %s" % (state, stub), cmd)
        if "shutdown" in cmd and stub not in cmd:
            raise AssertionError("fakenode: refusing a shutdown it could not redirect: %s" % cmd)
        cmd = cmd.replace("/proc/sys/kernel/random/boot_id", os.path.join(state, "boot_id"))
        return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
