"""Fake driver install on a node double: what a package upgrade changes, and nothing more.

The user-space driver (libnvidia-ml.so.<version>) becomes ``version``; the loaded
kernel module stays, so NVML now fails with LIB_RM_VERSION_MISMATCH, as the real
library does until the new module is loaded.
"""
import glob
import json
import os
import pickle

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(version=dict(type="str", required=True),
                                              reboot=dict(type="bool"), verify=dict(type="bool")))
    import upgrade_harness
    pynvml = upgrade_harness.import_real_pynvml()
    import mig_harness
    state = mig_harness.state_dir()
    version = module.params["version"]
    with open(os.path.join(state, "node.pickle"), "rb") as handle:
        node = pickle.load(handle)
    node.driver_version = version
    node.nvml_version = "12.%s" % version
    with open(os.path.join(state, "kernel_version")) as handle:
        loaded = handle.read().strip()
    node.init_error = None if loaded == version else pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    with open(os.path.join(state, "node.pickle"), "wb") as handle:
        pickle.dump(node, handle)
    for old in glob.glob(os.path.join(state, "lib", "libnvidia-ml.so.*")):
        os.remove(old)
    open(os.path.join(state, "lib", "libnvidia-ml.so.%s" % version), "w").close()
    mig_harness.event("driver", version=version, options={"reboot": module.params["reboot"],
                                                          "verify": module.params["verify"]})
    module.exit_json(changed=True, msg=json.dumps({"installed": version}))


if __name__ == "__main__":
    main()
