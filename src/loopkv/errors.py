"""User-facing errors: raised with a message that names what is wrong; the CLI prints it without a traceback."""


class LoopKVError(Exception):
    """Bad input, bad config, a corrupt or missing file: a message for the user, not a bug."""
