"""How profile.sh stops before its work is done: a ProfileError carries its message (printed as
"profile.sh: error: MESSAGE") and the exit status; a UsageError adds a pointer to --help and always
exits with exit_status.USAGE."""

from ..common.exit_status import FAILURE, USAGE


class ProfileError(Exception):
    """Stops profile.sh with one line on stderr, "profile.sh: error: MESSAGE", and `status`:
    exit_status.USAGE for what can be fixed before anything runs (the binary, its flags, an output
    path, a tool missing), exit_status.FAILURE for a run without its outputs, or the status of a
    program that failed."""

    def __init__(self, message: str, status: int = FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class UsageError(ProfileError):
    """A bad command line (or PROFILE_LAUNCHER): the message, then "run scripts/profile.sh --help
    for usage"; exit_status.USAGE."""

    def __init__(self, message: str) -> None:
        super().__init__(message, USAGE)
