"""Reading the project's CSV tables (``results.csv``, ``coruns.csv``) with pandas, every line
checked first.

pandas raises a ``ParserError`` traceback for a line with too many fields and silently pads a
line with too few (a truncated row) with NaN, after which the row is quietly left out. Here
either is a :class:`~driple.errors.DripleError` naming the file and the line, as is a line with
binary bytes (a file cut short and overwritten, a disk error).
"""
from __future__ import annotations

import csv
import os
import re

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # bytes no text table holds


def check_lines(path: str | os.PathLike) -> None:
    """Raise a :class:`DripleError` at the first line whose field count differs from the
    header's, or that the CSV reader cannot parse (e.g. an unclosed quote)."""
    from driple.errors import DripleError

    line = 1
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return
            if any(_CONTROL.search(field) for field in header):
                raise DripleError(f"{path} line 1: the header holds binary bytes (a damaged file); "
                                  "restore it from a copy or its dataset's raw/ files")
            for row in reader:
                line = reader.line_num
                if any(_CONTROL.search(field) for field in row):
                    raise DripleError(f"{path} line {line}: binary bytes in a text table (a damaged "
                                      "line); repair or remove that line")
                if row and len(row) != len(header):
                    kind = "truncated" if len(row) < len(header) else "garbled"
                    raise DripleError(
                        f"{path} line {line}: {len(row)} fields where the header has "
                        f"{len(header)} (a {kind} row); repair or remove that line")
    except csv.Error as err:
        raise DripleError(f"{path} line {line + 1}: cannot be read as CSV ({err}); repair or "
                          "remove that line") from None
    except UnicodeDecodeError:
        raise DripleError(f"{path} near line {line + 1}: not UTF-8 text; is it a results table?") from None
    except OSError as err:
        raise DripleError(f"cannot read {path}: {err.strerror}") from None


def read_csv(path: str | os.PathLike, **kwargs):
    """``pandas.read_csv(path, **kwargs)`` after :func:`check_lines`."""
    import pandas as pd

    from driple.errors import DripleError

    check_lines(path)
    try:
        return pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DripleError(f"{path} cannot be read as a table: {first}") from None
