"""``mxc keygen``: make an Ed25519 key pair for signing artifacts.

::

    mxc keygen -o signing.key            # signing.key (private, 0600) + signing.key.pub
    mxc compile model-symbol.json --params model-0000.params --shape data=1,3,224,224 \\
        --sign signing.key -o model.mxc
    mxc run model.mxc --verify-key signing.key.pub --inputs in.npz -o out.npz

Keep the private key where artifacts are built; ship the ``.pub`` file to where
they are loaded.  ``openssl genpkey -algorithm ed25519 -out signing.key`` makes
the same kind of private key.
"""

from __future__ import annotations

import argparse

from . import register_command


@register_command("keygen", help="make an Ed25519 key pair to sign artifacts with "
                                 "(compile --sign, run --verify-key)")
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="KEY", required=True,
                   help="private key file to write (mode 0600); the public key goes to KEY.pub")
    p.add_argument("--force", action="store_true", help="overwrite an existing key")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import OutputError
    from ..runtime.signing import generate_key
    from ..output_paths import check_output_path
    check_output_path(args.output, "key")
    if Path(args.output).exists() and not args.force:
        raise OutputError(f"key {args.output}: already exists; give --force to replace it "
                          f"(artifacts signed with it will no longer verify with a new key)")
    private, public = generate_key(args.output)
    print(f"wrote private key {private} (keep it secret) and public key {public}")
    return 0
