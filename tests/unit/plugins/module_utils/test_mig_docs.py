"""docs/mig-gpus.md lists exactly the GPUs and profiles of the offline MIG table."""
from pathlib import Path

from ansible_collections.gpuops.platform.plugins.module_utils._mig import profiles as P

DOC = Path(__file__).resolve().parents[4] / "docs" / "mig-gpus.md"


def _rows():
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and "`0x" in cells[1]:
            rows[cells[0]] = cells
    return rows


def test_every_family_device_id_and_profile_is_documented():
    rows = _rows()
    families = {}
    for device_id, family in P.FAMILIES.items():
        families.setdefault(family.name, (family, set()))[1].add("`0x%04X10DE`" % device_id)
    assert sorted(rows) == sorted(families)
    for name, (family, ids) in families.items():
        _name, doc_ids, geometry, profiles = rows[name]
        assert set(doc_ids.split(", ")) == ids, name
        assert geometry == "%d / %d / %d" % (family.compute_slices, family.memory_slices, family.max_instances)
        assert sorted(profiles.split(", ")) == sorted("`%s` x%d" % (p.name, p.max_count)
                                                      for p in family.profiles.values()), name
