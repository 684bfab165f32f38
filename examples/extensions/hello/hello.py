"""hello: three slash commands with the Python SDK, one per kind of answer.

- ``/hello [NAME]`` asks the model to greet you (a *prompt*),
- ``/shout TEXT`` shows TEXT in capitals, without the model (a *display*),
- ``/ask TOPIC`` puts a question in your input box to edit and send (an *insert*).
"""

from zotd.sdk import Extension, Response, display, error, insert, prompt

ext = Extension("hello", "1.0.0")


@ext.command("hello", "ask the agent to greet you (/hello [NAME])")
def hello(args: str) -> Response:
    who = args or "me"
    return prompt(f"Greet {who} in one short, friendly sentence.")


@ext.command("shout", "show TEXT in capitals (/shout TEXT)")
def shout(args: str) -> Response:
    if not args:
        return error("usage: /shout TEXT")
    return display(f"{args.upper()}!")


@ext.command("ask", "draft a question about TOPIC in the input box (/ask TOPIC)")
def ask(args: str) -> Response:
    if not args:
        return error("usage: /ask TOPIC")
    return insert(f"Explain {args} in three short bullet points.")


if __name__ == "__main__":
    ext.run()
