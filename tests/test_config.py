"""The typed configuration: YAML loading, --set overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from ratchet.config import ConfigError, Settings, describe_fields, load_config, parse_override
from ratchet.contracts import RatchetError


class Budget(Settings):
    """Limits."""

    max_calls: int = 40
    """Most calls."""
    max_seconds: float = 60.0
    """Most seconds."""


class Demo(Settings):
    """A config shaped like the real ones: scalars, a Literal, a list, a nested model."""

    name: str = "demo"
    """A free-form name."""
    mode: Literal["verifier", "filter", "policy"] = "verifier"
    """Harness mode."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1])
    """Env seeds."""
    out: Path = Path("runs")
    """Where to write."""
    budget: Budget = Field(default_factory=Budget)
    """Limits of the run."""
    temperature: float = 0.7
    """Sampling temperature."""
    verbose: bool = False
    """Print more."""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_defaults_without_file() -> None:
    config = load_config(Demo)
    assert config == Demo()
    assert config.budget.max_calls == 40


def test_yaml_load_with_nested_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "name: tictactoe\nmode: policy\nseeds: [3, 4, 5]\nbudget:\n  max_calls: 7\n")
    config = load_config(Demo, path)
    assert (config.name, config.mode, config.seeds) == ("tictactoe", "policy", [3, 4, 5])
    assert config.budget.max_calls == 7
    assert config.budget.max_seconds == 60.0  # untouched nested default kept


def test_empty_yaml_file_is_all_defaults(tmp_path: Path) -> None:
    assert load_config(Demo, write(tmp_path, "")) == Demo()


def test_overrides_keep_their_types(tmp_path: Path) -> None:
    path = write(tmp_path, "budget:\n  max_calls: 7\n")
    config = load_config(
        Demo,
        path,
        [
            "budget.max_calls=50",
            "budget.max_seconds=2.5",
            "temperature=0",
            "verbose=true",
            "seeds=[10, 11]",
            "mode=filter",
            "out=/tmp/x",
        ],
    )
    assert config.budget.max_calls == 50 and isinstance(config.budget.max_calls, int)
    assert config.budget.max_seconds == 2.5
    assert config.temperature == 0.0 and isinstance(config.temperature, float)
    assert config.verbose is True
    assert config.seeds == [10, 11]
    assert config.mode == "filter"
    assert config.out == Path("/tmp/x")


def test_override_wins_over_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name: from-file\nbudget:\n  max_calls: 7\n")
    assert load_config(Demo, path, ["name=from-cli"]).name == "from-cli"
    assert load_config(Demo, path, ["budget.max_calls=8"]).budget.max_calls == 8


@pytest.mark.parametrize("raw", ["2024", "1.10", "true", "null", "[a]"])
def test_override_of_a_string_field_keeps_the_text(raw: str) -> None:
    # YAML would read these as int/float/bool/None/list; a str field wants the text as typed.
    assert load_config(Demo, None, [f"name={raw}"]).name == raw


def test_override_with_equals_sign_in_value() -> None:
    assert load_config(Demo, None, ["name=a=b"]).name == "a=b"


def test_parse_override() -> None:
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert parse_override("a=x y") == (["a"], "x y")
    assert parse_override("a=") == (["a"], "")
    with pytest.raises(ConfigError) as info:
        parse_override("no-equals-sign")
    assert "key.sub=value" in (info.value.hint or "")


def test_unknown_key_names_key_and_allowed_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, write(tmp_path, "nmae: x\n"))
    message = str(info.value)
    assert "nmae" in message
    for allowed in ("name", "mode", "seeds", "budget", "temperature"):
        assert allowed in message


def test_unknown_nested_key_lists_the_nested_allowed_keys() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, None, ["budget.max_callz=3"])
    message = str(info.value)
    assert "budget.max_callz" in message
    assert "max_calls, max_seconds" in message


def test_bad_literal_names_key_and_allowed_values() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, None, ["mode=judge"])
    message = str(info.value)
    assert "mode" in message and "'judge'" in message
    for allowed in ("verifier", "filter", "policy"):
        assert allowed in message


def test_a_bad_override_is_named_as_an_override_not_as_the_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, write(tmp_path, "name: ok\n"), ["nmae=x"])
    assert "c.yaml with --set nmae=x: nmae: unknown key" in str(info.value)
    with pytest.raises(ConfigError) as plain:  # a file alone is named alone
        load_config(Demo, write(tmp_path, "nmae: x\n"))
    assert "--set" not in str(plain.value)


def test_bad_type_names_key_and_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, write(tmp_path, "budget:\n  max_calls: lots\n"))
    assert "budget.max_calls" in str(info.value) and "'lots'" in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, None, ["mode=judge", "budget.max_calls=lots"])
    assert "mode" in str(info.value) and "budget.max_calls" in str(info.value)


def test_missing_required_field_is_reported_plainly() -> None:
    class Needs(Settings):
        env: str
        """Required env id."""

    with pytest.raises(ConfigError) as info:
        load_config(Needs)
    assert "env" in str(info.value) and "required" in str(info.value).lower()


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, tmp_path / "absent.yaml")
    assert "absent.yaml" in str(info.value)
    assert isinstance(info.value, RatchetError) and info.value.hint


@pytest.mark.parametrize("text, found", [("- a\n- b\n", "list"), ("just text\n", "str"), ("42\n", "int")])
def test_non_mapping_yaml(tmp_path: Path, text: str, found: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, write(tmp_path, text))
    assert "mapping" in str(info.value) and found in str(info.value)


def test_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, write(tmp_path, "a: [unclosed\n"))
    assert "not valid YAML" in str(info.value)


def test_error_hint_points_at_config_show() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(Demo, None, ["mode=judge"])
    assert "ratchet config show Demo" in (info.value.hint or "")


def test_describe_fields_flattens_and_documents() -> None:
    rows = {key: (type_name, default, doc) for key, type_name, default, doc in describe_fields(Demo)}
    assert rows["budget.max_calls"] == ("int", "40", "Most calls.")
    assert rows["name"] == ("str", "'demo'", "A free-form name.")
    assert rows["seeds"][1] == "[0, 1]"
    # The allowed values of a Literal and the item type of a list are part of the documented type.
    assert rows["mode"][0] == "Literal['verifier', 'filter', 'policy']"
    assert rows["seeds"][0] == "list[int]"
    assert rows["out"][0] == "Path"
    assert "budget" not in rows  # the nested model is shown through its fields


def test_settings_forbid_unknown_attributes_on_assignment() -> None:
    config = Demo()
    with pytest.raises(Exception):
        config.mode = "judge"  # type: ignore[assignment]


def test_override_of_an_optional_text_field() -> None:
    class Server(Settings):
        api_key: str | None = None
        """Key clients must send."""

    assert load_config(Server, None, ["api_key=12345"]).api_key == "12345"
    assert load_config(Server, None, ["api_key=null"]).api_key is None
