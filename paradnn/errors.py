"""The error types users see. The CLI turns any ParadnnError into one line and exit status 2."""


class ParadnnError(Exception):
    """Bad input from the user (a parameter, a file, a store): the message says what is allowed."""


class SpecError(ParadnnError, ValueError):
    """A parameter value that paradnn cannot build; the message names it and what is allowed."""

    def __init__(self, parameter: str, value: object, allowed: str):
        self.parameter, self.value, self.allowed = parameter, value, allowed
        super().__init__(f"invalid {parameter}={value!r}: allowed {allowed}")
