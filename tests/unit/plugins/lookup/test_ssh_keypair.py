"""The smoke test's SSH key pair: a real Ed25519 pair that OpenSSH reads, new each call."""
import shutil
import subprocess

import pytest
from ansible.errors import AnsibleLookupError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ansible_collections.gpuops.platform.plugins.lookup.ssh_keypair import LookupModule


def _pair():
    result = LookupModule().run([], variables={})
    assert isinstance(result, list) and len(result) == 1
    return result[0]


def test_the_public_key_belongs_to_the_private_key():
    pair = _pair()
    private = serialization.load_ssh_private_key(pair["private_key"].encode(), password=None)
    assert isinstance(private, Ed25519PrivateKey)
    derived = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert pair["public_key"] == derived.decode() + "\n"
    assert pair["public_key"].startswith("ssh-ed25519 ") and pair["public_key"].count("\n") == 1
    assert pair["private_key"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    assert pair["private_key"].endswith("-----END OPENSSH PRIVATE KEY-----\n")


def test_every_call_makes_a_new_pair():
    first, second = _pair(), _pair()
    assert first["private_key"] != second["private_key"] and first["public_key"] != second["public_key"]


def test_terms_and_options_are_refused():
    with pytest.raises(AnsibleLookupError, match=r"takes no terms or options, got \['rsa'\]"):
        LookupModule().run(["rsa"], variables={})
    with pytest.raises(AnsibleLookupError, match=r"got \['type'\]"):
        LookupModule().run([], variables={}, type="rsa")


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="needs OpenSSH's ssh-keygen")
def test_openssh_reads_the_private_key_and_derives_the_same_public_key(tmp_path):
    pair = _pair()
    key = tmp_path / "id_ed25519"
    key.write_text(pair["private_key"])
    key.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(key)], check=True, capture_output=True, text=True).stdout
    assert derived.split()[:2] == pair["public_key"].split()[:2]
