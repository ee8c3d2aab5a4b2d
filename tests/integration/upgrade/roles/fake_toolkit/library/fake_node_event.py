"""Record one event of a node double (tests/integration/upgrade)."""
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(event=dict(type="str", required=True), data=dict(type="dict", default={})))
    import mig_harness
    mig_harness.event(module.params["event"], **module.params["data"])
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
