# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: template
author:
  - gpuops.platform maintainers (@gpuops)
version_added: 0.1.0
short_description: ansible.builtin.template, without a deep copy of every variable per file
description:
  - Returns each file of O(_terms) rendered with Jinja2, exactly as P(ansible.builtin.template#lookup) does, with the
    same variables, search path and options; it runs that lookup.
  - The one difference is the variables. P(ansible.builtin.template#lookup) deep-copies every variable of the play
    (the facts of the host, the roles' defaults, the run's results) for each file, so that what it adds
    (C(template_path), C(ansible_managed), O(template_vars)) stays out of them. Here those go into an empty layer over
    the same variables (a C(collections.ChainMap)), which leaves them as untouched and copies nothing.
  - The collection's roles render their Kubernetes objects and plans with it; on the example inventory, a no-op
    C(cluster.yml) made about a dozen such copies of a few hundred kilobytes each, about 0.1 s of CPU apiece.
options:
  _terms:
    description: The template files, found as P(ansible.builtin.template#lookup) finds them (a role's C(templates/)).
    type: list
    elements: str
    required: true
  template_vars:
    description: A dictionary whose keys become additional variables of the templates.
    type: dict
    default: {}
  convert_data:
    description:
      - Whether text that reads as a literal (a JSON list, say) is turned into data; read by
        P(ansible.builtin.template#lookup) before ansible-core 2.19 only, where its default is V(true).
      - V(false) by default here, so that a template gives its text on every ansible-core, as 2.19 and later always
        do; the roles parse it themselves (C(from_yaml), C(from_json)).
    type: bool
    default: false
  jinja2_native:
    description:
      - Whether to use Jinja2 native types; read by P(ansible.builtin.template#lookup) before ansible-core 2.19 only.
    type: bool
    default: true
  variable_start_string:
    description: The string marking the beginning of a print statement.
    type: str
    default: '{{'
  variable_end_string:
    description: The string marking the end of a print statement.
    type: str
    default: '}}'
  comment_start_string:
    description: The string marking the beginning of a comment statement.
    type: str
    default: '{#'
  comment_end_string:
    description: The string marking the end of a comment statement.
    type: str
    default: '#}'
  trim_blocks:
    description: Whether the first newline after a block is removed (ansible-core 2.19 and later).
    type: bool
    default: true
seealso:
  - plugin: ansible.builtin.template
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Render a role's objects
  ansible.builtin.set_fact:
    objects: "{{ lookup('gpuops.platform.template', 'objects.yml.j2') | ansible.builtin.from_yaml_all | list }}"
"""

RETURN = r"""
_raw:
  description: Each file's content after templating, in the order of O(_terms).
  type: list
  elements: raw
"""

from collections import ChainMap

from ansible.plugins.lookup.template import LookupModule as BuiltinTemplate


class _Layered(ChainMap):
    """The variables, whose deep copy is a new empty layer over the same maps: what the builtin lookup adds to its
    copy lands in that layer, and the variables themselves are never copied or changed."""

    def __deepcopy__(self, memo):
        return ChainMap({}, *self.maps)


class LookupModule(BuiltinTemplate):

    def run(self, terms, variables=None, **kwargs):
        variables = {} if variables is None else variables
        maps = list(variables.maps) if isinstance(variables, ChainMap) else [variables]
        return super(LookupModule, self).run(terms, variables=_Layered(*maps), **kwargs)
