# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The attributes every module declares; each module sets C(support) and its own C(details).

    A module's own keys win over the fragment's (ansible's fragment merge), so the
    descriptions live here once and a module never repeats them.
    """

    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  platform:
    description: Target OS/families that can be operated against.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled or queried by the module has not changed in a relevant way.
"""

    # With DOCUMENTATION: a module that runs on a managed (Linux) node.
    NODE = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: posix
"""

    # With DOCUMENTATION: a module that reads and reports, never changes anything.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    details: This action does not modify state; it runs the same in check mode.
  diff_mode:
    support: none
    details: This action does not modify state, so there is nothing to diff.
  idempotent:
    support: full
    details: This action does not modify state.
"""

    # With DOCUMENTATION: a module that converges state it fully predicts, so it supports all three;
    # the module adds what its check mode reports and what its diff shows in each C(details).
    CONVERGE = r"""
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

    # With DOCUMENTATION: a module implemented by an action plugin that runs on the controller only.
    CONTROLLER = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the work run on the controller.
    support: full
    details: The whole work runs on the controller.
  async:
    description: Supports being used with the C(async) keyword.
    support: none
  bypass_host_loop:
    description: Forces a 'global' task that does not execute per host.
    support: none
    details: Runs once per host it is called on; use C(run_once) for a single run.
  platform:
    support: full
    platforms: all
    details: Runs on the controller and makes no connection to the host, so the host's platform does not matter.
"""

    # With DOCUMENTATION and NODE: a node module whose action plugin only prepares its arguments on the controller.
    NODE_ACTION = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the work run on the controller.
    support: full
    details: The action plugin adds the controller's nvidia-ml-py to the module's arguments; the module runs on the node.
"""

    # With DOCUMENTATION: a module that returns facts.
    FACTS = r"""
options: {}
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
"""
