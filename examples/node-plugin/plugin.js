// An example noeta plugin in Node.js, speaking the extension protocol directly
// (docs/plugin-protocol.md): a tool `node_upper` and an `after_tool` hook that marks
// every result of that tool.
"use strict";
const readline = require("readline");

const exportName = "node-upper";
const handshake = {
  protocol: 1,
  exports: {
    [exportName]: {
      hooks: ["after_tool"],
      tools: [{
        name: "node_upper",
        description: "Returns its text upper-cased.",
        input_schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        risk: "low",
        read_only: true,
      }],
    },
  },
};

function answer(method, params) {
  switch (method) {
    case "initialize":
      return handshake;
    case "tool/run":
      return { text: String(params.input.text).toUpperCase(), records: [{ kind: "uppered", data: null }] };
    case "hook/after_tool":
      if (params.tool_call.name !== "node_upper") return { output: null };
      return { output: { ...params.output, text: params.output.text + " (via node)" } };
    default:
      throw new Error(`unknown method ${method}`);
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const message = JSON.parse(line);
  if (message.id === undefined) return; // notifications ($/cancel)
  let reply;
  try {
    reply = { jsonrpc: "2.0", id: message.id, result: answer(message.method, message.params || {}) };
  } catch (err) {
    console.error(err);
    reply = { jsonrpc: "2.0", id: message.id, error: { code: -32000, message: String(err.message) } };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
