"""kafkatxn: operations tooling for transactional Apache Kafka clusters."""



def __getattr__(name: str) -> str:
    # Read when asked for (importlib.metadata is costly at every command start): the installed
    # distribution's metadata (pyproject.toml's version), so a wheel, a pipx install and an
    # editable checkout all report what was installed.
    if name != "__version__":
        raise AttributeError(f"module 'kafkatxn' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafkatxn")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"
