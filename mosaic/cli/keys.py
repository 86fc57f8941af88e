"""``mosaic keys``: the CURVE keys that let mosaic listen beyond loopback."""

from __future__ import annotations

from pathlib import Path

import click

from mosaic.cli.console import exit_with_error
from mosaic.core.exit_codes import EXIT_BAD_INPUT

_DESCRIPTIONS = {
    "server.key": "server public key",
    "server.key_secret": "server secret key",
    "client.key": "client public key",
    "client.key_secret": "client secret key",
}


@click.group("keys")
def keys() -> None:
    """CURVE keys for tcp beyond loopback."""


@keys.command("generate")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Replace keys already in DIR.")
def generate(directory: Path, force: bool) -> None:
    """Write a server and a client keypair to DIR (created with mode 0700).

    With `curve_keys: DIR` in an experiment file, every tcp socket of the run uses CURVE with
    these keys, and only peers holding them are let in.
    """
    from mosaic.transport.keys import KeyFileError, generate_keys

    try:
        written = generate_keys(directory, force=force)
    except KeyFileError as error:
        exit_with_error(error, EXIT_BAD_INPUT)
    folder = written[0].parent
    click.echo(f"wrote CURVE keys to {folder}:")
    width = max(len(str(path)) for path in written)
    for path in written:
        mode = " (mode 0600)" if path.name.endswith("_secret") else ""
        click.echo(f"  {path!s:<{width}}  {_DESCRIPTIONS[path.name]}{mode}")
    click.echo("")
    click.echo("Use them in an experiment file (a relative path is read from the file's folder):")
    click.echo("  transport: tcp")
    click.echo("  host: 0.0.0.0        # or an address of this machine")
    click.echo(f"  curve_keys: {folder}")
    click.echo("Whoever holds this folder can join the runs that use it: keep it private.")
