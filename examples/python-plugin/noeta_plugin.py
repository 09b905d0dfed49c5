"""A single-file helper for writing noeta plugins in Python, standard library only.

Copy this file next to your plugin. It speaks noeta's extension protocol (JSON-RPC 2.0, one
message per line on stdin/stdout; see docs/plugin-protocol.md): the handshake, hook and tool
calls, and the `view/...` requests a hook makes back to the host. Write to stderr to log.

    from noeta_plugin import Plugin, deny

    plugin = Plugin()
    words = plugin.export("my-plugin")

    @words.tool("count", "Counts words.", {"type": "object", "properties": {"text": {"type": "string"}}})
    def count(call, text):
        return f"words: {len(text.split())}"

    plugin.run()
"""

import json
import sys
import traceback

PROTOCOL = 1


def allow(approve=False):
    """A `before_tool`/`before_spawn` verdict letting the call happen."""
    return {"decision": "allow", "approve": approve}


def deny(reason):
    """A verdict refusing the call; the model sees `reason`."""
    return {"decision": "deny", "reason": reason}


def ask(reason, firm=False):
    """A verdict asking a person first."""
    return {"decision": "ask", "reason": reason, "firm": firm}


def rewrite(new_input, reason=""):
    """A verdict replacing the call's input."""
    return {"decision": "rewrite", "input": new_input, "reason": reason}


class Call:
    """One hook or tool call: its params, the view, and records to stage with the answer."""

    def __init__(self, plugin, call_id, params):
        self._plugin = plugin
        self._id = call_id
        self.params = params
        self.view = params.get("view") or params.get("context") or {}
        self.records = []

    @property
    def state(self):
        """This export's folded state (what `reduce` made of its records)."""
        return self.view.get("state")

    def record(self, kind, data=None, message=None):
        """Stages a record; the host appends it with the hook's or the tool's batch."""
        entry = {"kind": kind, "data": data}
        if message is not None:
            entry["message"] = message
        self.records.append(entry)

    def messages(self, start=0, limit=None):
        """The conversation (or a slice of it), asked from the host."""
        params = {"from": start}
        if limit is not None:
            params["limit"] = limit
        return self._plugin._request("view/messages", self._id, params)["messages"]

    def ext_state(self, extension):
        """Another extension's folded state, asked from the host."""
        return self._plugin._request("view/state", self._id, {"extension": extension})

    def progress(self, text):
        """Live output of a running tool (shown, never recorded)."""
        self._plugin._send({"jsonrpc": "2.0", "method": "tool/progress",
                            "params": {"call": self._id, "text": text}})


class Export:
    """One export: an extension (its hooks) and its tools."""

    def __init__(self, name):
        self.name = name
        self.hooks = {}
        self.tools = {}
        self.folds = []

    def hook(self, name):
        """Registers a hook: `fn(call, **args)` returning a dict (the hook's answer) or None.

        `reduce` is `fn(state, kind, data)` returning the new state, and `continue_state`
        is `fn(state)`."""
        def register(fn):
            self.hooks[name] = fn
            return fn
        return register

    def tool(self, name, description, input_schema=None, risk="low", read_only=False, **flags):
        """Registers a tool: `fn(call, **input)` returning text or a result dict."""
        def register(fn):
            spec = {"name": name, "description": description,
                    "input_schema": input_schema or {"type": "object"},
                    "risk": risk, "read_only": read_only}
            spec.update(flags)
            self.tools[name] = (spec, fn)
            return fn
        return register

    def describe(self):
        return {"hooks": sorted(self.hooks), "folds": self.folds,
                "tools": [spec for spec, _ in self.tools.values()]}


class Plugin:
    """The program: its exports and the message loop."""

    def __init__(self):
        self.exports = {}
        self.params = None
        self._next = 0
        self._queued = []

    def export(self, name):
        self.exports[name] = Export(name)
        return self.exports[name]

    def _send(self, message):
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def _read(self):
        while True:
            line = sys.stdin.readline()
            if not line:
                return None
            if line.strip():
                return json.loads(line)

    def _request(self, method, call_id, params):
        self._next += 1
        request_id = "p%d" % self._next
        params = dict(params, call=call_id)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self._read()
            if message is None:
                sys.exit(0)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(message["error"].get("message"))
                return message["result"]
            self._queued.append(message)

    def _answer(self, message):
        method = message.get("method", "")
        params = message.get("params") or {}
        if method == "initialize":
            self.params = params.get("params")
            return {"protocol": PROTOCOL,
                    "exports": {n: e.describe() for n, e in self.exports.items()}}
        export = self.exports.get(params.get("export"))
        if export is None:
            raise KeyError("no export %r" % params.get("export"))
        if method.startswith("hook/"):
            name = method[len("hook/"):]
            fn = export.hooks.get(name)
            if fn is None:
                raise KeyError("hook %r is not implemented" % name)
            if name == "reduce":
                return {"state": fn(params.get("state"), params["kind"], params.get("data"))}
            if name == "continue_state":
                return {"state": fn(params.get("state"))}
            call = Call(self, message["id"], params)
            args = {k: v for k, v in params.items() if k not in ("export", "view")}
            answer = fn(call, **args) or {}
            if call.records:
                answer = dict(answer, records=call.records)
            return answer
        if method in ("tool/run", "tool/resume", "tool/recover"):
            spec_fn = export.tools.get(params.get("tool"))
            if spec_fn is None:
                raise KeyError("no tool %r" % params.get("tool"))
            call = Call(self, message["id"], params)
            fn = spec_fn[1]
            if method == "tool/run":
                result = fn(call, **(params.get("input") or {}))
            else:
                hook = getattr(fn, method[len("tool/"):], None)
                if hook is None:
                    raise KeyError("tool %r has no %s" % (params.get("tool"), method))
                result = hook(call, params)
            if isinstance(result, str):
                result = {"text": result}
            result = dict(result or {})
            if call.records:
                result["records"] = call.records
            return result
        raise KeyError("unknown method %r" % method)

    def run(self):
        """Answers the host until it closes stdin."""
        while True:
            message = self._queued.pop(0) if self._queued else self._read()
            if message is None:
                return
            if "id" not in message:
                continue  # notifications ($/cancel): calls here run one at a time
            try:
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": self._answer(message)}
            except Exception as err:  # the hook raised: the host applies its failure rule
                traceback.print_exc(file=sys.stderr)
                reply = {"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32000, "message": "%s: %s" % (type(err).__name__, err)}}
            self._send(reply)
