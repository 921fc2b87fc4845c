"""The interactive shell, driven by scripts fed through stdin (no terminal: no prompt)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest

import juggle
from juggle.commands.shell import JuggleShell, run_shell
from juggle.core.controllers.base import JuggleAction, StatsSnapshot
from juggle.errors import ProfileError


def run(script: str, fabric: str = "xupv2p") -> tuple[int, str]:
    out = io.StringIO()
    rc = run_shell(fabric, stdin=io.StringIO(script), stdout=out)
    return rc, out.getvalue()


def drive(framework: juggle.Framework, script: str) -> tuple[JuggleShell, str]:
    out = io.StringIO()
    shell = JuggleShell(framework, stdin=io.StringIO(script), stdout=out)
    shell.run()
    return shell, out.getvalue()


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error: ")]


def test_script_installs_starts_juggles_and_reports(tdes_path: Path) -> None:
    rc, text = run(
        f"""# set up the TDES co-module
install {tdes_path}
start 1
services
tier 1 hardware
stats 1
frobnicate 7
services
quit
services
"""
    )
    assert rc == 1  # a command failed: reported, the session went on, the status says so
    assert "juggle>" not in text  # no prompt when stdin is not a terminal
    assert f"installed module 1: tdes 1.0.0 ({tdes_path.resolve()})" in text
    assert "started module 1 (tdes); service id: 1" in text
    assert text.count("crypto.EncryptionService") >= 3  # two listings + stats
    assert "algorithm=tdes" in text
    assert "juggled: service 1 → hardware (region prr0)" in text
    assert "bitstream tdes written" in text
    reconf = next(line for line in text.splitlines() if "reconfiguration" in line)
    assert "ms" in reconf and "calibrated" in reconf
    overhead = next(line for line in text.splitlines() if "runtime overhead" in line)
    assert "µs" in overhead and "measured" in overhead
    assert "service 1 (crypto.EncryptionService) on hardware: 0 calls" in text
    assert "call durations, measured" in text
    assert error_lines(text) == [
        "error: unknown command 'frobnicate'; type 'help' for the commands"
    ]
    # the second listing shows the service in hardware in prr0; nothing ran after quit
    second = text.split("error: unknown command")[1]
    row = next(line for line in second.splitlines() if "crypto.EncryptionService" in line)
    assert "hardware" in row.split("│")[3] and "prr0" in row
    assert text.count("┃ id ┃ interface") == 2


def test_errors_are_printed_and_the_shell_goes_on(tdes_path: Path) -> None:
    rc, text = run(
        f"""install {tdes_path}/{"deep/" * 30}nope
install {tdes_path}
start 42
start 1
start 1
stats abc
stats 99
tier 1 quantum
tier 1
juggle x
juggle 1 extra
juggle 1 --out
juggle 1 --out y
evict
evict 1
install "unbalanced
modules
"""
    )
    assert rc == 1  # a command failed: reported, the session went on, the status says so
    errors = error_lines(text)
    assert errors[0].startswith("error: no module at ") and "nope" in errors[0]
    assert errors[1:] == [
        "error: no installed module 42",
        "error: cannot start module 'tdes' (id 1): it is active",
        "error: service id must be an integer, got 'abc'",
        "error: no service with id 99",
        "error: service 1 (crypto.EncryptionService) has no 'quantum' tier "
        "(it has: software, native, hardware)",
        "error: expected 2 argument(s), got 1 (usage: tier ID TIER)",
        "error: service id must be an integer, got 'x'",
        "error: unexpected argument 'extra' (usage: juggle ID [--out ID ...])",
        "error: --out needs at least one service id (usage: juggle ID [--out ID ...])",
        "error: service id must be an integer, got 'y'",
        "error: missing the service(s) to evict (usage: evict ID [ID ...])",
        "error: service 1 (crypto.EncryptionService) is in native, not in hardware: it "
        "cannot be taken out of the fabric",
        "error: cannot parse arguments '\"unbalanced': No closing quotation",
    ]
    assert "│  1 │ tdes │ 1.0.0   │ active │" in text  # the shell went on to the end


def test_clean_script_returns_zero_and_end_of_input_leaves(tdes_path: Path) -> None:
    rc, text = run(f"install {tdes_path}\n\n   \nmodules\n")
    assert rc == 0
    assert error_lines(text) == []
    assert "installed module 1" in text


def test_juggle_with_out_swaps_two_services(tdes_path: Path, des_path: Path) -> None:
    rc, text = run(
        f"""install {tdes_path}
start tdes
install {des_path}
start des
juggle 1
juggle 2
juggle 2 --out 1
regions
evict 2
regions
"""
    )
    errors = error_lines(text)
    assert len(errors) == 1 and "prr0 is held by service id 1" in errors[0]
    assert rc == 1  # a command failed: reported, the session went on, the status says so
    assert "juggled: service 1 → native, service 2 → hardware (region prr0)" in text
    listings = text.split("regions of xupv2p")
    assert "│ prr0   │ PROGRAMMED │ des    │ 2       │ des    │" in listings[1]
    assert "juggled: service 2 → native" in listings[1]
    assert "│ prr0   │ EMPTY │ -      │ -       │ -      │" in listings[2]


def test_module_lifecycle_commands(tdes_path: Path) -> None:
    rc, text = run(
        f"""install {tdes_path}
start 1
stop 1
update 1
update 1 {tdes_path}
uninstall tdes
modules
services
update 1 a b
"""
    )
    assert "stopped module 1 (tdes)" in text
    assert text.count("updated module 1 (tdes 1.0.0)") == 2
    assert "uninstalled module 1 (tdes)" in text
    assert "no modules installed" in text
    assert "no services registered" in text
    assert error_lines(text) == [
        "error: expected 1 or 2 arguments, got 3 (usage: update ID [PATH])"
    ]
    assert rc == 1  # a command failed: reported, the session went on, the status says so


def test_stats_show_measured_calls_per_tier_consumer_and_method(
    framework: juggle.Framework,
) -> None:
    enc = framework.get_service("EncryptionService", consumer="mail")
    enc.load_key(bytes(range(24)))
    buf = bytearray(b"8 bytes!" * 4)
    for _ in range(3):
        enc.encrypt(buf, len(buf))
    shell, text = drive(framework, "stats 1\n")
    assert shell.failures == 0
    assert "service 1 (crypto.EncryptionService) on native: 4 calls" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert rows["total"].split("│")[2].strip() == "4"
    assert rows["tier native"].split("│")[2].strip() == "4"
    assert rows["consumer mail"].split("│")[2].strip() == "4"
    assert rows["method encrypt"].split("│")[2].strip() == "3"
    assert rows["method load_key"].split("│")[2].strip() == "1"


class FocusController:
    """Puts service 1 in hardware while ``mail`` has the focus; counts its calls."""

    name = "focus-test"

    def __init__(self) -> None:
        self.calls = 0

    def decide(self, snapshot: StatsSnapshot) -> Sequence[JuggleAction]:
        self.calls += 1
        mail = snapshot.foreground == "mail"
        in_hw = {s.service_id for s in snapshot.in_hardware()}
        if mail and 1 not in in_hw:
            return [JuggleAction(1, (), "mail in focus")]
        if not mail and 1 in in_hw:
            return [JuggleAction(None, (1,), "mail left")]
        return []


def test_focus_and_control_run_the_controller(framework: juggle.Framework) -> None:
    controller = FocusController()
    _, text = drive(framework, "focus mail\nfocus\n")
    assert "no controller set: nothing decided" in text
    assert "foreground: mail" in text
    framework.set_controller(controller)
    shell, text = drive(framework, "controller\nfocus mail\ncontrol\nfocus -\n")
    assert shell.failures == 0
    assert "controller: focus-test" in text
    assert "juggled: service 1 → hardware (region prr0)" in text
    assert "controller focus-test: no juggle" in text
    assert "juggled: service 1 → native" in text
    assert "foreground: -" in text
    assert controller.calls == 3
    assert framework.foreground is None


def test_controller_off_and_unknown_control(framework: juggle.Framework) -> None:
    framework.set_controller(FocusController())
    shell, text = drive(framework, "controller off\ncontrol\ncontroller a b\n")
    assert framework.controller is None
    assert "controller: off" in text
    assert error_lines(text) == [
        "error: no controller set (use: controller NAME)",
        "error: expected at most 1 argument, got 2 (usage: controller NAME)",
    ]
    assert shell.failures == 2


def test_controller_by_name_loads_a_builtin(framework: juggle.Framework) -> None:
    shell, text = drive(framework, "controller no-such-policy\ncontroller\n")
    assert shell.failures == 1
    assert "no-such-policy" in error_lines(text)[0]
    assert framework.controller is None
    available = next(line for line in text.splitlines() if line.startswith("available: "))
    assert "foreground" in available.split(": ")[1].split(", ")
    mail = framework.get_service("EncryptionService", consumer="mail")
    mail.load_key(bytes(range(24)))
    shell, text = drive(framework, "controller foreground\nfocus mail\nservices\n")
    assert shell.failures == 0
    assert "controller: foreground" in text
    assert "juggled: service 1 → hardware (region prr0)" in text
    assert framework.services()[0].tier == "hardware"


def test_help_lists_and_describes_commands(framework: juggle.Framework) -> None:
    shell, text = drive(framework, "help\nhelp tier\nhelp nosuch\n?\n")
    for usage in ("install PATH", "juggle ID [--out ID ...]", "tier ID TIER", "stats ID", "quit"):
        assert usage in text
    assert "tier ID TIER: serve service ID from TIER (software, native or hardware)." in text
    assert error_lines(text) == ["error: no command 'nosuch'; type 'help' for the commands"]
    assert text.count("┃ command") == 2  # "?" is help too
    assert shell.failures == 1


def test_unknown_fabric_raises_before_reading() -> None:
    stdin = io.StringIO("modules\n")
    with pytest.raises(ProfileError):
        run_shell("no-such-board", stdin=stdin, stdout=io.StringIO())
    assert stdin.tell() == 0


class TerminalInput(io.StringIO):
    """A scripted stdin that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def test_terminal_input_gets_a_banner_and_prompts(framework: juggle.Framework) -> None:
    out = io.StringIO()
    shell = JuggleShell(framework, stdin=TerminalInput("modules\n"), stdout=out)
    shell.run()
    text = out.getvalue()
    assert text.startswith("juggle shell on xupv2p; type 'help' for the commands")
    assert text.count("juggle> ") == 2  # before "modules" and before end of input
    assert "│  1 │ tdes │" in text


def test_a_broken_module_is_one_error_line_then_the_session_goes_on(tmp_path: Path) -> None:
    """Issue 9: ``install BROKEN`` prints one line, ``services`` still answers, exit 0."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(Path(__file__).parents[2] / "examples" / "modules" / "tdes", broken)
    (broken / "tdes_module.py").write_text("x = 1 / 0\n")
    rc, out = run(f"install {broken}\nservices\ninstall {broken.parent / 'nowhere'}\nquit\n")
    assert rc == 1  # a command failed: reported, the session went on, the status says so
    lines = out.splitlines()
    assert len(error_lines(out)) == 2
    assert "ZeroDivisionError" in error_lines(out)[0] and "tdes_module.py:1" in out
    assert "no services registered" in lines


def test_workload_gives_stats_something_to_count(tmp_path: Path) -> None:
    tdes = Path(__file__).parents[2] / "examples" / "modules" / "tdes"
    rc, out = run(
        f"workload on\ninstall {tdes}\nstart 1\nworkload on\njuggle 1\nworkload off\nquit\n"
    )
    assert rc == 1  # a command failed: reported, the session went on, the status says so
    assert "no started service the workload knows" in out  # before a service exists
    assert "workload on: mail" in out
    last = [line for line in out.splitlines() if line.startswith("workload stopped")][-1]
    assert "failed 0, wrong 0" in last and "calls mail" in last
