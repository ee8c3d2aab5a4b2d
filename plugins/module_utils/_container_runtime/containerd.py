# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
# Private to gpuops.platform, not a public API (may change in any release): the containerd config edit (v2 and v3 layouts, drop-in and in-place).
"""containerd: add the NVIDIA runtime the way ``nvidia-ctk runtime configure`` does.

Config version 2 (containerd 1.6/1.7) keeps the CRI runtimes under the plugin
``io.containerd.grpc.v1.cri``, version 3 (containerd 2.x) under
``io.containerd.cri.v1.runtime``; both under ``containerd.runtimes``.

Drop-in mode writes ``conf.d/99-nvidia.toml`` and makes sure the main config
imports it. containerd 1.x replaces a whole plugin section when it imports a
file (containerd/containerd#5837), so a version 2 drop-in carries the complete
CRI section of the config it overrides; containerd 2.x merges imports key by
key (containerd/containerd#9982), so a version 3 drop-in holds only our keys.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import glob
import os
import re

from ansible_collections.gpuops.platform.plugins.module_utils._common.input_guard import check_path_text, check_type
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.base import (
    DEFAULT_NVIDIA_RUNTIME_PATH,
    DROP_IN_NAME,
    NVIDIA_RUNTIME_NAME,
    ConfigError,
    WRITTEN_BY,
    FileEdit,
    LayoutError,
    Plan,
    add_fresh_table,
    add_table,
    canonical_path,
    copy_table,
    deep_merge,
    dump_checked,
    ensure_path,
    ensure_table,
    check_tables,
    guard_tomlkit,
    inherited_runtime,
    is_real_table,
    load_plain,
    lookup,
    parse_toml,
    plain,
    read_text,
    remove_value_at,
    set_value,
    set_value_at,
    settled,
    table_from_dict,
)
from ansible_collections.gpuops.platform.plugins.module_utils._container_runtime.toml_file import ScopeMismatch, TomlFile

CRI_PLUGINS = {
    2: "io.containerd.grpc.v1.cri",
    3: "io.containerd.cri.v1.runtime",
}
SUPPORTED_VERSIONS = tuple(sorted(CRI_PLUGINS))
RUNC_V2_SHIM = "io.containerd.runc.v2"
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"

DROP_IN_HEADER = {
    2: "".join((
        WRITTEN_BY % "containerd",
        "# containerd 1.x replaces a whole plugin section on import, so this file carries the\n"
        "# complete CRI plugin section of %s with the NVIDIA runtime added.\n"
        "# Change CRI settings there: this file follows on the next run.\n",
    )),
    3: WRITTEN_BY % "containerd",
}


def config_version_for(containerd_version_output):
    """The config version a containerd binary writes, from ``containerd --version`` output.

    ``containerd github.com/containerd/containerd/v2 v2.1.4 ...`` gives 3,
    ``containerd containerd.io 1.7.27 ...`` gives 2. None when no version is found.
    """
    for token in (containerd_version_output or "").split()[1:]:
        match = re.match(r"v?([0-9]+)\.([0-9]+)", token)
        if match:
            return 3 if int(match.group(1)) >= 2 else 2
    return None


def _describe_versions():
    return "2 (containerd 1.6/1.7) or 3 (containerd 2.x)"


def file_config_version(doc, path):
    """The ``version`` of a parsed config, None for an empty one; errors for what we cannot edit."""
    if not doc:
        return None
    if "version" not in doc:
        raise ConfigError(
            "%s has no 'version' key, so containerd reads it as config version 1 (containerd 1.4 and older), "
            "which is not supported. Nothing was changed; rewrite it as version %s (see `containerd config default`) "
            "and run again."
            % (path, _describe_versions())
        )
    version = plain(doc["version"])
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigError("%s: 'version' must be an integer, found %r" % (path, version))
    if version not in CRI_PLUGINS:
        raise ConfigError(
            "%s: unsupported containerd config version %d; supported are %s. Nothing was changed."
            % (path, version, _describe_versions())
        )
    return version


def _with_version_first(text, version, path):
    """Parse a file we own, adding ``version`` when it is missing (containerd needs it per file)."""
    doc = parse_toml(text, path)
    if "version" not in doc:
        doc = parse_toml("version = %d\n" % version + (text or ""), path)
    return doc


# The values read from a runtime (its options are copied, not read), with the type containerd reads them as.
_RUNTIME_FIELDS = (("runtime_type", str),)
_CRI_FIELDS = (("cdi_spec_dirs", list),)


def _check_field(table, key, types, path, source):
    if isinstance(table, dict) and key in table:
        check_type(table[key], types, path + [key], source, error=ConfigError)


def check_shapes(data, version, source):
    """Every table on the way to the runtimes is a table, and every value read has the type containerd reads.

    A string or list where a table belongs cannot be edited; a list where a
    name belongs cannot be looked up. The message names the file and the key.
    """
    if not isinstance(data, dict):
        return
    imports = data.get("imports")
    if imports is not None and not (isinstance(imports, list) and all(isinstance(i, str) for i in imports)):
        raise ConfigError("%s: 'imports' must be a list of paths, found %r. Nothing was changed; fix the file and "
                          "run again." % (source, imports))
    for index, pattern in enumerate(imports or []):
        check_path_text(pattern, "imports[%d]" % index, source, error=ConfigError)
    cri = CRI_PLUGINS.get(version)
    if cri is None:
        return
    runtimes_path = ["plugins", cri, "containerd", "runtimes"]
    check_tables(data, runtimes_path, source)
    cri_table = lookup(data, ["plugins", cri])
    for key, types in _CRI_FIELDS:
        _check_field(cri_table, key, types, ["plugins", cri], source)
    for index, spec_dir in enumerate((cri_table or {}).get("cdi_spec_dirs") or []):
        check_type(spec_dir, str, ["plugins", cri, "cdi_spec_dirs", index], source, error=ConfigError)
    _check_field(lookup(data, runtimes_path[:-1]), "default_runtime_name", str, runtimes_path[:-1], source)
    for name, runtime in (lookup(data, runtimes_path) or {}).items():
        check_tables(data, runtimes_path + [name, "options"], source)
        for key, types in _RUNTIME_FIELDS:
            _check_field(runtime, key, types, runtimes_path + [name], source)


def _import_files(imports, base_dir, globber):
    """The files an ``imports`` list names, in the order containerd loads them."""
    files = []
    for pattern in imports or []:
        if not isinstance(pattern, str):
            continue
        if not os.path.isabs(pattern):
            pattern = os.path.join(base_dir, pattern)
        for name in sorted(globber(pattern)):
            if name not in files:
                files.append(name)
    return files


def _glob_matches(pattern, path):
    """Whether ``filepath.Glob(pattern)`` would return ``path`` (``*`` stops at ``/``)."""
    pattern_parts = pattern.split("/")
    path_parts = path.split("/")
    if len(pattern_parts) != len(path_parts):
        return False
    return all(fnmatch.fnmatchcase(name, pat) for pat, name in zip(pattern_parts, path_parts))


def _merge_imported(version, base, imported):
    """containerd's merge of one imported file onto ``base`` (plain dicts)."""
    if version >= 3:
        return deep_merge(base, imported)
    merged = deep_merge(dict((k, v) for k, v in base.items() if k != "plugins"),
                        dict((k, v) for k, v in imported.items() if k != "plugins"))
    plugins = dict(base.get("plugins") or {})
    plugins.update(imported.get("plugins") or {})  # whole sections replaced in containerd 1.x
    if plugins:
        merged["plugins"] = plugins
    return merged


# What containerd runs when a config names no runtime at all (its built-in runc).
BUILTIN_RUNTIMES = {"runc": {"runtime_type": RUNC_V2_SHIM}}
# containerd's own default_runtime_name, what a config falls back to without one.
FALLBACK_DEFAULT_RUNTIME = "runc"


def builtin_runtimes_from_default(text):
    """The runtimes in ``containerd config default`` output, or None.

    The CRI plugin is the one of the output's own ``version``: containerd 2.x
    prints version 3 even where the config on disk (Debian's package) is version 2.
    """
    try:
        default = load_plain(text, "`containerd config default`")
    except ConfigError:
        return None
    version = default.get("version")
    plugin = CRI_PLUGINS.get(version) if isinstance(version, int) and not isinstance(version, bool) else None
    runtimes = lookup(default, ["plugins", plugin, "containerd", "runtimes"]) if plugin else None
    return runtimes if isinstance(runtimes, dict) and runtimes else None


class _Options(object):
    def __init__(self, runtime_name, runtime_path, set_as_default, enable_cdi, cdi_spec_dir, systemd_cgroup,
                 builtin_runtimes=None):
        self.builtin_runtimes = builtin_runtimes
        # The default runtime is set by a file other than the one edited (drop-in mode).
        self.default_elsewhere = False
        self.runtime_name = runtime_name
        self.runtime_path = runtime_path
        self.set_as_default = set_as_default
        self.enable_cdi = enable_cdi
        self.cdi_spec_dir = cdi_spec_dir
        self.systemd_cgroup = systemd_cgroup


def _configure_cri(doc, version, effective_cri, opts):
    """Put the NVIDIA runtime into ``doc``; ``effective_cri`` is the CRI section containerd would see.

    When the inherited runtime is written in ``doc`` itself as a table, the new
    runtime is a copy of it, so it reads like its neighbours.
    """
    cri_name = CRI_PLUGINS[version]
    runtimes_path = ["plugins", cri_name, "containerd", "runtimes"]
    # Dotted keys on the way (plugins."...".containerd.runtimes.runc.options.X = 1) become tables first.
    canonical_path(doc, runtimes_path + [opts.runtime_name, "options"])
    runtimes = ensure_path(doc, runtimes_path)

    effective_runtimes = lookup(effective_cri, ["containerd", "runtimes"]) or {}
    if not effective_runtimes:
        # A config without runtimes runs containerd's built-in runc. Naming only
        # the NVIDIA runtime would replace that map (runc gone, and the default
        # runtime with it), so the built-in runtimes are written out first.
        builtins = opts.builtin_runtimes(version) if callable(opts.builtin_runtimes) else opts.builtin_runtimes
        effective_runtimes = dict(builtins or BUILTIN_RUNTIMES)
        effective_runtimes.pop(opts.runtime_name, None)
        for name, data in effective_runtimes.items():
            if name not in runtimes:
                add_fresh_table(doc, runtimes_path + [name], data)
        # Read again: a table split across the file is a view that does not see what was added.
        runtimes = lookup(doc, runtimes_path)
    default_name = lookup(effective_cri, ["containerd", "default_runtime_name"])
    source_name = inherited_runtime(effective_runtimes, default_name, opts.runtime_name)
    source = effective_runtimes.get(source_name) if source_name else {}
    source_options = source.get("options") if isinstance(source.get("options"), dict) else {}

    wanted_options = dict((k, v) for k, v in source_options.items() if k != "BinaryName")
    wanted_options["BinaryName"] = opts.runtime_path
    if opts.systemd_cgroup is not None:
        wanted_options["SystemdCgroup"] = opts.systemd_cgroup
    # Runtime level settings (privileged_without_host_devices, base_runtime_spec, ...)
    # are inherited once; an operator's own value on the NVIDIA runtime is kept.
    inherited = dict((k, v) for k, v in source.items() if k != "options")
    # nvidia-ctk copies the whole runtime, its type included (a runhcs or a
    # custom shim stays what it is); only a runtime without one gets runc's shim.
    inherited["runtime_type"] = source.get("runtime_type") or RUNC_V2_SHIM

    if opts.runtime_name not in runtimes:
        source_item = runtimes.get(source_name) if source_name else None
        if is_real_table(source_item) and plain(source_item) == source and is_real_table(source_item.get("options")):
            add_table(doc, runtimes_path, opts.runtime_name, copy_table(source_item), like=source_item,
                      near=source_name)
        else:
            fresh = dict(inherited)
            fresh["options"] = wanted_options
            add_fresh_table(doc, runtimes_path + [opts.runtime_name], fresh)
    nvidia = lookup(doc, runtimes_path + [opts.runtime_name])
    if not isinstance(nvidia, dict):
        raise ConfigError("plugins.%s.containerd.runtimes.%s is not a table" % (cri_name, opts.runtime_name))
    nvidia_path = runtimes_path + [opts.runtime_name]
    set_value_at(doc, nvidia_path, "runtime_type", inherited["runtime_type"])
    for key, value in inherited.items():
        if key not in nvidia:
            set_value_at(doc, nvidia_path, key, value)
    ensure_path(doc, nvidia_path + ["options"])
    for key, value in wanted_options.items():
        set_value_at(doc, nvidia_path + ["options"], key, value)

    containerd_path = runtimes_path[:-1]
    if opts.set_as_default:
        set_value_at(doc, containerd_path, "default_runtime_name", opts.runtime_name)
    elif opts.runtime_name in (default_name, plain(lookup(doc, containerd_path + ["default_runtime_name"]))):
        # Like nvidia-ctk: a default naming the NVIDIA runtime goes when it is no longer
        # wanted, and containerd falls back to its built-in default, runc. A version 3
        # drop-in cannot remove what the main config sets: it names runc instead.
        remove_value_at(doc, containerd_path, "default_runtime_name")
        if opts.default_elsewhere and default_name == opts.runtime_name:
            set_value_at(doc, containerd_path, "default_runtime_name", FALLBACK_DEFAULT_RUNTIME)
    if opts.enable_cdi:
        cri_path = runtimes_path[:-2]
        set_value_at(doc, cri_path, "enable_cdi", True)
        dirs = effective_cri.get("cdi_spec_dirs")
        # containerd's default dirs are /etc/cdi and /var/run/cdi; only a list that
        # leaves out the dir our spec goes to needs it added.
        if isinstance(dirs, list) and opts.cdi_spec_dir and opts.cdi_spec_dir not in dirs \
                and opts.cdi_spec_dir.replace("/var/run/", "/run/", 1) not in dirs:
            set_value_at(doc, cri_path, "cdi_spec_dirs", dirs + [opts.cdi_spec_dir])
    return source_name


def plan_containerd(*args, **kwargs):
    """The edits that make containerd offer the NVIDIA runtime (see :func:`_plan_containerd`).

    A large main config is edited through the CRI tables only; when that cut
    does not check out, the whole file is edited instead.
    """
    paths = (kwargs.get("config_path", args[0] if args else None), kwargs.get("drop_in_path"))
    try:
        return guard_tomlkit(_plan_containerd, paths, *args, **kwargs)
    except ScopeMismatch:
        return guard_tomlkit(_plan_containerd, paths, *args, scoped=False, **kwargs)
    except LayoutError as whole:
        # tomlkit failed on the whole file: give it only the CRI tables, the rest is kept byte for byte.
        try:
            return guard_tomlkit(_plan_containerd, paths, *args, scoped=True, **kwargs)
        except (ScopeMismatch, LayoutError):
            raise whole


def _plan_containerd(config_path="/etc/containerd/config.toml", mode="in_place", config_version=None,
                     runtime_name=NVIDIA_RUNTIME_NAME, runtime_path=DEFAULT_NVIDIA_RUNTIME_PATH,
                     set_as_default=False, enable_cdi=False, cdi_spec_dir=DEFAULT_CDI_SPEC_DIR,
                     systemd_cgroup=None, drop_in_path=None, builtin_runtimes=None, reader=read_text,
                     globber=glob.glob, scoped=None):
    """The edits that make containerd offer the NVIDIA runtime.

    ``config_version`` is what the caller detected from ``containerd --version``
    (or was told); it is used when there is no config, and must agree with the
    config's own ``version`` when there is one.

    ``builtin_runtimes`` (a dict, or a callable taking the config version and
    returning one, e.g. from ``containerd config default``) are the runtimes
    containerd has when the config names none; without it, a plain runc.
    """
    if mode not in ("in_place", "drop_in"):
        raise ConfigError("unknown mode %r for containerd: use in_place or drop_in" % (mode,))
    if not os.path.isabs(runtime_path):
        raise ConfigError("the NVIDIA runtime path %r is not an absolute path" % (runtime_path,))
    if config_version is not None and config_version not in CRI_PLUGINS:
        raise ConfigError("unsupported containerd config version %r; supported are %s"
                          % (config_version, _describe_versions()))

    main_text = reader(config_path)
    main_file = TomlFile(main_text, config_path)  # the one full parse of the main config
    found = file_config_version(main_file.data, config_path)
    if found is None and config_version is None:
        raise ConfigError(
            "%s does not exist (or is empty) and the containerd version is unknown: install containerd "
            "first or set the config version (%s)." % (config_path, _describe_versions())
        )
    if found is not None and config_version is not None and found != config_version:
        raise ConfigError(
            "conflicting options: %s is config version %d but version %d was requested. Nothing was changed; "
            "use containerd_config_version=auto or migrate the config (`containerd config migrate`)."
            % (config_path, found, config_version)
        )
    version = found or config_version
    cri_name = CRI_PLUGINS[version]
    check_shapes(main_file.data, version, config_path)
    opts = _Options(runtime_name, runtime_path, set_as_default, enable_cdi, cdi_spec_dir, systemd_cgroup,
                    builtin_runtimes)
    warnings = []
    base_dir = os.path.dirname(config_path)
    main_plain = main_file.data
    imported = _import_files(main_plain.get("imports"), base_dir, globber)
    # An empty config gets the version it is written for: containerd reads a file without one as version 1.
    with_version = TomlFile(main_text, config_path, prefix="version = %d\n" % version) if found is None else main_file

    if mode == "in_place":
        main_file = with_version
        main_doc = main_file.edit(["plugins", cri_name, "containerd"], scoped)
        effective = main_plain
        for path in imported:
            data = load_plain(reader(path), path)
            check_shapes(data, version, path)
            if version == 2 and cri_name in (data.get("plugins") or {}):
                warnings.append(
                    "%s replaces the whole %s section of %s (containerd 1.x import rules), so the NVIDIA runtime "
                    "written there is not used; use mode=drop_in." % (path, cri_name, config_path))
            effective = _merge_imported(version, effective, data)
        _configure_cri(main_doc, version, lookup(effective, ["plugins", cri_name]) or {}, opts)
        after = main_file.render()
        return Plan("containerd", [FileEdit(config_path, main_text, after)], version, cri_name, warnings)

    # drop_in
    drop_in_path = drop_in_path or os.path.join(base_dir, "conf.d", DROP_IN_NAME)
    drop_in_text = reader(drop_in_path)
    # fail early, before anything else, on a broken drop-in
    check_shapes(load_plain(drop_in_text, drop_in_path), version, drop_in_path)

    # The main config imports the drop-in (a glob such as conf.d/*.toml may already do).
    patterns = [p if os.path.isabs(p) else os.path.join(base_dir, p)
                for p in (main_plain.get("imports") or []) if isinstance(p, str)]
    # Read only (for a version 2 copy of the CRI section) but for the imports line.
    needs_import = not any(_glob_matches(p, drop_in_path) for p in patterns)
    main_file = with_version if needs_import else main_file
    main_doc = main_file.edit(["plugins", cri_name] if version == 2 else ["plugins", cri_name, "containerd"], scoped)
    if needs_import:
        imports = main_doc.get("imports")
        pattern = os.path.join(os.path.dirname(drop_in_path), "*.toml")
        if imports is None:
            set_value(main_doc, "imports", [pattern])
        elif isinstance(imports, list):
            imports.append(pattern)
        else:
            raise ConfigError("%s: 'imports' must be a list of paths, found %r" % (config_path, plain(imports)))
    new_main = main_file.render()

    # Load order with the drop-in in its place: main, then imported files sorted per pattern.
    order = _import_files(plain(main_doc.get("imports")), base_dir,
                          lambda p: sorted(set(globber(p)) | ({drop_in_path} if _glob_matches(p, drop_in_path) else set())))
    position = order.index(drop_in_path) if drop_in_path in order else len(order)
    before_files, after_files = order[:position], order[position + 1:]

    effective = main_plain
    cri_overridden = False
    for path in before_files:
        data = load_plain(reader(path), path)
        check_shapes(data, version, path)
        cri_overridden = cri_overridden or cri_name in (data.get("plugins") or {})
        effective = _merge_imported(version, effective, data)
    for path in after_files:
        data = load_plain(reader(path), path)
        if version == 2 and cri_name in (data.get("plugins") or {}):
            warnings.append("%s is imported after %s and replaces its whole %s section (containerd 1.x), "
                            "so the NVIDIA runtime is not used; rename it to sort before %s."
                            % (path, drop_in_path, cri_name, os.path.basename(drop_in_path)))
        elif set_as_default and lookup(data, ["plugins", cri_name, "containerd", "default_runtime_name"]) \
                not in (None, runtime_name):
            warnings.append("%s is imported after %s and sets another default runtime." % (path, drop_in_path))
    effective_cri = lookup(effective, ["plugins", cri_name]) or {}

    if version == 2:
        # Regenerated from the section it overrides, so it follows changes made to the main config.
        doc = parse_toml((DROP_IN_HEADER[2] % config_path) + "version = 2\n", drop_in_path)
        plugins = ensure_table(doc, "plugins")
        base_item = None if cri_overridden else lookup(main_doc, ["plugins", cri_name])
        if base_item is not None and is_real_table(base_item):
            add_table(doc, ["plugins"], cri_name, copy_table(base_item), like=base_item)
        else:
            plugins[cri_name] = table_from_dict(effective_cri)
        _configure_cri(doc, version, effective_cri, opts)
    else:
        if drop_in_text is None or not drop_in_text.strip():
            drop_in_text_for_edit = DROP_IN_HEADER[3] + "version = 3\n"
        else:
            drop_in_text_for_edit = drop_in_text
        doc = _with_version_first(drop_in_text_for_edit, version, drop_in_path)
        opts.default_elsewhere = True
        _configure_cri(doc, version, effective_cri, opts)
    edits = [FileEdit(config_path, main_text, new_main),
             FileEdit(drop_in_path, drop_in_text, settled(drop_in_path, drop_in_text, dump_checked(doc, drop_in_path)))]
    return Plan("containerd", edits, version, cri_name, warnings)
