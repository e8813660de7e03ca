"""The one error type the lab raises for problems a user can fix.

A `LabError` carries two sentences: what is wrong, and what to do about it.
The CLI prints it as one paragraph and exits with status 2; it never shows a
traceback from deep inside kazoo, docker or the JVM. Code that catches a
library's exception and knows what it means re-raises it as a `LabError`.
"""


class LabError(Exception):
    """A problem with the user's set-up or input, stated so that they can fix it.

    >>> str(LabError("Java was not found.", "Install a JDK 17 or set JAVA_HOME."))
    'Java was not found. Install a JDK 17 or set JAVA_HOME.'
    """

    def __init__(self, problem: str, fix: str = "", *, details: str = ""):
        self.problem = problem
        self.fix = fix
        #: Extra material (a server log tail) shown after the paragraph.
        self.details = details
        super().__init__(self.paragraph())

    def paragraph(self) -> str:
        return f"{self.problem} {self.fix}".strip()

    def __str__(self) -> str:
        return self.paragraph()


def tail(text: str, lines: int = 40) -> str:
    """The last `lines` lines of a log, for `LabError.details`."""
    return "\n".join(text.splitlines()[-lines:])
