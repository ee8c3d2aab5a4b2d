# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: ssh_keypair
author:
  - gpuops.platform maintainers (@gpuops)
version_added: 0.1.0
short_description: A new Ed25519 SSH key pair, in memory
description:
  - Generates a new Ed25519 key pair on the controller and returns it in OpenSSH formats, without writing any file.
  - Every call returns a different pair. It is meant for short-lived trust between pods of one run, for example the
    launcher and the worker of the two-node NCCL smoke test, whose namespace is deleted after the run.
  - The private key is a secret. Keep it out of output with C(no_log) on every task whose result carries it.
requirements:
  - cryptography (a dependency of ansible-core) on the controller
notes:
  - The key has no passphrase; it only ever lives in a Kubernetes Secret that the run deletes.
"""

EXAMPLES = r"""
- name: Make a key pair for the test pods
  ansible.builtin.set_fact:
    test_key: "{{ query('gpuops.platform.ssh_keypair') | first }}"
  no_log: true
"""

RETURN = r"""
_raw:
  description: One key pair.
  type: list
  elements: dict
  contains:
    private_key:
      description: The private key, OpenSSH format (C(-----BEGIN OPENSSH PRIVATE KEY-----)), with a trailing newline.
      type: str
    public_key:
      description: The public key as one C(authorized_keys) line (C(ssh-ed25519 AAAA...)), with a trailing newline.
      type: str
"""

from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.lookup import LookupBase

try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError:  # pragma: no cover - ansible-core itself depends on cryptography
    Ed25519PrivateKey = None


def new_keypair():
    """{'private_key', 'public_key'} of a new Ed25519 key, both as OpenSSH text."""
    if Ed25519PrivateKey is None:
        raise AnsibleLookupError("ssh_keypair needs the Python 'cryptography' package on the controller: pip install cryptography")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return {"private_key": to_text(private), "public_key": to_text(public) + "\n"}


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        # No options: a call that passes any is refused rather than ignored.
        if terms or kwargs:
            raise AnsibleLookupError("ssh_keypair takes no terms or options, got %s" % (list(terms) + sorted(kwargs)))
        return [new_keypair()]
