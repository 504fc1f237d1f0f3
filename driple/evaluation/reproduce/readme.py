"""The README's results blocks (``--readme``): each ``<!-- reproduce section: HEADING -->``
block filled with that section of ``results.md``.
"""
from __future__ import annotations

import re


README_BLOCK = re.compile(r"(<!-- reproduce (section|mape): (.+?) -->\n)(.*?)(<!-- /reproduce -->)", re.S)


def results_section(text: str, heading: str) -> str:
    """The body of the first ``### heading...`` (else ``## heading...``) of ``text`` up to the
    next heading of the same or a higher level; a :class:`DripleError` when there is none."""
    from driple.errors import DripleError

    lines = text.splitlines()
    for level in ("### ", "## "):
        for i, line in enumerate(lines):
            if line.startswith(level + heading):
                body = []
                for nxt in lines[i + 1:]:
                    if nxt.startswith("## ") or (level == "### " and nxt.startswith("### ")):
                        break
                    body.append(nxt)
                return "\n".join(body).strip()
    raise DripleError(f"results.md has no section {heading!r}")


def mape_part(body: str) -> str:
    """From a split's tables: the MAPE table, the coverage line and the median-over-targets line."""
    start = body.find("MAPE %:")
    if start < 0:
        return body
    part = body[start:]
    keep = part[:part.index("Inspector against")] if "Inspector against" in part else part
    median = [line for line in part.splitlines() if line.startswith("Median over the targets")]
    return keep.strip() + ("\n\n" + median[0] if median and median[0] not in keep else "")


def refresh_readme(path: str, results_md: str) -> int:
    """Replace each block ``<!-- reproduce section: HEADING -->...<!-- /reproduce -->`` of the
    file at ``path`` with that section of ``results_md`` (``mape:``: its MAPE part); the prose
    around the blocks is left alone. Returns the number of blocks refreshed."""
    from driple.errors import DripleError

    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise DripleError(f"cannot read {path}: {err.strerror}") from None
    count = 0

    def fill(m):
        nonlocal count
        body = results_section(results_md, m.group(3))
        count += 1
        return m.group(1) + (mape_part(body) if m.group(2) == "mape" else body) + "\n" + m.group(5)

    new = README_BLOCK.sub(fill, text)
    if new != text:
        with open(path, "w") as f:
            f.write(new)
    return count
