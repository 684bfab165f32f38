"""ask: an interactive tool (current zot's ``interactive: true``).

The model calls ``ask_user`` with a question and a few answers; the tool
opens a panel on the agent that called it and waits, with no deadline, for
the user to pick one (up/down, enter) or skip it (esc, or closing the
panel). An agent that cannot show panels gets an error result at once.
"""

from __future__ import annotations

from zotd.sdk import Extension, Result, tool_error

ext = Extension("ask", "1.0.0")

FOOTER = "up/down move, enter answers, esc skips"


@ext.tool(interactive=True)
async def ask_user(question: str, choices: list[str]) -> str | Result:
    """Asks the user a question and returns the answer they pick from `choices`."""
    if not choices:
        return tool_error("give the user at least one answer to pick")
    chosen = 0

    def lines() -> list[str]:
        return [f"{'>' if i == chosen else ' '} {choice}" for i, choice in enumerate(choices)]

    async with ext.open_panel("ask", title=question, lines=lines(), footer=FOOTER) as panel:
        async for key in panel:
            if key.key == "enter":
                return f"The user answered: {choices[chosen]}"
            if key.key == "escape":
                break
            if key.key == "up":
                chosen = max(chosen - 1, 0)
            elif key.key == "down":
                chosen = min(chosen + 1, len(choices) - 1)
            else:
                continue  # not ours: no redraw
            panel.render(title=question, lines=lines(), footer=FOOTER)
    return tool_error("the user did not answer")


if __name__ == "__main__":
    ext.run()
