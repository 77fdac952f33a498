"""Generate the protobuf message tables the embedded server ships, from upstream's ``.proto`` files.

Kubernetes' protobuf encoding is defined by the ``generated.proto`` files of k8s.io/api and
k8s.io/apimachinery. This script compiles every one of them with protoc (from the grpcio-tools
package, which is not a dependency of the project: install it where you run this) into a single
``FileDescriptorSet`` and writes it gzip-compressed to
``src/kubeloop/apiserver/protobuf/kubernetes.protoset.gz``, which
``kubeloop.apiserver.protobuf.descriptors`` reads at run time.

Usage, with two checkouts of the same point of the release whose OpenAPI schemas the server
serves (the shipped set: kubernetes/api 10b39a39 and kubernetes/apimachinery eed236ce, of July
2026, the 1.37 cycle: PodCertificateRequest is in certificates.k8s.io/v1 there, as in the
schemas, and not yet in the v0.37.0-beta.0 tag)::

    pip install grpcio-tools
    python scripts/generate_protobuf_descriptors.py --api ../api --apimachinery ../apimachinery

``tests/apiserver/protobuf/test_protobuf.py`` checks that the shipped set has a message for every built-in
kind the server serves.
"""

from __future__ import annotations

import argparse
import gzip
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "kubeloop" / "apiserver" / "protobuf" / "kubernetes.protoset.gz"


def proto_files(include_root: pathlib.Path) -> list[str]:
    """Every ``generated.proto`` under the include root, by the name Go programs register it as."""
    return sorted(
        str(path.relative_to(include_root))
        for path in include_root.glob("k8s.io/*/**/generated.proto")
        if "testapigroup" not in path.parts
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--api", type=pathlib.Path, required=True, help="a checkout of kubernetes/api")
    parser.add_argument(
        "--apimachinery", type=pathlib.Path, required=True, help="a checkout of kubernetes/apimachinery"
    )
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        include_root = pathlib.Path(scratch)
        (include_root / "k8s.io").mkdir()
        (include_root / "k8s.io" / "api").symlink_to(args.api.resolve())
        (include_root / "k8s.io" / "apimachinery").symlink_to(args.apimachinery.resolve())
        files = proto_files(include_root)
        if not files:
            print("no generated.proto files under the given checkouts", file=sys.stderr)
            return 2
        descriptor_set = include_root / "set.binpb"
        compiled = subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"--proto_path={include_root}",
                f"--descriptor_set_out={descriptor_set}",
                "--include_imports",
                *files,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:  # protoc's warnings (unused imports) are printed only then
            print(compiled.stderr, file=sys.stderr)
            return compiled.returncode
        data = descriptor_set.read_bytes()
    # mtime=0: the same inputs give the same bytes.
    args.out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"{len(files)} files, {len(data)} bytes → {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
