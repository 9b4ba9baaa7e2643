"""A Hugging Face ``config.json`` built into its model on the meta device: shapes, no weights, no network.

``transformers`` is imported only here and only when a config is read, so
the planner and ``--model`` never pay for it. Remote code (``auto_map``, or a
model type transformers does not carry) is refused, never run. Every check of
the file and of the overrides runs before the model is built.
"""

from __future__ import annotations

import difflib
import importlib
import json
import os
from pathlib import Path
from typing import Any, Sequence

import torch

CONFIG_NAME = "config.json"


def read_config(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The config file (``path`` itself, or ``path/config.json``) and its fields, checked for a model type."""
    path = Path(path)
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise ValueError(f"--config: got the directory {path}, but it holds no {CONFIG_NAME}")
        path = path / CONFIG_NAME
    elif not path.is_file():
        raise ValueError(f"--config: got {path}, but no such file or directory: should be a config.json "
                         "or a directory holding one")
    try:
        fields = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--config: {path} is not JSON ({exc}), but should be a Hugging Face config.json"
                         ) from None
    if not isinstance(fields, dict):
        raise ValueError(f"--config: {path} holds a JSON {type(fields).__name__}, but should hold an object")
    if "auto_map" in fields:
        raise ValueError(f"--config: {path} has auto_map {fields['auto_map']}, so its model is remote code: "
                         "refused (only model types built into transformers are planned; none is run)")
    if not isinstance(fields.get("model_type"), str) or not fields["model_type"]:
        raise ValueError(f"--config: {path} has no model_type (got {fields.get('model_type')!r}), but should "
                         "name one, such as llama, mistral, mixtral or qwen2")
    return path, fields


def parse_sets(sets: Sequence[str]) -> list[tuple[list[str], Any]]:
    """``key=value`` pairs; a dotted key reaches into a nested field; a value is JSON when it parses."""
    parsed = []
    for item in sets:
        key, eq, text = item.partition("=")
        if not eq or not key or any(not part for part in key.split(".")):
            raise ValueError(f"--set: got {item!r}, but should be key=value (e.g. num_hidden_layers=80)")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        parsed.append((key.split("."), value))
    return parsed


def apply_sets(fields: dict[str, Any], sets: Sequence[tuple[list[str], Any]],
               known: set[str]) -> dict[str, Any]:
    """A copy of ``fields`` with the overrides applied; a key in neither the file nor ``known`` is an
    error."""
    fields = json.loads(json.dumps(fields))
    for path, value in sets:
        level, keys = fields, known | set(fields)
        for depth, key in enumerate(path):
            name = ".".join(path[: depth + 1])
            if key not in keys:
                close = difflib.get_close_matches(key, sorted(keys), n=4)
                hint = f"; close: {', '.join(close)}" if close else ""
                raise ValueError(f"--set: got the key {name!r}, but the config has no such field{hint}")
            if depth == len(path) - 1:
                level[key] = value
            elif not isinstance(level.get(key), dict):
                raise ValueError(f"--set: got {'.'.join(path)!r}, but {name} is not a nested object")
            else:
                level, keys = level[key], set(level[key])
    return fields


def transformers_module():
    """``transformers``, offline; or the error that says how to install it."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # building from a config never needs the hub: never ask it
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        return importlib.import_module("transformers")
    except ImportError as exc:
        raise ValueError(f"--config needs transformers, which cannot be imported ({exc}): "
                         "pip install transformers") from None


def build_meta_model(path: str | Path, sets: Sequence[str] = ()) -> tuple[str, torch.nn.Module]:
    """A label and the model ``path``'s config describes, with ``sets`` applied, on the meta device."""
    parsed = parse_sets(sets)
    path, fields = read_config(path)
    transformers = transformers_module()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = fields["model_type"]
    if model_type not in CONFIG_MAPPING:
        close = difflib.get_close_matches(model_type, list(CONFIG_MAPPING.keys()), n=5, cutoff=0.5)
        raise ValueError(
            f"model_type: got {model_type!r} in {path}, but transformers {transformers.__version__} has no "
            f"such model type (close: {', '.join(close) or 'none'}); one that exists only as remote code is "
            "refused"
        )
    try:
        known = set(CONFIG_MAPPING[model_type]().to_dict())
    except Exception:  # a config class that needs arguments: the file's own keys are then the known ones
        known = set()
    fields = apply_sets(fields, parsed, known)
    try:
        config = transformers.AutoConfig.for_model(**fields)
    except Exception as exc:
        raise ValueError(f"--config: {path} is not a valid {model_type} config ({type(exc).__name__}: {exc})"
                         ) from None
    try:
        with torch.device("meta"):
            return f"{model_type} ({', '.join([str(path), *sets])})", _build(transformers, config)
    except Exception as exc:
        raise ValueError(f"--config: building {model_type} failed ({type(exc).__name__}: {exc})") from None


def _build(transformers, config) -> torch.nn.Module:
    """The causal LM; a config with no causal-LM head gets its base model."""
    if type(config) in transformers.AutoModelForCausalLM._model_mapping:
        return transformers.AutoModelForCausalLM.from_config(config)
    return transformers.AutoModel.from_config(config)
