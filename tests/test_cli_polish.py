"""CLI polish: shell completion, binary audio refused on a terminal, flags shown without `<bool>`."""

import os
import pty
import re
import subprocess
import sys
import time

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from koe.cli.main import app

RUN_AS_KOE = "import sys; from koe.cli.main import app; sys.argv[0] = 'koe'; app(prog_name='koe')"


def koe_process(*args, env_extra: dict | None = None, shell: str | None = None, **kw) -> subprocess.CompletedProcess:
    """`koe ARGS` in a new process; with `shell`, as a child of that shell (typer finds the user's shell
    from the parent processes, as `koe --install-completion` typed in it would see; under `make` the
    nearest one would otherwise be make's /bin/sh)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KOE_", "_KOE"))}
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", **(env_extra or {}))
    command = [sys.executable, "-c", RUN_AS_KOE, *map(str, args)]
    if shell is not None:
        command = [shell, "-c", '"$@"; exit $?', shell, *command]  # `; exit` keeps the shell from exec-ing into python
    return subprocess.run(command, env=env, capture_output=True, timeout=60, **kw)


def every_command(cmd=None, path=()):
    """(path, command) for the root and every command and group below it."""
    cmd = cmd or get_command(app)
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from every_command(sub, (*path, name))


# -- help: plain flags --------------------------------------------------------------------------


def test_no_help_page_shows_a_bool_placeholder_and_the_others_stay():
    runner = CliRunner()
    pages = {}
    for path, cmd in every_command():
        if not cmd.add_help_option:  # `koe bench` hands --help to its own argparse
            continue
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0, (path, r.output)
        pages[" ".join(path)] = r.output
    assert len(pages) > 25 and {"", "speak", "config set", "history replay", "models default"} <= set(pages)
    for name, page in pages.items():
        assert "<bool>" not in page, f"koe {name} --help:\n{page}"
        assert "--help" in page
    speak = pages["speak"]
    for row in (r"--stream\s+Write audio", r"--save\s+--no-save\s+Also keep", r"--help\s+-h\s+Show"):
        assert re.search(row, speak), row  # nothing between a flag's names and its help
    assert "<path>" in speak and "<str>" in speak and "KEY=VALUE" in speak and "<int range>" in speak
    assert "<list[str]>" in pages["serve"] or "HOST" in pages["serve"]
    assert "--install-completion" in pages[""] and "--show-completion" in pages[""]


# -- shell completion ---------------------------------------------------------------------------


def test_show_completion_prints_a_script_for_the_shell():
    r = koe_process("--show-completion", env_extra={"SHELL": "/bin/bash"}, shell="bash")
    assert r.returncode == 0, r.stderr.decode()
    script = r.stdout.decode()
    assert "_KOE_COMPLETE=complete_bash" in script and "complete" in script and "koe" in script


def test_completion_answers_commands_and_setting_keys():
    def complete(words: str) -> list[str]:
        cword = len(words.split()) - (0 if words.endswith(" ") else 1)
        r = koe_process(env_extra={"_KOE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)})
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout.decode().split()

    assert complete("koe hist") == ["history"]
    assert set(complete("koe history ")) >= {"list", "show", "replay", "delete"}
    assert complete("koe config set server.po") == ["server.port"]
    assert "models.default" in complete("koe config get models.")


def test_help_stays_fast_and_torch_free_with_completion_on():
    code = (
        "import sys\nfrom koe.cli.main import app\n"
        "try:\n    app(['--help'], prog_name='koe')\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "bad = [m for m in ('torch', 'transformers', 'tomlkit', 'numpy') if m in sys.modules]\nassert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    started = time.monotonic()
    r = koe_process("--help")
    assert r.returncode == 0 and b"history" in r.stdout and b"<bool>" not in r.stdout
    assert time.monotonic() - started < 5.0


# -- binary audio never goes to a terminal ------------------------------------------------------


def run_on_a_terminal(*args, tmp_path) -> tuple[int, str, bytes]:
    """koe with stdout a pseudo-terminal (stdin and stderr not): (exit code, stderr, what reached the terminal)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(KOE_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    try:
        p = subprocess.run(
            [sys.executable, "-m", "koe.cli.main", *map(str, args)], stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE, env=env, timeout=60
        )
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return p.returncode, p.stderr.decode(), seen


@pytest.mark.parametrize("args", [["--stream"], ["-o", "-"], ["--stream", "-o", "-"]])
def test_audio_to_a_terminal_is_refused_before_any_model_loads(args, tmp_path):
    # The model does not exist: a refusal that names -o proves it came first (before planning, before a load).
    code, err, seen = run_on_a_terminal("speak", "Hello.", "-m", tmp_path / "no-such-model", *args, tmp_path=tmp_path)
    assert code == 2, err
    assert err.startswith("error: ") and err.strip().count("\n") == 0 and "Traceback" not in err
    assert "stdout, which is a terminal" in err and "-o FILE" in err and "| ffplay -" in err
    assert "model" not in err and b"RIFF" not in seen
    assert not (tmp_path / "home").exists()  # not even KOE_HOME was opened


def test_a_file_or_a_pipe_still_works_with_a_terminal_around(tmp_path):
    # stdout a terminal, but the audio goes to -o FILE: not refused (it fails later, on the missing model)
    code, err, _ = run_on_a_terminal("speak", "Hello.", "-m", tmp_path / "no-such-model", "--stream", "-o", tmp_path / "x.wav", tmp_path=tmp_path)
    assert code == 2 and "model folder not found" in err and "terminal" not in err
    code, err, _ = run_on_a_terminal("history", "replay", "1", "-o", "-", tmp_path=tmp_path)
    assert code == 2 and "stdout, which is a terminal" in err


def test_install_completion_writes_the_script_where_bash_reads_it(tmp_path):
    r = koe_process("--install-completion", env_extra={"SHELL": "/bin/bash", "HOME": str(tmp_path)}, shell="bash")
    assert r.returncode == 0, r.stderr.decode()
    scripts = list(tmp_path.rglob("koe*"))
    assert scripts and "_KOE_COMPLETE=complete_bash" in scripts[0].read_text()
    assert str(scripts[0].relative_to(tmp_path)) in (tmp_path / ".bashrc").read_text()
