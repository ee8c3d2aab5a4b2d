# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the nvidia_driver check/converge pass.
"""Check and converge an NVIDIA driver in one pass (the nvidia_driver module's core).

Package operations go through apt-get/dnf with ``module.run_command``, like
ansible's own apt and dnf modules. Queries (dpkg-query, apt-cache, rpm) run in
check mode too; anything that changes the host is only planned there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import re
import stat
import tempfile

from ansible_collections.gpuops.platform.plugins.module_utils._driver import decision as rules
from ansible_collections.gpuops.platform.plugins.module_utils._driver import host as host_mod
from ansible_collections.gpuops.platform.plugins.module_utils._driver import packages as pk
from ansible_collections.gpuops.platform.plugins.module_utils._driver import provenance as prov

BLACKLIST_PATH = "/etc/modprobe.d/gpuops-blacklist-nouveau.conf"
APT_PIN_PATH = "/etc/apt/preferences.d/gpuops-nvidia-driver"
UU_PATH = "/etc/apt/apt.conf.d/51gpuops-nvidia-driver"
DKMS_MOK_PATH = "/etc/dkms/framework.conf.d/gpuops-mok.conf"
VERSIONLOCK_PATH = "/etc/dnf/plugins/versionlock.list"
DNF_AUTOMATIC_PATH = "/etc/dnf/automatic.conf"
DNF_MODULE_PATH = "/etc/dnf/modules.d/nvidia-driver.module"
DKMS_TREE = "/var/lib/dkms/nvidia"

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
# Wait for a running unattended-upgrades or apt instead of failing on the lock.
APT_LOCK = ["-o", "DPkg::Lock::Timeout=600"]
APT_INSTALL = ["apt-get", "install", "-y", "-q", "--allow-change-held-packages"] + APT_LOCK + [
    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
# Only with the operator's consent (allow_downgrade), for a driver install that moves to an older version.
APT_DOWNGRADE = ["--allow-downgrades"]


MAX_FILE_SIZE = 16 * 1024 * 1024  # the largest of these files is a few KiB


def _why(exc):
    """The OS reason behind an exception (atomic_move chains it), with what to check."""
    cause = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return str(exc)
    hint = {errno.EPERM: "is it immutable (lsattr)?", errno.EACCES: "check its permissions and the user",
            errno.EROFS: "the filesystem is read-only"}.get(cause.errno, "")
    return "%s%s" % (cause.strerror or cause, ("; " + hint) if hint else "")


def _printable(text):
    """Diff text that JSON can carry: undecodable bytes shown as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _redacted(text):
    return _printable(pk.redact(text))


class DriverError(Exception):
    """A failure with a message for the operator; nothing after it was changed."""


class Converger(object):
    """One run of the module: probe, plan, apply (unless check mode), report."""

    def __init__(self, module, params, root="/", host=None):
        self.module = module
        self.params = params
        self.root = root
        self.check = module.check_mode
        self.host = host if host is not None else host_mod.probe(root)
        self.actions = []
        self.diffs = []
        self.warnings = []
        self.changed = False
        self.cache_updated = False
        self.packages_changed = False  # the driver itself changed (not just a file around it)
        self._installed_cache = None
        self.held = []
        self._key = None  # a local mirror key, read before anything is written
        self.provenance = None  # how the driver on the node got there (provenance.py), read before any change
        self.modules = {}  # Ubuntu, source=distro: the kernel modules chosen (precompiled or DKMS) and why
        self.kept = None  # the report when a driver from outside the packages is kept

    # -- plumbing --------------------------------------------------------
    def _p(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def run(self, argv, mutating, env=None, what=None, check_rc=True):
        """Run a command. A mutating one is only recorded as planned in check mode."""
        if mutating:
            self.changed = True
            self.actions.append(what or " ".join(argv))
            if self.check:
                return 0, "", ""
            self._installed_cache = None
        rc, out, err = self.module.run_command(argv, environ_update=env or {})
        if check_rc and rc != 0:
            raise DriverError("%s failed (rc=%s): %s" % (" ".join(argv), rc, (err or out).strip()))
        return rc, out, err

    def _read(self, path):
        """A file's text (undecodable bytes kept through surrogateescape), None when it does not exist.

        Anything else in its place (a directory, a FIFO) is an error, before anything is changed.
        """
        full = self._p(path)
        try:
            st = os.stat(full)  # follows a symlink: the file read is the link's target
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise DriverError("cannot read %s: %s" % (path, exc.strerror))
        if stat.S_ISDIR(st.st_mode):
            raise DriverError("%s is a directory, not a file: move it away so the module can write the file" % path)
        if not stat.S_ISREG(st.st_mode):
            raise DriverError("%s is not a regular file (a device, socket or FIFO): move it away so the module "
                              "can write the file" % path)
        if st.st_size > MAX_FILE_SIZE:
            raise DriverError("%s is %d bytes, more than the %d this file can sensibly hold: check what wrote it"
                              % (path, st.st_size, MAX_FILE_SIZE))
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            raise DriverError("cannot read %s: %s" % (path, exc.strerror))
        return data.decode("utf-8", "surrogateescape")

    def ensure_file(self, path, content, mode=0o644, what=None, secret=False):
        """Make ``path`` hold ``content``; None removes it. Returns whether it changed (or would).

        A file that exists keeps its mode, owner and SELinux context (module.atomic_move); a new one gets
        ``mode``. A symlink is written through to its target, like ansible.builtin.copy with follow.
        A ``secret`` file is kept at mode 0600 and shown redacted in the diff.
        """
        before = self._read(path)
        mode_fix = secret and content is not None and before is not None and self._too_open(path, mode)
        if before == content and not mode_fix:
            return False
        if content is None and before is None:
            return False
        show = _redacted if secret else _printable
        self.diffs.append({"before_header": path if before is not None else "/dev/null",
                           "after_header": path if content is not None else "/dev/null",
                           "before": show(before or ""), "after": show(content or "")})
        full = self._p(path)
        self._check_writable(path, full if content is None else os.path.realpath(full))
        self.changed = True
        self.actions.append(what or ("remove %s" % path if content is None else "write %s" % path))
        if self.check:
            return True
        if content is None:
            try:
                os.unlink(full)  # a symlink goes, its target stays
            except OSError as exc:
                raise DriverError("cannot remove %s: %s" % (path, _why(exc)))
            return True
        self._write(path, os.path.realpath(full), content.encode("utf-8", "surrogateescape"), mode, secret)
        return True

    def _check_writable(self, path, real):
        """Refuse, in check mode too, a file that cannot be replaced (immutable, read-only, not ours)."""
        if os.path.lexists(real) and not os.access(real, os.W_OK, follow_symlinks=False):
            raise DriverError("cannot write %s: it is read-only (mode %s%s): make it writable or leave the "
                              "option that manages it off" % (
                                  path, oct(os.lstat(real).st_mode & 0o7777),
                                  ", or immutable: lsattr" if os.geteuid() == 0 else ""))
        parent = os.path.dirname(real)
        while not os.path.isdir(parent) and os.path.dirname(parent) != parent:
            parent = os.path.dirname(parent)
        if not os.access(parent, os.W_OK | os.X_OK):
            raise DriverError("cannot write %s: directory %s is not writable" % (path, parent))

    def _too_open(self, path, mode):
        return bool(os.stat(self._p(path)).st_mode & 0o777 & ~mode)

    def _write(self, path, real, data, mode, secret):
        directory = os.path.dirname(real)
        tmp = None
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            exists = os.path.exists(real)
            if exists and secret and self._too_open(path, mode):
                os.chmod(real, mode)  # before the secret goes in
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpuops-")  # mode 0600 while it is written
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            # A new file gets exactly ``mode``: atomic_move creates with 0666 & ~umask.
            umask = None if exists else os.umask(0o777 & ~mode)
            try:
                self.module.atomic_move(tmp, real)
            finally:
                if umask is not None:
                    os.umask(umask)
            tmp = None
        except Exception as exc:  # atomic_move raises plain Exception with the OSError as its cause
            raise DriverError("cannot write %s: %s" % (path, _why(exc)))
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def unit_exists(self, name):
        return any(os.path.exists(self._p(os.path.join(d, name + ".service")))
                   for d in ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"))

    def have(self, tool):
        return self.module.get_bin_path(tool) is not None

    # -- queries ---------------------------------------------------------
    def installed_packages(self, family):
        """name -> version (deb) or name -> (epoch, version, release) (rpm); held names (deb).

        Cached until a command changes the host."""
        if self._installed_cache is None:
            self._installed_cache = self._query_installed(family)
        installed, held = self._installed_cache
        return dict(installed), set(held)

    def _query_installed(self, family):
        installed, held = {}, set()
        if family == "deb":
            rc, out, dummy = self.run(
                ["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n"],
                mutating=False, env=APT_ENV, check_rc=False)
            for line in out.splitlines():
                parts = line.split("\t")
                if len(parts) < 3 or len(parts[2]) < 2:
                    continue
                name, version, status = parts[0], parts[1], parts[2]
                if status[1] in "iHUFWt":  # unpacked or installed, even half-configured
                    installed[name] = version
                if status[0] == "h":
                    held.add(name)
        else:
            rc, out, dummy = self.run(
                ["rpm", "-qa", "--qf", "%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\n"],
                mutating=False, check_rc=False)
            for line in out.splitlines():
                parts = line.split("\t")
                if len(parts) == 4:
                    installed[parts[0]] = (parts[1], parts[2], parts[3])
        return installed, held

    def apt_update(self):
        if self.cache_updated:
            return
        self.cache_updated = True
        if self.check:
            self.actions.append("apt-get update")
            return
        self.run(["apt-get", "update", "-q"] + APT_LOCK, mutating=False, env=APT_ENV)

    def apt_versions(self, package):
        rc, out, dummy = self.run(["apt-cache", "madison", package], mutating=False, env=APT_ENV,
                                  check_rc=False)
        return out if rc == 0 else ""

    def apt_candidate(self, package):
        rc, out, dummy = self.run(["apt-cache", "policy", package], mutating=False, env=APT_ENV,
                                  check_rc=False)
        match = re.search(r"^\s*Candidate:\s*(\S+)", out or "", re.MULTILINE)
        if not match or match.group(1) == "(none)":
            return None
        return match.group(1)

    def dnf_candidate(self, package):
        rc, out, dummy = self.run(
            ["dnf", "-q", "repoquery", "--latest-limit=1", "--qf", "%{version}", package],
            mutating=False, check_rc=False)
        lines = [line.strip() for line in (out or "").splitlines() if line.strip()]
        return lines[-1] if rc == 0 and lines else None

    # -- steps -----------------------------------------------------------
    def nouveau(self, present):
        if not self.params.get("blacklist_nouveau"):
            return
        content = pk.nouveau_blacklist() if present else None
        if not self.ensure_file(BLACKLIST_PATH, content):
            return
        if not self.params.get("regenerate_initramfs"):
            return
        if self.spec["family"] == "deb":
            tool, argv = "update-initramfs", ["update-initramfs", "-u"]
        else:
            tool, argv = "dracut", ["dracut", "-f"]
        if not self.have(tool):
            self.warnings.append("%s not found: the initramfs was not regenerated" % tool)
            return
        self.run(argv, mutating=True, what="regenerate the initramfs (%s)" % " ".join(argv))

    def mok(self):
        key, cert = self.params.get("mok_signing_key"), self.params.get("mok_certificate")
        if not key:
            return
        self.ensure_file(DKMS_MOK_PATH, pk.dkms_mok_config(key, cert), mode=0o644)

    def repository(self):
        """Configure the repository; returns True when package lists must be refreshed."""
        repo = pk.repository(self.spec)
        if repo is None:
            return False
        if repo["kind"] == "apt-keyring":
            installed, dummy = self.installed_packages("deb")
            if "cuda-keyring" in installed:
                return False
            self.changed = True
            self.actions.append("install cuda-keyring from %s" % repo["url"])
            if not self.check:
                path = self.download(repo["url"])
                try:
                    self.run(APT_INSTALL + [path], mutating=False, env=APT_ENV)
                finally:
                    os.unlink(path)
            return True
        changed = False
        if repo.get("key_path"):
            if self._key is not None:  # read or downloaded by mirror_key(), before anything was written
                changed |= self.ensure_file(repo["key_path"], self._key)
            elif self._read(repo["key_path"]) is None:  # check mode: a key URL is not downloaded
                path = repo["key_path"]
                self._check_writable(path, os.path.realpath(self._p(path)))
                self.changed = changed = True
                self.actions.append("download the mirror key %s to %s" % (repo["key_source"], path))
        if repo["kind"] == "apt":
            # Credentials live apart from the world-readable list; none set removes our old entry.
            changed |= self.ensure_file(repo["auth_path"], repo["auth_content"], mode=0o600, secret=True)
        changed |= self.ensure_file(repo["path"], repo["content"], mode=0o600 if repo.get("secret") else 0o644,
                                    secret=repo.get("secret", False))
        if self.spec["mirror_trusted"]:
            self.warnings.append(
                "mirror_trusted is set: packages from %s are installed WITHOUT signature checks; anyone who can "
                "change the mirror or the network path to it can run code as root on this node. Set mirror_gpgkey "
                "instead" % repo["repo_url"])
        return changed

    def fetch(self, url, method="GET"):
        """The response to ``url``; a DriverError holding fetch_url's reason unless it answers 200."""
        from ansible.module_utils.urls import fetch_url  # only needed on this path
        response, info = fetch_url(self.module, url, method=method, timeout=60)
        if info.get("status") != 200:
            raise DriverError(info.get("msg") or "HTTP status %s" % info.get("status"))
        return response

    def download(self, url):
        try:
            response = self.fetch(url)
        except DriverError as exc:
            raise DriverError("cannot download %s: %s" % (url, exc))
        fd, path = tempfile.mkstemp(suffix=os.path.basename(url))
        with os.fdopen(fd, "wb") as handle:
            handle.write(response.read())
        return path

    def mirror_key(self, source, key_path):
        """The mirror key's text, read before anything is written; None where it is not read.

        A key URL is fetched once: with ``key_path`` there it is not fetched again (a
        rotated key is a new mirror_gpgkey value). Check mode downloads nothing: like
        ansible.builtin.get_url it only asks for the URL's headers (HEAD), so a key that
        cannot be reached fails the check, with nothing changed, and one that can is
        planned as a download.
        """
        if not source.startswith(("http://", "https://")):
            return self.key_text(source)
        if self._read(key_path) is not None:
            return None
        if self.check:
            self._reach_key(source, "HEAD")
            return None
        return self.key_text(source)

    def _reach_key(self, source, method):
        try:
            return self.fetch(source, method)
        except DriverError as exc:
            raise DriverError(
                "mirror_gpgkey %s cannot be reached (%s%s): check the URL and the node's network path to it "
                "(a proxy is taken from https_proxy/http_proxy), or give the key as a file on the node; nothing "
                "was changed" % (source, exc,
                                 "; check mode asked for its headers only, it downloads nothing" if self.check else ""))

    def key_text(self, source):
        """A mirror key given as a path on the node or an http(s) URL, ASCII armored."""
        if source.startswith(("http://", "https://")):
            data = self._reach_key(source, "GET").read(MAX_FILE_SIZE + 1)
            if len(data) > MAX_FILE_SIZE:
                raise DriverError("mirror_gpgkey %s is more than %d bytes, which is no key: check the URL"
                                  % (source, MAX_FILE_SIZE))
            text = data.decode("utf-8", "surrogateescape")
        else:
            try:
                text = self._read(source[len("file://"):] if source.startswith("file://") else source)
            except DriverError as exc:
                raise DriverError("mirror_gpgkey: %s" % exc)
            if text is None:
                raise DriverError("mirror_gpgkey %s does not exist on the node" % source)
        if "-----BEGIN PGP PUBLIC KEY BLOCK-----" not in text:
            raise DriverError("mirror_gpgkey %s is not an ASCII-armored OpenPGP public key (no -----BEGIN PGP "
                              "PUBLIC KEY BLOCK----- line): export it with gpg --armor --export" % source)
        return text

    def _check_input_file(self, option, path, todo):
        full = self._p(path)
        if os.path.isdir(full):
            raise DriverError("%s %s is a directory, not a file: point %s at the file" % (option, path, option))
        if not os.path.isfile(full):
            raise DriverError("%s %s does not exist on the node: %s" % (option, path, todo))

    def _check_targets(self):
        """Every file this run may write must be a file (or absent) before anything changes."""
        paths = [BLACKLIST_PATH, DKMS_MOK_PATH]
        if self.spec["family"] == "deb":
            paths += [APT_PIN_PATH, UU_PATH]
        else:
            paths += [VERSIONLOCK_PATH, DNF_AUTOMATIC_PATH, DNF_MODULE_PATH]
        repo = pk.repository(self.spec) if self.spec["state"] != "absent" else None
        if repo and repo["kind"] != "apt-keyring":
            paths += [p for p in (repo["path"], repo.get("key_path"), repo.get("auth_path")) if p]
        for path in paths:
            self._read(path)

    # -- the run ---------------------------------------------------------
    def execute(self):
        params, host = self.params, self.host
        try:
            self.spec = pk.normalize(params, host["distro"], host["arch"])
        except pk.DriverSpecError as exc:
            raise DriverError(str(exc))
        spec = self.spec
        self._check_targets()
        if spec["source"] == "runfile":
            self._check_input_file("runfile", spec["runfile"], "copy NVIDIA's installer there first")
        for key in ("mok_signing_key", "mok_certificate"):
            if params.get(key):
                self._check_input_file(key, params[key], "create and enroll the MOK key first (mokutil --import), "
                                                         "then point %s at it" % key)
        repo = pk.repository(spec) if spec["state"] != "absent" else None
        if repo and repo.get("key_path"):  # a bad or unreachable key fails here, before any file is written
            self._key = self.mirror_key(repo["key_source"], repo["key_path"])
        fabric = params.get("fabricmanager")
        if fabric in (None, "auto"):
            fabric = bool(host["nvswitches"]) or bool(params.get("nvswitch_count"))
        else:
            fabric = fabric in (True, "true", "yes")
        self.fabric = fabric and spec["source"] != "runfile"
        if fabric and spec["source"] == "runfile":
            self.warnings.append("NVSwitches need nvidia-fabricmanager %s, which a runfile does not install: "
                                 "install NVIDIA's fabric manager archive for that version" % spec["version"])
        if spec["state"] != "absent" and spec["source"] != "runfile":
            self._existing_driver()
        previous = None
        if self.kept:
            # A driver from outside the packages that is the wanted one: no package, no file, no reboot.
            previous = installed_version = self.provenance["version"]
        elif spec["state"] == "absent":
            previous = self.absent()
            installed_version = None
        elif spec["source"] == "runfile":
            previous, installed_version = self.runfile()
        elif spec["family"] == "deb":
            previous, installed_version = self.deb()
        else:
            previous, installed_version = self.rpm()
        reboot, reasons = pk.reboot_decision(installed_version, host["loaded_version"],
                                             host["nouveau_loaded"], bool(host["gpus"]),
                                             host.get("loaded_flavor"), spec["open"])
        if self.kept:
            reboot, reasons = False, []
        if spec["state"] == "absent" and host["loaded_version"]:
            reboot, reasons = True, ["driver removed but kernel module %s is still loaded" % host["loaded_version"]]
        dkms_built = spec["state"] != "absent" and not self.kept and self.modules.get("kind") != "precompiled"
        if host["secure_boot"] and not params.get("mok_signing_key") and dkms_built:
            self.warnings.append(
                "Secure Boot is enabled and no mok_signing_key is set: the DKMS-built module only "
                "loads if it is signed with a key enrolled in MOK")
        services = []
        if spec["state"] != "absent" and not self.kept:
            services.append("nvidia-persistenced")
            if self.fabric:
                services.append("nvidia-fabricmanager")
            if params.get("dcgm") and spec["source"] != "runfile":
                services.append("nvidia-dcgm")
            if not self.check:
                missing = [name for name in services if not self.unit_exists(name)]
                for name in missing:
                    self.warnings.append("%s.service is not installed: it was not enabled" % name)
                services = [name for name in services if name not in missing]
        return {
            "changed": self.changed,
            "check_mode": self.check,
            "packages_changed": self.packages_changed,
            "actions": self.actions,
            "plan": self.actions if self.check else [],
            "previous_version": previous,
            "installed_version": installed_version,
            "loaded_version": host["loaded_version"],
            "wanted": {"branch": spec["branch"], "version": spec["version"],
                       "open": spec["open"], "source": spec["source"]},
            "reboot_required": reboot,
            "reboot_reasons": reasons,
            "secure_boot": host["secure_boot"],
            "nouveau_loaded": host["nouveau_loaded"],
            "kernel": host["kernel"],
            "gpu_count": len(host["gpus"]),
            "nvswitch_count": len(host["nvswitches"]),
            "fabricmanager": self.fabric,
            "services": services,
            "held_packages": self.held,
            "kernel_modules": self.modules or None,
            "driver_provenance": self.provenance,
            "kept": self.kept,
            "warnings_list": self.warnings,
            "diff": self.diffs,
        }

    def _prereqs(self, installed, family):
        if not self.params.get("install_prerequisites") or self.modules.get("kind") == "precompiled":
            return []  # precompiled modules build nothing: no headers, no DKMS
        wanted = pk.prerequisites(self.spec, self.host["kernel"])
        return [name for name in wanted if name not in installed]

    # -- Debian / Ubuntu -------------------------------------------------
    def deb(self):
        spec = self.spec
        self.nouveau(True)
        self.mok()
        refresh = self.repository()
        self.ensure_file(APT_PIN_PATH, pk.apt_pin(spec))
        if self.params.get("block_unattended_upgrades"):
            self.ensure_file(UU_PATH, pk.unattended_upgrades_blacklist())
        update = self.params.get("update_cache")
        if refresh or update or (update is None and spec["state"] == "latest"):
            self.apt_update()
        plan = pk.packages(spec, self.fabric, self.params.get("dcgm"), self.params.get("dcgm_package"))
        installed, held = self.installed_packages("deb")
        previous = pk.installed_driver_version(installed, plan["primary"], "deb")
        names = plan["driver"] + self._kernel_modules() + plan["extra"]

        target = spec["version"]
        if not target and spec["state"] == "latest":
            candidate = self.apt_candidate(plan["primary"])
            target = pk.upstream_version(candidate) if candidate else None
        satisfied = all(n in installed for n in names) and pk.wanted_matches(previous, spec["branch"], spec["version"])
        if spec["state"] == "latest" and target and previous != target:
            satisfied = False
        final = previous
        prereqs = self._prereqs(installed, "deb")
        if prereqs:
            self.run(APT_INSTALL + prereqs, mutating=True, env=APT_ENV,
                     what="install %s" % " ".join(prereqs))
        if not satisfied:
            if not target:
                target = self._deb_branch_target(plan["primary"])
            specs = self._deb_specs(names, target)
            removals = [name + "-" for name in pk.other_branch_metas(installed, spec)]
            downgrade = self._downgrade_consent(previous, target, spec)
            unhold = sorted(n for n in held if n in installed and re.match(pk.PY_DEB_DRIVER_REGEX, n))
            if unhold:
                self.run(["apt-mark", "unhold"] + unhold, mutating=True, env=APT_ENV,
                         what="unhold %s" % " ".join(unhold))
            self.run(APT_INSTALL + (APT_DOWNGRADE if downgrade else []) + specs + removals, mutating=True,
                     env=APT_ENV, what="%s %s%s" % ("downgrade to" if downgrade else "install", " ".join(specs + removals),
                                                    " (kernel modules: %s)" % self.modules["reason"] if self.modules else ""))
            self.packages_changed = True
            if self.check:
                final = target or ("%s.x" % spec["branch"])
                self.held = ["driver packages at %s" % final]
                self.actions.append("hold the driver packages at %s" % final)
                return previous, final
            installed, held = self.installed_packages("deb")
            final = pk.upstream_version(installed.get(plan["primary"]))
            if not pk.wanted_matches(final, spec["branch"], spec["version"]):
                raise DriverError("after apt-get install, %s is at %s, not the wanted %s"
                                  % (plan["primary"], final, spec["version"] or spec["branch"]))
        hold = pk.hold_selection(installed, final, "deb")
        to_hold = [n for n in hold if n not in held]
        if to_hold:
            self.run(["apt-mark", "hold"] + to_hold, mutating=True, env=APT_ENV,
                     what="hold %s" % " ".join(to_hold))
        self.held = hold
        return previous, final

    def _existing_driver(self):
        """The driver already on the node, against the wanted one, before anything is written (read-only queries).

        A driver from outside the packages (a runfile, a driver container, one no package owns) is kept when it
        is the wanted one and refused otherwise (decision.foreign_decision, the planner's rule): packages never go
        over it. A wanted version or branch older than the installed packages' is refused unless allow_downgrade.
        """
        spec = self.spec
        installed, dummy = self.installed_packages(spec["family"])
        self.provenance = prov.probe(self.root, prov.upstream_versions(installed, spec["family"]), spec["family"],
                                     self.host["loaded_version"])
        verdict, text = rules.foreign_decision(self.provenance, spec["version"], spec["branch"])
        if verdict == "refuse":
            raise DriverError(text)
        if verdict == "keep":
            self.kept = text
            return
        previous = pk.installed_driver_version(installed, pk.packages(spec)["primary"], spec["family"])
        if previous and spec["version"] != previous:
            self._downgrade_consent(previous, spec["version"], spec)

    def _downgrade_consent(self, previous, target, spec):
        """Whether moving from ``previous`` to ``target`` (or to the wanted branch) is a downgrade; a DriverError
        before anything is installed when it is one and allow_downgrade is not set (decision.py, the planner's rule)."""
        wanted = target or spec["branch"]
        if not previous or not rules.is_older(wanted, previous):
            return False
        if not self.params.get("allow_downgrade"):
            raise DriverError(rules.downgrade_refusal(previous, rules.wanted_text(spec["version"], spec["branch"])
                                                      if not target or target == spec["version"] else target))
        return True

    def _kernel_modules(self):
        """Ubuntu with source=distro: Canonical's signed precompiled modules for the running kernel when the apt
        cache has them (no DKMS build, no MOK under Secure Boot), else the DKMS build; ``self.modules`` says which
        and why (the result's kernel_modules, and the install line of the plan)."""
        names = pk.precompiled_modules(self.spec, self.host["kernel"])
        if names is None:
            return []
        meta, running = names
        if self.apt_candidate(running):
            self.modules = {"kind": "precompiled", "packages": [meta, running],
                            "reason": "Canonical's signed precompiled modules for kernel %s (%s): no DKMS build, no MOK"
                                      % (self.host["kernel"], running)}
            return [meta, running]
        self.modules = {"kind": "dkms", "packages": [],
                        "reason": "DKMS build: %s is not in the apt cache" % running}
        return []

    def _deb_branch_target(self, primary):
        """The version apt would install for the branch, checked before anything is installed."""
        spec = self.spec
        candidate = self.apt_candidate(primary)
        if candidate is None and not self.cache_updated and not self.check:
            self.apt_update()
            candidate = self.apt_candidate(primary)
        target = pk.upstream_version(candidate)
        if target is None:
            if self.check:
                return None
            raise DriverError("%s is not available from the configured repositories: check the source "
                              "(for Debian non-free, enable the non-free component)" % primary)
        if pk.branch_of(target) != spec["branch"]:
            raise DriverError("the repositories offer %s %s, not branch %s: choose a branch they carry, or "
                              "source=cuda" % (primary, target, spec["branch"]))
        return target

    def _deb_specs(self, names, target):
        """name or name=<full version> for each package, full version from apt-cache."""
        specs = []
        for name in names:
            # DCGM and the kernel modules (versioned like the kernel) are not at the driver's version.
            if not target or name.startswith(("datacenter-gpu-manager", "linux-modules-nvidia-")):
                specs.append(name)
                continue
            full = pk.pick_apt_version(self.apt_versions(name), name, target)
            if full is None and not self.cache_updated and not self.check:
                self.apt_update()
                full = pk.pick_apt_version(self.apt_versions(name), name, target)
            if full is None:
                if self.check:
                    specs.append("%s=%s-*" % (name, target))
                    continue
                raise DriverError(
                    "%s %s is not in the configured repositories (%s): check the version, or the mirror's "
                    "contents" % (name, target, "apt-cache madison %s" % name))
            specs.append("%s=%s" % (name, full))
        return specs

    # -- RHEL family -----------------------------------------------------
    def rpm(self):
        spec = self.spec
        self.nouveau(True)
        self.mok()
        self.repository()
        plan = pk.packages(spec, self.fabric, self.params.get("dcgm"), self.params.get("dcgm_package"))
        installed, dummy = self.installed_packages("rpm")
        previous = pk.installed_driver_version(installed, plan["primary"], "rpm")
        prereqs = self._prereqs(installed, "rpm")
        if prereqs:
            self.run(["dnf", "-y", "install"] + prereqs, mutating=True, what="install %s" % " ".join(prereqs))
        stream = self._dnf_stream()
        if stream != plan["module_stream"]:
            if stream:
                self.run(["dnf", "-y", "module", "reset", "nvidia-driver"], mutating=True)
            self.run(["dnf", "-y", "module", "enable", "nvidia-driver:%s" % plan["module_stream"]], mutating=True)
        names = plan["driver"] + plan["extra"]
        target = spec["version"]
        if not target and spec["state"] == "latest":
            target = self.dnf_candidate(plan["primary"])
        satisfied = all(n in installed for n in names) and pk.wanted_matches(previous, spec["branch"], spec["version"])
        if spec["state"] == "latest" and target and previous != target:
            satisfied = False
        final = previous
        lock_text = self._read(VERSIONLOCK_PATH)
        if not satisfied:
            if not target:
                # Resolve the branch to one version, so fabric manager comes at the driver's version.
                target = self.dnf_candidate(plan["primary"])
            # Our own versionlock entries would block the change: drop them first.
            self.ensure_file(VERSIONLOCK_PATH, pk.merge_block(lock_text, []) if lock_text else None)
            specs = ["%s-%s" % (n, target) if target and not n.startswith("datacenter-gpu-manager") else n
                     for n in names]
            verb = "install"
            if self._downgrade_consent(previous, target, spec):
                verb = "downgrade"
            elif previous and target:
                verb = "upgrade"
            missing = [n for n in names if n not in installed]
            if missing and verb != "install":
                self.run(["dnf", "-y", "install"] + [s for s, n in zip(specs, names) if n in missing],
                         mutating=True)
                specs = [s for s, n in zip(specs, names) if n not in missing]
            if specs:
                self.run(["dnf", "-y", verb] + specs, mutating=True)
            self.packages_changed = True
            if self.check:
                final = target or "%s.x" % spec["branch"]
                self.actions.append("versionlock the driver packages at %s" % final)
                self.held = ["driver packages at %s" % final]
                return previous, final
            installed, dummy = self.installed_packages("rpm")
            final = installed.get(plan["primary"], (None, None, None))[1]
            if not pk.wanted_matches(final, spec["branch"], spec["version"]):
                raise DriverError("after dnf, nvidia-driver is at %s, not the wanted %s"
                                  % (final, spec["version"] or spec["branch"]))
            lock_text = self._read(VERSIONLOCK_PATH)
        lines = pk.versionlock_block(installed, final)
        self.ensure_file(VERSIONLOCK_PATH, pk.merge_block(lock_text, lines))
        self.held = [line.split(":", 1)[0].rsplit("-", 1)[0] for line in lines]
        automatic = self._read(DNF_AUTOMATIC_PATH)
        if automatic is not None and self.params.get("block_unattended_upgrades"):
            self.ensure_file(DNF_AUTOMATIC_PATH,
                             pk.set_ini_option(automatic, "base", "excludepkgs", pk.DNF_AUTOMATIC_EXCLUDE))
        return previous, final

    def _dnf_stream(self):
        text = self._read(DNF_MODULE_PATH) or ""
        stream = re.search(r"^\s*stream\s*=\s*(\S+)", text, re.MULTILINE)
        state = re.search(r"^\s*state\s*=\s*(\S+)", text, re.MULTILINE)
        if stream and state and state.group(1) == "enabled":
            return stream.group(1)
        return None

    # -- runfile ---------------------------------------------------------
    def runfile_versions(self):
        try:
            entries = os.listdir(self._p(DKMS_TREE))
        except (IOError, OSError):
            return []
        return sorted((e for e in entries if re.match(r"[0-9]+\.[0-9]+", e)), key=_vtuple)

    def runfile(self):
        spec = self.spec
        installed, dummy = self.installed_packages(spec["family"])
        packaged = pk.driver_packages_installed(installed, spec["family"])
        packaged = [n for n in packaged if n != "nvidia-modprobe"]
        if packaged:
            raise DriverError(
                "a packaged NVIDIA driver is installed (%s): remove it (state=absent with its source) "
                "before installing from a runfile" % ", ".join(packaged[:5]))
        self.nouveau(True)
        self.mok()
        prereqs = self._prereqs(installed, spec["family"])
        if prereqs:
            tool = APT_INSTALL if spec["family"] == "deb" else ["dnf", "-y", "install"]
            self.run(tool + prereqs, mutating=True, env=APT_ENV, what="install %s" % " ".join(prereqs))
        versions = self.runfile_versions()
        previous = versions[-1] if versions else None
        self.held = []
        if previous == spec["version"]:
            return previous, previous
        self.run(pk.runfile_command(spec), mutating=True,
                 what="run %s --silent --dkms" % spec["runfile"])
        self.packages_changed = True
        if self.check:
            return previous, spec["version"]
        versions = self.runfile_versions()
        final = versions[-1] if versions else None
        if final != spec["version"]:
            raise DriverError("the runfile installer finished but DKMS has nvidia %s, not %s"
                              % (final, spec["version"]))
        return previous, final

    # -- absent ----------------------------------------------------------
    def absent(self):
        spec = self.spec
        if spec["source"] == "runfile":
            versions = self.runfile_versions()
            if versions and self.have("nvidia-uninstall"):
                self.run(["nvidia-uninstall", "--silent"], mutating=True)
            elif versions:
                self.run(["sh", spec["runfile"], "--uninstall", "--silent"], mutating=True)
            self.nouveau(False)
            return versions[-1] if versions else None
        installed, held = self.installed_packages(spec["family"])
        plan = pk.packages(spec)
        previous = pk.installed_driver_version(installed, plan["primary"], spec["family"])
        remove = pk.driver_packages_installed(installed, spec["family"])
        if spec["family"] == "deb":
            if remove:
                self.run(["apt-get", "remove", "-y", "-q", "--allow-change-held-packages"] + APT_LOCK + remove,
                         mutating=True, env=APT_ENV, what="remove %s" % " ".join(remove))
            self.ensure_file(APT_PIN_PATH, None)
            self.ensure_file(UU_PATH, None)
        else:
            lock = self._read(VERSIONLOCK_PATH)
            if lock is not None:
                self.ensure_file(VERSIONLOCK_PATH, pk.merge_block(lock, []))
            if remove:
                self.run(["dnf", "-y", "remove"] + remove, mutating=True)
            if self._dnf_stream():
                self.run(["dnf", "-y", "module", "reset", "nvidia-driver"], mutating=True)
        self.nouveau(False)
        self.held = []
        return previous


def _vtuple(version):
    # Not LooseVersion: on Python 3 it raises TypeError where one version has a number
    # and the other a word at the same place (570.172.08-1 against 570.172.08.1), and
    # rpm's own labelCompare is not importable from every interpreter the module runs on.
    return tuple(int(p) if re.fullmatch(r"[0-9]+", p) else 0 for p in re.split(r"[.-]", version or "0"))
