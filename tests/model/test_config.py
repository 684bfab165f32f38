"""zotd.toml (zotd/config.py): defaults, overrides and errors that name the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from zotd.model.config import (
    BUILTIN_TOOLS,
    DEFAULT_RESERVED_COMMANDS,
    Config,
    ConfigError,
    load_config,
    resolve_socket,
)
from zotd.protocol.lines import DEFAULT_MAX_LINE


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "zotd.toml"
    path.write_text(text)
    return path


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "absent.toml") == Config()


def test_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "")) == Config()


def test_defaults_follow_the_reference_and_brief() -> None:
    config = Config()
    assert config.shutdown_timeout == 2.0
    assert config.kill_timeout == 1.0
    assert config.intercept_timeout == 5.0
    assert config.tool_timeout == 60.0
    assert config.command_timeout == 60.0
    assert config.ready_grace == 3.0
    assert config.hello_timeout == 10.0
    assert config.idle_timeout == 300.0
    assert config.max_frame_bytes == DEFAULT_MAX_LINE
    assert config.extension_queue == 256
    assert config.reserved_commands == list(DEFAULT_RESERVED_COMMANDS)
    assert config.socket is None
    assert config.token is None
    assert config.log_level == "info"


def test_default_reserved_commands_are_not_shared() -> None:
    first = Config()
    first.reserved_commands.append("mine")
    assert "mine" not in Config().reserved_commands


def test_builtin_tools_are_the_references() -> None:
    assert set(BUILTIN_TOOLS) == {"read", "write", "edit", "bash", "skill"}


def test_valid_toml_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
shutdown_timeout = 0.5
tool_timeout = 120
idle_timeout = 0
max_frame_bytes = 1024
extension_queue = 8
reserved_commands = ["help", "weather"]
socket = "/tmp/z.sock"
token = "s3cret"
log_level = "debug"
""",
    )
    config = load_config(path)
    assert config == Config(
        shutdown_timeout=0.5,
        tool_timeout=120.0,
        idle_timeout=0.0,
        max_frame_bytes=1024,
        extension_queue=8,
        reserved_commands=["help", "weather"],
        socket="/tmp/z.sock",
        token="s3cret",
        log_level="debug",
    )
    assert config.kill_timeout == 1.0  # untouched fields keep their default


def test_integer_seconds_are_accepted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "intercept_timeout = 7\n"))
    assert config.intercept_timeout == 7.0


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, 'log_level = "WARNING"\n')).log_level == "WARNING"


def test_config_is_frozen() -> None:
    config = Config()
    with pytest.raises(AttributeError):
        config.tool_timeout = 1.0  # type: ignore[misc]


# --- errors -------------------------------------------------------------------


def test_unknown_key_names_file_and_key_and_suggests_the_closest(tmp_path: Path) -> None:
    path = write(tmp_path, "tool_timout = 5\n")
    assert config_error(path) == (
        f"{path}: unknown field `tool_timout`; did you mean `tool_timeout`?"
    )


def test_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, 'tool_timeout = "5"\n')
    assert config_error(path) == f"{path}: field `tool_timeout`: Expected `float`, got `str`"


@pytest.mark.parametrize(
    "field",
    [
        "shutdown_timeout",
        "kill_timeout",
        "intercept_timeout",
        "tool_timeout",
        "command_timeout",
        "ready_grace",
        "ready_idle",
        "hello_timeout",
    ],
)
@pytest.mark.parametrize("value", ["0", "-1.5"])
def test_non_positive_deadline_names_the_field(tmp_path: Path, field: str, value: str) -> None:
    path = write(tmp_path, f"{field} = {value}\n")
    assert config_error(path) == f"{path}: field `{field}`: Expected `float` > 0.0"


def test_negative_idle_timeout_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, "idle_timeout = -1\n")
    assert config_error(path) == f"{path}: field `idle_timeout`: Expected `float` >= 0.0"


def test_too_small_max_frame_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, "max_frame_bytes = 100\n")
    assert config_error(path) == f"{path}: field `max_frame_bytes`: Expected `int` >= 1024"


def test_zero_extension_queue(tmp_path: Path) -> None:
    path = write(tmp_path, "extension_queue = 0\n")
    assert config_error(path) == f"{path}: field `extension_queue`: Expected `int` >= 1"


def test_wrong_list_item_names_its_index(tmp_path: Path) -> None:
    path = write(tmp_path, 'reserved_commands = ["help", 3]\n')
    assert config_error(path) == (
        f"{path}: field `reserved_commands[1]`: Expected `str`, got `int`"
    )


def test_wrong_optional_type(tmp_path: Path) -> None:
    path = write(tmp_path, "socket = 5\n")
    assert config_error(path) == f"{path}: field `socket`: Expected `str | null`, got `int`"


def test_bad_log_level_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(tmp_path, 'log_level = "loud"\n')
    assert config_error(path) == (
        f"{path}: field `log_level`: must be one of debug, info, warning, error, not 'loud'"
    )


def test_non_string_log_level(tmp_path: Path) -> None:
    path = write(tmp_path, "log_level = 5\n")
    assert config_error(path) == f"{path}: field `log_level`: Expected `str`, got `int`"


def test_bad_log_level_in_python_raises_value_error() -> None:
    with pytest.raises(ValueError, match="log_level`: must be one of debug, info, warning, error"):
        Config(log_level="verbose")


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "tool_timeout = [\n")
    message = config_error(path)
    assert message.startswith(f"{path}: not valid TOML: ")


def test_invalid_toml_without_equals(tmp_path: Path) -> None:
    path = write(tmp_path, "this is not toml\n")
    assert config_error(path).startswith(f"{path}: not valid TOML: ")


def test_table_instead_of_top_level_keys_lists_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "[daemon]\ntool_timeout = 5\n")
    message = config_error(path)
    assert message.startswith(f"{path}: unknown field `daemon`; the known ones are ")
    known = message.split("the known ones are ")[1].split(", ")
    assert known == [f.name for f in msgspec.structs.fields(Config)]


def test_unreadable_path_names_the_file(tmp_path: Path) -> None:
    # A directory where the file should be: read_bytes() fails with an OSError.
    assert config_error(tmp_path) == f"{tmp_path}: cannot read: Is a directory"


# --- what a mistyped value or key says --------------------------------------------


def test_bad_restart_policy_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(tmp_path, '[restart]\npolicy = "sometimes"\n')
    assert config_error(path) == (
        f"{path}: field `restart.policy`: must be one of on-failure, always, never, not 'sometimes'"
    )


def test_bad_restart_policy_of_one_extension_names_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[extensions.hello.restart]\npolicy = "never"\n[extensions.weather.restart]\npolicy = "nevr"\n',
    )
    assert config_error(path) == (
        f"{path}: field `extensions.weather.restart.policy`: "
        "must be one of on-failure, always, never, not 'nevr'"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[restart]\npolcy = 'never'\n",
            "unknown field `restart.polcy`; did you mean `restart.policy`?",
        ),
        (
            "[restart]\nbackoff_maximum = 5\n",
            "unknown field `restart.backoff_maximum`; did you mean `restart.backoff_max`?",
        ),
        (
            "[extensions.weather]\nprioirty = 1\n",
            "unknown field `extensions.weather.prioirty`; did you mean `extensions.weather.priority`?",
        ),
        (
            "[extensions.weather.restart]\nintensty = 2\n",
            "unknown field `extensions.weather.restart.intensty`; "
            "did you mean `extensions.weather.restart.intensity`?",
        ),
        (
            '[extensions."my.ext"]\nrestrat = {}\n',
            'unknown field `extensions."my.ext".restrat`; did you mean `extensions."my.ext".restart`?',
        ),
        (
            "[extensions.weather]\ncolour = 'red'\n",
            "unknown field `extensions.weather.colour`; the known ones are restart, priority, env_passthrough, scope, lazy, idle_stop",
        ),
    ],
)
def test_unknown_key_in_a_table_suggests_the_closest(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    assert config_error(path) == f"{path}: {message}"


def test_a_bad_value_in_an_extensions_table_names_the_extension(tmp_path: Path) -> None:
    path = write(
        tmp_path, "[extensions.ok]\npriority = 1\n[extensions.weather.restart]\nintensity = 0\n"
    )
    assert config_error(path) == (
        f"{path}: field `extensions.weather.restart.intensity`: Expected `int` >= 1"
    )


def test_a_table_that_is_not_a_table_names_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[extensions]\nweather = 3\n")
    assert config_error(path) == f"{path}: field `extensions.weather`: Expected `object`, got `int`"


# --- socket: one path, whatever the current directory -------------------------


def test_relative_socket_is_relative_to_the_config_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'socket = "run/zotd.sock"\n')
    assert load_config(path).socket == str(tmp_path / "run" / "zotd.sock")


def test_relative_config_path_gives_an_absolute_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf", 'socket = "../run/zotd.sock"\n')
    monkeypatch.chdir(tmp_path)
    socket = load_config(Path("conf/zotd.toml")).socket
    assert socket == str(tmp_path / "conf" / ".." / "run" / "zotd.sock")


def test_socket_tilde_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    path = write(tmp_path, 'socket = "~/zot/zotd.sock"\n')
    assert load_config(path).socket == str(tmp_path / "me" / "zot" / "zotd.sock")


def test_absolute_socket_is_kept(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, 'socket = "/tmp/z.sock"\n')).socket == "/tmp/z.sock"


def test_resolve_socket(tmp_path: Path) -> None:
    config_file = tmp_path / "zotd.toml"
    assert resolve_socket("a.sock", config_file) == tmp_path / "a.sock"
    assert resolve_socket("/x/a.sock", config_file) == Path("/x/a.sock")


def test_two_processes_in_two_directories_read_the_same_socket(tmp_path: Path) -> None:
    """Each process resolves the file's relative socket itself: from anywhere,
    with the config file named relatively or not, it is the same path."""
    conf = tmp_path / "conf"
    conf.mkdir()
    write(conf, 'socket = "run/zotd.sock"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = "import sys; from pathlib import Path; from zotd.model.config import load_config; "
    code += "print(load_config(Path(sys.argv[1])).socket)"
    seen = set()
    for cwd, config in ((conf, "zotd.toml"), (elsewhere, str(conf / "zotd.toml"))):
        done = subprocess.run(
            [sys.executable, "-c", code, config],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        seen.add(done.stdout.strip())
    assert seen == {str(conf / "run" / "zotd.sock")}
