"""Filling a :class:`Config` from YAML and ``key=value`` overrides, checked field by
field: unknown keys are rejected with a suggestion, values are checked against the
field's type (``Literal`` choices included), so a typo fails at start-up, not an hour in.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from crnn.config.errors import ConfigError
from crnn.config.schema import Config


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) in (Union, types.UnionType):
        return " or ".join(
            "null" if a is type(None) else _type_name(a) for a in typing.get_args(tp)
        )
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _check_value(key: str, value: Any, tp: Any) -> Any:
    """Return ``value`` converted to ``tp`` where lossless (int -> float), else raise."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        for arm in typing.get_args(tp):
            if arm is type(None):
                if value is None:
                    return None
                continue
            try:
                return _check_value(key, value, arm)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(allowed)}")
        return value
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r} ({type(value).__name__})")
        (item_tp,) = typing.get_args(tp)
        return [_check_value(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value)]
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        # YAML 1.1 reads "3e-4" (no dot) as a string; it is a float to anyone writing it.
        try:
            return float(value)
        except ValueError:
            pass
    if tp is str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ConfigError(
            f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})"
        )
    return value


def _merge(obj: Any, updates: dict[str, Any], prefix: str) -> None:
    hints = typing.get_type_hints(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    for k, v in updates.items():
        key = f"{prefix}{k}"
        if k not in names:
            close = difflib.get_close_matches(k, names, n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            raise ConfigError(
                f"unknown config key {key!r}{hint} Valid keys here: {', '.join(names)}"
            )
        tp = hints[k]
        current = getattr(obj, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(f"{key}: expected a mapping of sub-keys, got {v!r}")
            _merge(current, v, f"{key}.")
        else:
            setattr(obj, k, _check_value(key, v, tp))


def parse_override(text: str) -> dict[str, Any]:
    """``"train.lr=3e-4"`` -> ``{"train": {"lr": 0.0003}}``; the value is read as YAML."""
    if "=" not in text:
        raise ConfigError(
            f"override {text!r} must look like section.key=value (e.g. train.lr=3e-4)"
        )
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"override {text!r}: cannot parse value {raw!r}: {e}") from None
    out: dict[str, Any] = {}
    node = out
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return out


def config_from_dict(d: dict[str, Any]) -> Config:
    cfg = Config()
    _merge(cfg, d, "")
    return cfg


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply ``key=value`` overrides in place, then validate."""
    for text in overrides:
        _merge(cfg, parse_override(text), "")
    cfg.validate()
    return cfg


def bundled_configs() -> dict[str, Path]:
    """The recipes shipped inside the package (``crnn/configs/*.yaml``; the repository's
    ``configs/`` is the same folder), by name."""
    from importlib import resources

    folder = Path(str(resources.files("crnn") / "configs"))
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def resolve_config_path(path: str | Path) -> Path:
    """A config file: the path itself, or a bundled recipe's name (``crnn_zh_cpu``, with
    or without ``.yaml``), which is how a pip-installed user without the repository's
    ``configs/`` names one."""
    p = Path(path)
    if p.is_file():
        return p
    name = p.name[:-5] if p.name.endswith(".yaml") else p.name
    bundled = bundled_configs()
    if name in bundled and (len(p.parts) == 1 or p.parent.name == "configs"):
        return bundled[name]
    raise ConfigError(
        f"config file {str(path)!r} not found: give a YAML file, or one of the bundled "
        f"recipes by name ({', '.join(bundled) or 'none found'})"
    )


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Defaults <- YAML file <- overrides, then :meth:`Config.validate`."""
    cfg = Config()
    if path is not None:
        path = resolve_config_path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: invalid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(
                f"{path}: expected a mapping at the top level, got {type(data).__name__}"
            )
        _merge(cfg, data, "")
    return apply_overrides(cfg, overrides or [])


def save_config(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
