"""``juggle module ...``: the commands of a module's life before it is installed.

``new`` scaffolds a co-module (``--hdl``: with its core in Verilog) and ``bitstream`` writes a
bitstream for one of a board's regions (:mod:`juggle.scaffold`); ``validate`` checks a module
without running its code; ``test`` runs its register model and its RTL side by side through its
driver (:mod:`juggle.rtlcheck`); ``build`` synthesizes its RTL; ``lock``, ``keygen`` and
``sign`` pin and sign it; ``schema`` prints the descriptor's JSON schema; ``import-dfx`` makes
an AMD dfx-mgr package a co-module's hardware tier. Every command takes ``--json`` and then
prints exactly one JSON document, errors included.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from juggle.commands.output import JsonOpt, console, emit_json, fail
from juggle.errors import ConfigurationError, JuggleError
from juggle.fabric.bitstream import normalize_part
from juggle.fabric.profiles import load_profile
from juggle.rtlcheck import DEFAULT_SAMPLES
from juggle.scaffold import scaffold_module, write_module_bitstream

__all__ = [
    "module_app",
    "module_bitstream",
    "module_build",
    "module_import_dfx",
    "module_keygen",
    "module_lock",
    "module_new",
    "module_schema",
    "module_sign",
    "module_test",
    "module_validate",
]

module_app = typer.Typer(
    help="Modules: new, validate, test, build, bitstream, lock, keygen, sign, schema.",
    no_args_is_help=True,
)


@module_app.command("new")
def module_new(
    name: Annotated[str, typer.Argument(help="Module name (a-z, 0-9, _ and -), e.g. demo_svc.")],
    interface: Annotated[
        str,
        typer.Option(
            "--interface", help="The new interface as package.Class, e.g. demo.EchoService."
        ),
    ],
    target_dir: Annotated[
        Path, typer.Option("--target-dir", help="Folder to create the module folder NAME in.")
    ] = Path("."),
    fabric: Annotated[
        str, typer.Option(help="Board profile (name or path) the bitstream is built for.")
    ] = "xupv2p",
    region: Annotated[
        str | None,
        typer.Option(help="Region of the bitstream (default: the first the core fits)."),
    ] = None,
    hdl: Annotated[
        bool,
        typer.Option(
            "--hdl", help="Also write the core in Verilog (hdl/NAME/), checked by module test."
        ),
    ] = False,
    bus: Annotated[
        str | None,
        typer.Option(help="Bus of the Verilog top, with --hdl: regbus (default) or axi4-lite."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Scaffold a complete co-module: interface, software, driver, register model, descriptor
    and a bitstream (with --hdl, the core in Verilog too); it validates, installs and juggles
    as generated."""
    try:
        if bus is not None and not hdl:
            raise ConfigurationError(
                f"--bus {bus} is the bus of the Verilog core: give --hdl too", value=bus
            )
        made = scaffold_module(
            name,
            interface,
            target_dir=target_dir,
            fabric=fabric,
            region=region,
            hdl=hdl,
            bus=bus or "regbus",
        )
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(made.to_json())
        return
    out = console()
    out.print(
        f"[green]created[/green] module [bold]{escape(made.name)}[/bold] in "
        f"{escape(str(made.path))} ({escape(made.interface)}; bitstream for "
        f"{escape(made.fabric)} {escape(made.region)}, {made.bitstream_bytes:,} bytes)"
    )
    for relpath in made.files:
        out.print(f"  {escape(relpath)}")
    out.print("next:")
    for step in made.to_json()["next"]:
        out.print(f"  {escape(step)}")


@module_app.command("bitstream")
def module_bitstream(
    path: Annotated[Path, typer.Argument(help="The .bit file to write.")],
    design: Annotated[
        str, typer.Option("--design", help="Design name (the core's RegisterModel.design).")
    ],
    fabric: Annotated[
        str, typer.Option(help="Board profile (name or path): the part and the region.")
    ] = "xupv2p",
    region: Annotated[
        str | None, typer.Option(help="Target region (default: the board's first).")
    ] = None,
    size: Annotated[
        int | None,
        typer.Option(help="File size in bytes (default: the region's typical bitstream)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Write a bitstream for DESIGN into a region of a board (part and Region= in its
    header), sized for the region."""
    try:
        board = load_profile(fabric)
        target = region if region is not None else board.regions[0].name
        written = write_module_bitstream(path, design, fabric=board, region=target, size=size)
        maximum = board.region(target).max_bitstream_bytes
    except JuggleError as exc:
        fail(exc, json_out)
    nbytes = written.stat().st_size
    document = {
        "path": str(written),
        "design": design,
        "fabric": board.name,
        "part": normalize_part(board.board.part),
        "region": target,
        "bytes": nbytes,
        "max_bytes": maximum,
    }
    if json_out:
        emit_json(document)
        return
    console().print(
        f"[green]wrote[/green] {escape(str(written))} ({nbytes:,} bytes): design "
        f"{escape(design)}, part {document['part']}, region {escape(target)} (at most "
        f"{maximum:,} bytes)"
    )


@module_app.command("validate")
def module_validate(
    path: Annotated[Path, typer.Argument(help="Module folder, .zip, juggle.toml or XML.")],
    json_out: JsonOpt = False,
    fabric: Annotated[
        str | None,
        typer.Option(
            help=escape(
                "Board profile to check against (default: the board the descriptor records, "
                "[module] board, else xupv2p)."
            )
        ),
    ] = None,
    import_code: Annotated[
        bool,
        typer.Option(
            "--import", help="Also import and install the module's code (runs it) in a sandbox."
        ),
    ] = False,
    trusted_key: Annotated[
        list[Path] | None,
        typer.Option(
            help="Require a signature by this public key (repeatable), as a framework with "
            "trusted_keys does."
        ),
    ] = None,
) -> None:
    """Check a module (descriptor, pins, classes, bitstreams, resources) without running its
    code; --import also installs it in a throwaway framework."""
    from juggle.runtime import Framework
    from juggle.runtime.validate import validate_module

    try:
        report = validate_module(path, fabric=fabric, trusted_keys=trusted_key or None)
        if import_code:  # run its code too: install it in a throwaway framework
            with Framework(report["fabric"], trusted_keys=trusted_key or None) as fw:
                fw.install(path)
            report["imported"] = True
    except JuggleError as exc:
        if json_out:
            emit_json(
                {"valid": False, "path": str(path), "error": str(exc), "type": type(exc).__name__}
            )
            exc.reported_as_json = True  # type: ignore[attr-defined]
        raise
    if json_out:
        emit_json(report)
        return
    out = console()
    how = "imported and installed" if report["imported"] else "read without running its code"
    board = f"on {report['fabric']}" + (
        " (the descriptor's board)" if report["fabric_from"] == "descriptor" else ""
    )
    out.print(
        f"[green]ok[/green] module [bold]{escape(report['name'])}[/bold] {report['version']} "
        f"{escape(board)} ({how})"
    )
    for service in report["services"]:
        out.print(f"  {', '.join(service['interfaces'])}: tiers {', '.join(service['tiers'])}")
    if report["pinned"]:
        out.print(f"  {len(report['pinned'])} pinned files verified")
    if report["signed_by"]:
        out.print(f"  signed by trusted key {report['signed_by']}")


@module_app.command("test")
def module_test(
    path: Annotated[Path, typer.Argument(help="Module folder.")],
    fabric: Annotated[str, typer.Option(help="Board profile (name or path).")] = "xupv2p",
    samples: Annotated[
        int, typer.Option(help="Random calls per interface method.")
    ] = DEFAULT_SAMPLES,
    seed: Annotated[int, typer.Option(help="Seed of the random stimuli.")] = 0,
    json_out: JsonOpt = False,
) -> None:
    """Run the module's register model and its RTL side by side through its driver: known
    answers and random calls of every interface method, results and cycles compared. Exit
    status 0 when they agree, 1 on a mismatch (each reported with its stimulus), 2 on bad
    input."""
    from juggle.fabric.rtl import stderr_progress
    from juggle.rtlcheck import check_module

    try:
        report = check_module(
            path, fabric=fabric, samples=samples, seed=seed, progress=stderr_progress
        )
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(report.to_json())
    else:
        out = console(highlight=False)
        for check in report.designs:
            verdict = "[green]agree[/green]" if check.passed else "[red]MISMATCH[/red]"
            calls = check.calls
            out.print(
                f"{verdict} {escape(check.interface)} on design {escape(check.design)} "
                f"({escape(check.rtl.top)}, {check.rtl.bus}, {check.rtl.origin} RTL): "
                f"{calls['known_answer']} known-answer, {calls['vector']} vector and "
                f"{calls['random']} random calls; {check.model_cycles:,} cycles on the model "
                f"(modeled), {check.rtl_cycles:,} on the RTL (measured)"
            )
            if check.refused:
                total = sum(calls.values())
                out.print(
                    f"  {check.refused} of the {total} calls were refused by every tier "
                    "(an error on each)"
                    + (
                        "; [yellow]no call reached the core[/yellow]: give the module "
                        "known answers in vectors.json"
                        if check.rtl_cycles == 0
                        else ""
                    )
                )
            for method, reason in check.skipped:
                out.print(f"  [yellow]no stimuli[/yellow] for {escape(method)}: {escape(reason)}")
            for mismatch in check.mismatches:
                out.print(f"  {escape(mismatch.describe())}")
            if check.stopped:
                out.print(f"  stopped after {len(check.mismatches)} mismatches")
    if not report.passed:
        raise typer.Exit(1)


@module_app.command("build")
def module_build(
    path: Annotated[Path, typer.Argument(help="Module folder.")],
    json_out: JsonOpt = False,
    fabric: Annotated[str, typer.Option(help="Board profile whose part family to target.")] = (
        "xupv2p"
    ),
    quiet: Annotated[bool, typer.Option(help="No progress bar on stderr.")] = False,
) -> None:
    """Synthesize the module's RTL (Yosys synth_xilinx) and write resources.json beside its
    descriptor; install then checks those figures against the region."""
    from juggle.build import build_module
    from juggle.commands.progressbar import progress_bar

    with progress_bar("synthesis", silent=json_out or quiet) as step:
        report = build_module(path, fabric=fabric, progress=step)
    if json_out:
        emit_json(report)
        return
    out = console()
    out.print(f"[green]built[/green] {report['path']} ({report['family']}, modeled)")
    for design, entry in report["designs"].items():
        out.print(
            f"  {design}: {entry['luts']} LUTs, {entry['flipflops']} flip-flops, "
            f"~{entry['slices']} slices (estimate), {entry['multipliers']} multipliers, "
            f"{entry['block_rams']} block RAMs"
        )


@module_app.command(
    "lock",
    help=escape("Pin every file of the module with its sha256 (the [pins] table of juggle.toml)."),
)
def module_lock(
    path: Annotated[Path, typer.Argument(help="Module folder with a juggle.toml.")],
    json_out: JsonOpt = False,
) -> None:
    """Pin every file of the module with its sha256 (the [pins] table of juggle.toml)."""
    from juggle.runtime.integrity import lock_module

    pins = lock_module(path)
    if json_out:
        emit_json({"path": str(path), "pins": pins})
        return
    console().print(f"[green]locked[/green] {len(pins)} files of {path}")


@module_app.command("keygen")
def module_keygen(
    key: Annotated[Path, typer.Argument(help="Private key file to write (PEM, mode 0600).")],
    json_out: JsonOpt = False,
) -> None:
    """Write an ed25519 key pair for signing modules (KEY and KEY.pub)."""
    from juggle.runtime.integrity import generate_key

    public = generate_key(key)
    if json_out:
        emit_json({"private": str(key), "public": str(public)})
        return
    console().print(f"[green]wrote[/green] {key} (keep it private) and {public}")


@module_app.command("sign")
def module_sign(
    path: Annotated[Path, typer.Argument(help="Locked module folder with a juggle.toml.")],
    key: Annotated[Path, typer.Option("--key", help="ed25519 private key (PEM).")],
    json_out: JsonOpt = False,
) -> None:
    """Sign the module's pinned manifest (juggle.toml) with KEY: juggle.toml.sig."""
    from juggle.runtime.integrity import sign_module

    signature = sign_module(path, key)
    if json_out:
        emit_json({"path": str(path), "signature": str(signature)})
        return
    console().print(f"[green]signed[/green] {path}: {signature}")


@module_app.command("schema")
def module_schema(json_out: JsonOpt = False) -> None:
    """Print the JSON schema of juggle.toml (it is one JSON document, with or without --json)."""
    from juggle.runtime.descriptors import descriptor_schema_json

    del json_out  # the schema is JSON either way
    sys.stdout.write(descriptor_schema_json())


@module_app.command("import-dfx")
def module_import_dfx(
    package: Annotated[
        Path, typer.Argument(help="dfx-mgr package folder (shell.json, <accel>/<accel>_slotN/).")
    ],
    interface: Annotated[str, typer.Option(help="Interface the service offers (pkg.Class).")],
    driver: Annotated[str, typer.Option(help="Driver class of the hardware tier (mod.Class).")],
    json_out: JsonOpt = False,
    fabric: Annotated[
        str, typer.Option(help="Board profile whose region each slot N becomes.")
    ] = "kv260",
    accel: Annotated[
        str | None, typer.Option(help="Accelerator of the package (default: its only one).")
    ] = None,
    target_dir: Annotated[
        Path | None,
        typer.Option(help="Module folder to write juggle.toml in (default: the package)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Module name (default: the accel).")] = None,
    software: Annotated[str | None, typer.Option(help="Software tier class.")] = None,
    native: Annotated[str | None, typer.Option(help="Native tier class.")] = None,
    force: Annotated[bool, typer.Option(help="Replace an existing juggle.toml.")] = False,
) -> None:
    """Write juggle.toml making a dfx-mgr package the hardware tier of a co-module: each
    slot's partial becomes the bitstream of the profile's region of that slot."""
    from juggle.fabric.linux.dfxmgr import profile_regions
    from juggle.runtime.dfximport import import_package

    try:
        report = import_package(
            package,
            interface=interface,
            driver=driver,
            accel=accel,
            regions=profile_regions(load_profile(fabric)),
            target_dir=target_dir,
            name=name,
            software=software,
            native=native,
            force=force,
        )
    except JuggleError as exc:
        fail(exc, json_out)
    if json_out:
        emit_json(report)
        return
    out = console()
    out.print(f"[green]wrote[/green] {report['path']} (module {report['module']})")
    for region, path in report["bitstreams"].items():
        out.print(f"  {region}: {path}")
