"""Named profiles (``~/.config/kafkatxn/config.toml``) and the directories kafkatxn keeps things in."""

from __future__ import annotations

import os
from pathlib import Path

from kafkatxn.errors import UsageError


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kafkatxn"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kafkatxn"


def profiles_file() -> Path:
    return Path(os.environ.get("KAFKATXN_CONFIG") or config_dir() / "config.toml")


def load_profile(name: str | None) -> tuple[str | None, dict]:
    """The named (or default) profile from the profiles file; ``(None, {})`` when there is none."""
    path = profiles_file()
    if not path.exists():
        if name:
            raise UsageError(f"profile {name!r} not found: {path} does not exist")
        return None, {}
    import tomllib  # only when there is a profiles file

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: {exc}") from None
    profiles = doc.get("profiles", {})
    chosen = name or doc.get("default_profile")
    if not chosen:
        return None, {}
    if chosen not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise UsageError(f"profile {chosen!r} not found in {path} (profiles: {known})")
    profile = profiles[chosen]
    if not isinstance(profile, dict):
        raise UsageError(f"{path}: profiles.{chosen} must be a table")
    return chosen, profile
