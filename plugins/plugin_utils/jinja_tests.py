# -*- coding: utf-8 -*-
# Copyright: gpuops.platform maintainers
# Apache License 2.0 or GNU General Public License v3.0+, at your option
# (see LICENSE, LICENSES/ or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later
"""Value tests and patterns shared by the roles' plan checks.

The checks read variables as a playbook gives them, so the tests mean what
Jinja's own tests and filters mean there: ``integer`` and ``number`` never
take a boolean, and ``float``/``int`` turn what they cannot read into 0.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from numbers import Number

# Kubernetes names (k8s.io/apimachinery validation): a DNS-1123 label and subdomain.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
# A label key (optional DNS prefix, then a name) and a label value.
LABEL_KEY = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z"
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z"
# A resource.Quantity (k8s.io/apimachinery/pkg/api/resource), without sign.
QUANTITY = r"^(\+)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?\Z"


def is_integer(value):
    """An int that is not a boolean (Jinja's ``integer`` test)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    """A number that is not a boolean (Jinja's ``number`` test, less booleans)."""
    return isinstance(value, Number) and not isinstance(value, bool)


def matches(value, pattern):
    """Whether the text of ``value`` matches ``pattern`` from its start (Jinja's ``match`` test over ``| string``)."""
    return re.match(pattern, to_str(value)) is not None


def to_str(value):
    """The text of a value, as Jinja's ``string`` filter writes it."""
    return value if isinstance(value, str) else str(value)


def to_float(value):
    """``float(value)``, or 0.0 when it is not a number (Jinja's ``float`` filter)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def to_int(value):
    """``int(value)``, through float for text such as "1.5", else 0 (Jinja's ``int`` filter)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def unique(values):
    """The values without repeats, first seen first (Jinja's ``unique`` filter)."""
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def dictsort(mapping):
    """The items of a mapping sorted by key, ignoring case (Jinja's ``dictsort`` filter)."""
    return sorted(mapping.items(), key=lambda item: item[0].lower() if isinstance(item[0], str) else item[0])
