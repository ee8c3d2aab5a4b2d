"""nvidia_driver against hostile values: injection into files and command lines, mirror credentials."""

import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk

DEBIAN12 = {"id": "debian", "version": "12", "major": "12"}
RHEL9 = {"id": "rhel", "version": "9.4", "major": "9"}
BASH = shutil.which("bash")

# dkms (dell/dkms, safe_source) sources a framework file in a subshell, prints
# each wanted variable as var[i]="value" into a temporary file and sources that
# too: a value is expanded twice, the second time inside double quotes.
DKMS_SAFE_SOURCE = r'''
safe_source() {
    local to_source_file="$1"; shift
    declare -a -r export_envs=("$@")
    local tmpfile; tmpfile=$(mktemp)
    ( exec >"$tmpfile"
    . "$to_source_file" >/dev/null
    for _export_env in "${export_envs[@]}"; do
        for _i in $(eval echo \${!$_export_env[@]}); do
            eval echo '$_export_env[$_i]=\"${'$_export_env'[$_i]}\"'
        done
    done
    )
    . "$tmpfile"
    rm "$tmpfile"
}
safe_source "$1" sign_file mok_signing_key mok_certificate
printf '%s\n%s\n' "$mok_signing_key" "$mok_certificate"
'''


def spec(distro=None, **params):
    params.setdefault("branch", "570")
    return pk.normalize(params, distro or DEBIAN12, "x86_64")


def source_with_bash(tmp_path, content, dkms):
    conf = tmp_path / "gpuops-mok.conf"
    conf.write_text(content)
    script = DKMS_SAFE_SOURCE if dkms else '. "$1"\nprintf \'%s\\n%s\\n\' "$mok_signing_key" "$mok_certificate"\n'
    proc = subprocess.run([BASH, "-c", script, "bash", str(conf)], cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=30, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)}, check=False)
    return proc


# -- the DKMS framework file ---------------------------------------------------------

@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("dkms", [False, True], ids=["plain-source", "dkms-safe_source"])
@pytest.mark.parametrize("key", [
    "/var/lib/shim-signed/mok/MOK.priv",
    "/keys/semi;and'quote&(paren)|pipe>gt<lt*glob?[a]#hash~!bang.priv",
])
def test_mok_paths_come_back_from_bash_unchanged(tmp_path, dkms, key):
    cert = "/var/lib/shim-signed/mok/MOK.der"
    pk.validate({"mok_signing_key": key, "mok_certificate": cert}, "deb")
    proc = source_with_bash(tmp_path, pk.dkms_mok_config(key, cert), dkms)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "%s\n%s\n" % (key, cert)
    assert sorted(os.listdir(str(tmp_path))) == ["gpuops-mok.conf"]  # no file made by a command


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("dkms", [False, True], ids=["plain-source", "dkms-safe_source"])
def test_the_written_file_runs_no_command_even_for_a_refused_value(tmp_path, dkms):
    """Defence in depth: were validation bypassed, a plain source still runs nothing."""
    key = "/k/$(touch ran-dollar)`touch ran-backtick`;touch ran-semicolon\ntouch ran-newline"
    proc = source_with_bash(tmp_path, pk.dkms_mok_config(key, "/k/MOK.der"), dkms=False)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(str(tmp_path))) == ["gpuops-mok.conf"]
    assert proc.stdout.startswith(key + "\n")


@pytest.mark.parametrize("value,problem", [
    ("/k/$(reboot).priv", "contains $, `"),
    ("/k/`reboot`.priv", "contains $, `"),
    ("/k/${HOME}.priv", "contains $, `"),
    ("/k/MOK .priv", "whitespace"),
    ('/k/"x".priv', "contains $, `"),
    ("/k/x\\y.priv", "contains $, `"),
    ("/k/x.priv\ntouch /tmp/x", "a line break"),
    ("/k/x\x00.priv", "a control character"),
    ("MOK.priv", "is not an absolute path"),
    ("", "is empty"),
])
@pytest.mark.parametrize("option", ["mok_signing_key", "mok_certificate"])
def test_mok_paths_bash_would_expand_are_refused(option, value, problem):
    params = {"mok_signing_key": "/k/MOK.priv", "mok_certificate": "/k/MOK.der"}
    params[option] = value
    with pytest.raises(pk.DriverSpecError) as exc:
        spec(**params)
    assert str(exc.value).startswith(option + " ")
    assert problem in str(exc.value)


# -- sources lists, repo files and command lines --------------------------------------

@pytest.mark.parametrize("distro", [DEBIAN12, RHEL9], ids=["deb", "rpm"])
@pytest.mark.parametrize("option,value,problem", [
    ("mirror_url", "file:/srv/m /\ndeb [trusted=yes] http://evil.example/ /", "a line break"),
    ("mirror_url", "http://m/x y", "whitespace"),
    ("mirror_url", "http://m/x\ty", "a control character"),
    ("mirror_url", "http://m/\x00", "a control character"),
    ("mirror_url", "http://m/\u2028x", "a control character"),
    ("mirror_url", "http://m/\udce9", "is not valid UTF-8"),
    ("mirror_url", "ftp://m/", "is not an http://, https:// or file: URL"),
    ("mirror_url", "http://m/" + "a" * 5000, "more than the 4096"),
    ("mirror_gpgkey", "/etc/pki/k.asc\ngpgcheck=0", "a line break"),
    ("mirror_gpgkey", "keys/k.asc", "is not an absolute path"),
    ("mirror_suite", "stable\ndeb [trusted=yes] http://evil/ /", "a line break"),
    ("mirror_suite", "stable main", "whitespace"),
    ("mirror_components", ["main", "contrib\ndeb [trusted=yes] http://evil/ / x"], "a line break"),
    ("mirror_components", ["main contrib"], "whitespace"),
    ("dcgm_package", "-oAPT::Get::AllowUnauthenticated=true", "is not a package name"),
    ("dcgm_package", "dcgm;reboot", "is not a package name"),
    ("dcgm_package", "dcgm\nreboot", "a line break"),
    ("version", "570.172.08\n", "is not a driver version"),
    ("version", "570.172.08;reboot", "is not a driver version"),
    ("branch", "570\n", "is not a driver branch"),
    ("branch", ["570"], "must be a string"),
])
def test_values_that_would_break_a_file_or_command_are_refused(distro, option, value, problem):
    params = {"source": "mirror", "mirror_url": "https://m/repo", "mirror_gpgkey": "/etc/pki/k.asc"}
    params[option] = value
    with pytest.raises(pk.DriverSpecError) as exc:
        spec(distro, **params)
    assert option in str(exc.value).split(" ", 1)[0]
    assert problem in str(exc.value)


def test_runfile_path_must_be_absolute_and_clean():
    for value, problem in (("NVIDIA-Linux-x86_64-570.172.08.run", "is not an absolute path"),
                           ("/opt/NVIDIA-Linux-x86_64-570.172.08.run\n--uninstall", "a line break")):
        with pytest.raises(pk.DriverSpecError) as exc:
            spec(source="runfile", runfile=value)
        assert str(exc.value).startswith("runfile ") and problem in str(exc.value)


def test_dnf_reads_a_comma_as_a_second_url():
    with pytest.raises(pk.DriverSpecError, match="mirror_url .* contains a comma"):
        spec(RHEL9, source="mirror", mirror_url="https://m/a,https://evil/b", mirror_gpgkey="/k.asc")


# -- signatures --------------------------------------------------------------------------

def test_rhel_mirror_without_a_key_is_refused_unless_trusted():
    with pytest.raises(pk.DriverSpecError) as exc:
        spec(RHEL9, source="mirror", mirror_url="https://m/rhel9")
    assert "needs mirror_gpgkey" in str(exc.value) and "mirror_trusted: true" in str(exc.value)
    content = pk.repository(spec(RHEL9, source="mirror", mirror_url="https://m/rhel9", mirror_trusted=True))["content"]
    assert "gpgcheck=0\n" in content


# -- mirror credentials --------------------------------------------------------------------

@pytest.mark.parametrize("distro,where", [(DEBIAN12, "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"),
                                          (RHEL9, "/etc/yum.repos.d/gpuops-nvidia-mirror.repo")],
                         ids=["deb", "rpm"])
@pytest.mark.parametrize("url", ["https://user:S3cr3t-pw@m.example/nvidia/", "http://user@m.example:8080/x",
                                 "https://user:S3cr3t-pw@m.example"])
def test_credentials_in_the_url_are_refused_without_echoing_them(distro, where, url):
    with pytest.raises(pk.DriverSpecError) as exc:
        spec(distro, source="mirror", mirror_url=url, mirror_gpgkey="/k.asc")
    msg = str(exc.value)
    assert msg.startswith("mirror_url must not carry credentials")
    assert "mirror_username and mirror_password" in msg and where in msg and "0600" in msg
    assert "S3cr3t" not in msg and "m.example" not in msg  # the URL is not echoed


def test_an_at_sign_in_the_path_is_not_userinfo():
    assert spec(source="mirror", mirror_url="https://m.example/~team@site/nvidia/",
                mirror_gpgkey="/k.asc")["mirror_url"] == "https://m.example/~team@site/nvidia/"


@pytest.mark.parametrize("url,machine", [
    ("https://m.example/nvidia/debian12/x86_64/", "machine m.example/nvidia/debian12/x86_64\n"),
    # apt_auth.conf(5): without a protocol an entry matches https only.
    ("http://m.example:8080/nvidia", "machine http://m.example:8080/nvidia\n"),
])
def test_apt_credentials_go_to_an_auth_conf_entry_not_the_list(url, machine):
    repo = pk.repository(spec(source="mirror", mirror_url=url, mirror_gpgkey="/k.asc",
                              mirror_username="ci-bot", mirror_password="S3cr3t-pw"))
    assert "S3cr3t" not in repo["content"] and "ci-bot" not in repo["content"]
    assert repo["auth_path"] == "/etc/apt/auth.conf.d/gpuops-nvidia-mirror.conf"
    assert repo["auth_content"].endswith(machine + "login ci-bot\npassword S3cr3t-pw\n")
    assert pk.redact(repo["auth_content"]).endswith(machine + "login ci-bot\npassword ********\n")


def test_apt_mirror_without_credentials_has_no_auth_entry():
    assert pk.repository(spec(source="mirror", mirror_url="https://m/x", mirror_gpgkey="/k.asc"))["auth_content"] is None


def test_dnf_credentials_go_to_the_repo_file_which_is_secret():
    repo = pk.repository(spec(RHEL9, source="mirror", mirror_url="https://m/rhel9", mirror_gpgkey="/k.asc",
                              mirror_username="ci-bot", mirror_password="S3cr3t-pw"))
    assert repo["secret"] is True
    assert repo["content"].endswith("gpgkey=file:///k.asc\nusername=ci-bot\npassword=S3cr3t-pw\n")
    assert "S3cr3t" not in pk.redact(repo["content"])
    assert pk.redact(repo["content"]).endswith("username=ci-bot\npassword=********\n")
    plain = pk.repository(spec(RHEL9, source="mirror", mirror_url="https://m/rhel9", mirror_gpgkey="/k.asc"))
    assert plain["secret"] is False and "password" not in plain["content"]


@pytest.mark.parametrize("params,message", [
    ({"mirror_username": "ci-bot"}, "mirror_username and mirror_password go together"),
    ({"mirror_username": "ci bot", "mirror_password": "pw"}, "mirror_username contains whitespace"),
    ({"mirror_username": "ci-bot", "mirror_password": "S3cr3t pw"},
     "mirror_password contains whitespace or a control character"),
    ({"mirror_username": "ci-bot", "mirror_password": "S3cr3t\nmachine evil"},
     "mirror_password contains whitespace or a control character"),
    ({"mirror_username": "ci-bot", "mirror_password": "S3cr3t", "mirror_url": "file:/srv/m"},
     "need an http:// or https:// mirror_url"),
    ({"mirror_username": "ci-bot", "mirror_password": "S3cr3t", "source": "cuda"}, "for source=mirror only"),
])
def test_bad_credentials_are_refused_without_echoing_the_password(params, message):
    base = {"source": "mirror", "mirror_url": "https://m/x", "mirror_gpgkey": "/k.asc"}
    with pytest.raises(pk.DriverSpecError) as exc:
        spec(**dict(base, **params))
    assert message in str(exc.value)
    assert "S3cr3t" not in str(exc.value)


@pytest.mark.parametrize("option, value", [
    ("branch", "\uff15\uff17\uff10"), ("branch", "\u0665\u0667\u0660"), ("branch", "570\n"), ("branch", "570 "),
    ("version", "\uff15\uff17\uff10.172.08"), ("version", "570.172.08\n"), ("version", "570.172.0\u0668"),
])
def test_branch_and_version_take_whole_values_of_ascii_digits_only(option, value):
    params = {"source": "mirror", "mirror_url": "https://m/repo", "mirror_gpgkey": "/etc/pki/k.asc", option: value}
    with pytest.raises(pk.DriverSpecError, match="^%s .*is not a driver %s" % (option, option)):
        spec(None, **params)


def test_a_runfile_name_with_unicode_digits_gives_no_version():
    with pytest.raises(pk.DriverSpecError, match="cannot tell the driver version"):
        spec(None, source="runfile", runfile="/opt/NVIDIA-Linux-x86_64-\uff15\uff17\uff10.172.08.run")


def test_other_branch_metapackages_are_named_with_ascii_digits_only():
    wanted = spec(None, branch="570")
    installed = {"nvidia-open-550": "550.1-1", "nvidia-open-\uff15\uff15\uff10": "x", "nvidia-open-550\n": "x"}
    assert pk.other_branch_metas(installed, wanted) == ["nvidia-open-550"]
