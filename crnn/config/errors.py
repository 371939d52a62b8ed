"""The error every configuration problem raises."""


class ConfigError(ValueError):
    """A configuration file or override that does not fit the schema."""
