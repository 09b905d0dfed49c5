"""An example noeta plugin in Python: a tool, a guard, and state folded from its records."""

from noeta_plugin import Plugin, deny

plugin = Plugin()
words = plugin.export("py-words")

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to count the words of."}},
    "required": ["text"],
}


@words.tool("py_word_count", "Counts the words of a text.", SCHEMA, read_only=True)
def word_count(call, text):
    count = len(text.split())
    call.record("counted", {"words": count})
    # The state folded from this task's earlier `counted` records, by `reduce` below.
    before = call.state or {"texts": 0, "words": 0}
    return f"words: {count} ({before['words'] + count} in {before['texts'] + 1} texts so far)"


@words.hook("before_tool")
def guard(call, tool_call):
    command = tool_call["input"].get("command", "") if tool_call["name"] == "Bash" else ""
    if "rm -rf" in command:
        return {"verdict": deny("py-words refuses `rm -rf`: delete files one by one instead")}
    return {"verdict": None}


@words.hook("reduce")
def reduce(state, kind, data):
    state = state or {"texts": 0, "words": 0}
    if kind == "counted":
        state = {"texts": state["texts"] + 1, "words": state["words"] + data["words"]}
    return state


@words.hook("commands")
def commands(call):
    return {"commands": [{"name": "py-words", "description": "How many words were counted"}]}


@words.hook("run_command")
def run_command(call, name, args):
    state = call.state or {"texts": 0, "words": 0}
    return {"show": f"counted {state['words']} words in {state['texts']} texts"}


if __name__ == "__main__":
    plugin.run()
