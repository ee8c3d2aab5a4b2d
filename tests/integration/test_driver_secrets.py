"""The mirror password never reaches ansible-playbook's output at -vvv, nor a file.

Runs the nvidia_driver role and the module itself on localhost: in check mode
(only queries run, nothing is written) and in apply mode with a missing
mirror key, which fails before anything is written. The password comes from
the environment, so no file of the test holds it either.
"""

import os
import subprocess

import pytest

pytestmark = pytest.mark.slow

PASSWORD = "Pw-91c2e4-never-printed"
AUTH = "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"
LIST = "/etc/apt/sources.list.d/gpuops-nvidia-mirror.list"
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGJ0\n-----END PGP PUBLIC KEY BLOCK-----\n"

PLAY = """
- name: Driver role and module with mirror credentials
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    mirror:
      source: mirror
      mirror_url: https://mirror.invalid/nvidia/debian12/x86_64/
      mirror_gpgkey: "{key}"
      mirror_username: ci-bot
      mirror_password: "{{{{ lookup('ansible.builtin.env', 'GPUOPS_TEST_MIRROR_PASSWORD') }}}}"
  tasks:
    - name: The module, with its own masking only
      gpuops.platform.nvidia_driver: "{{{{ mirror | combine({{'version': '570.172.08', 'blacklist_nouveau': false,
                                       'install_prerequisites': false, 'block_unattended_upgrades': false}}) }}}}"
      ignore_errors: true

    - name: The role
      ansible.builtin.include_role:
        name: gpuops.platform.nvidia_driver
      vars:
        nvidia_driver_version: "570.172.08"
        nvidia_driver_source: mirror
        nvidia_driver_mirror_url: "{{{{ mirror.mirror_url }}}}"
        nvidia_driver_mirror_gpgkey: "{{{{ mirror.mirror_gpgkey }}}}"
        nvidia_driver_mirror_username: ci-bot
        nvidia_driver_mirror_password: "{{{{ mirror.mirror_password }}}}"
        nvidia_driver_blacklist_nouveau: false
        nvidia_driver_install_prerequisites: false
        nvidia_driver_block_unattended_upgrades: false
        nvidia_driver_reboot: false
        nvidia_driver_manage_services: false
        nvidia_driver_verify: false
"""


def files_holding(root, text):
    hits = []
    for base, dummy, files in os.walk(str(root)):
        for name in files:
            path = os.path.join(base, name)
            try:
                with open(path, "rb") as handle:
                    if text.encode() in handle.read():
                        hits.append(path)
            except OSError:
                pass
    return hits


def run(repo_root, tmp_path, key, *options):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(key=key))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH="%s:%s" % (repo_root / ".cache" / "src", repo_root / "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "local-tmp"),
               ANSIBLE_REMOTE_TMP=str(tmp_path / "remote-tmp"), ANSIBLE_KEEP_REMOTE_FILES="0",
               GPUOPS_TEST_MIRROR_PASSWORD=PASSWORD)
    return subprocess.run(["ansible-playbook", "-vvv", "-i", "localhost,", str(play)] + list(options),
                          cwd=str(tmp_path), capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture
def untouched_host():
    if any(os.path.lexists(p) for p in (AUTH, LIST)):
        pytest.skip("this host already has the mirror files; the test must not touch them")
    yield
    assert not os.path.lexists(AUTH) and not os.path.lexists(LIST)


def test_check_mode_plans_without_printing_the_password(repo_root, tmp_path, untouched_host):
    key = tmp_path / "mirror.asc"
    key.write_text(KEY)
    proc = run(repo_root, tmp_path, key, "--check", "--diff")
    out = proc.stdout + proc.stderr
    assert "The module, with its own masking only" in out and "TASK [gpuops.platform.nvidia_driver" in out
    assert PASSWORD not in out
    assert files_holding(tmp_path, PASSWORD) == []
    assert "hidden due to the fact that 'no_log: true'" in out  # the role's module task, with a password set
    if os.geteuid() == 0 and "bookworm" in open("/etc/os-release").read():
        # The plan shows the auth file, password masked, and the module's arguments masked.
        assert "password ********" in out
        assert AUTH in out
        assert proc.returncode == 0, out[-3000:]


def test_a_failing_apply_reports_the_error_without_the_password(repo_root, tmp_path, untouched_host):
    proc = run(repo_root, tmp_path, tmp_path / "missing.asc", "--diff")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert PASSWORD not in out
    assert files_holding(tmp_path, PASSWORD) == []
    if "bookworm" in open("/etc/os-release").read():
        # The role's module task is no_log, yet its (masked) failure is still reported.
        assert out.count("mirror_gpgkey %s does not exist on the node" % (tmp_path / "missing.asc")) >= 2
