// noeta's web frontend: the task list and a new task's form, a task's live transcript, its asks
// and questions, the next message, cancel, and the raw log — over the HTTP API of `noeta serve` (docs/http-api.md).
//
// Nothing a task produced (model text, tool input and output, file contents) is ever parsed as
// HTML: every piece of it enters the page as a text node.

const TOKEN_KEY = "noeta-token";
const THEME_KEY = "noeta-theme";
const LONG_CHARS = 1500;
const LONG_LINES = 15;

/** An element with attributes (`on…` adds a listener) and children (strings become text). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function setStatus(text) {
  document.getElementById("conn").textContent = text;
}

function headers(json) {
  const out = { "X-Noeta-Client": "web" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = "Bearer " + token;
  if (json) out["Content-Type"] = "application/json";
  return out;
}

class Unauthorized extends Error {}

/** One API call: the JSON answer, or an Error carrying the server's message. */
async function api(path, method = "GET", body = undefined) {
  const res = await fetch("/v1" + path, {
    method,
    headers: headers(method !== "GET"),
    body: method !== "GET" ? JSON.stringify(body ?? {}) : undefined,
  });
  if (res.status === 401) throw new Unauthorized("a token is needed");
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

/** Asks for the API token once; it is kept for this browser tab only. */
function askToken(main) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off" });
  const form = h(
    "form",
    {
      class: "compose",
      onsubmit: (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        route();
      },
    },
    h("label", { for: "token" }, "This server needs its API token"),
    input,
    h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Use token")),
  );
  main.replaceChildren(h("h1", {}, "Token"), form);
  input.focus();
}

function statusClass(task) {
  if (task.status === "failed" || task.status.startsWith("turn failed")) return "status failed";
  if (waitsForYou(task)) return "status waiting";
  return "status";
}

function waitsForYou(task) {
  return !!task.waiting && task.waiting.on !== "children";
}

function statusText(task) {
  return task.status === "failed" ? `failed: ${task.reason ?? ""}` : task.status;
}

// --- the task list ---------------------------------------------------------------------------

let stopView = () => {};

async function showList(main) {
  const table = h("table", {}, h("caption", { class: "note" }, "Tasks, those waiting on you first"));
  const body = h("tbody");
  table.append(
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        h("th", { scope: "col" }, "Status"),
        h("th", { scope: "col", class: "agent" }, "Agent"),
        h("th", { scope: "col" }, "Goal"),
        h("th", { scope: "col", class: "worker" }, "Worker"),
      ),
    ),
    body,
  );
  main.replaceChildren(h("h1", {}, "Tasks"), newTaskForm(main), table);
  let live = true;
  stopView = () => (live = false);
  const draw = (tasks) => {
    const roots = tasks.filter((t) => !t.parent);
    roots.sort((a, b) => Number(waitsForYou(b)) - Number(waitsForYou(a)) || b.created_ms - a.created_ms);
    const rows = document.createDocumentFragment();
    for (const task of roots) {
      rows.append(
        h(
          "tr",
          { class: waitsForYou(task) ? "you" : "" },
          h("td", { class: statusClass(task) }, statusText(task)),
          h("td", { class: "agent" }, task.agent),
          h("td", { class: "goal" }, h("a", { href: `#/task/${encodeURIComponent(task.id)}` }, task.goal || task.id)),
          h("td", { class: "worker" }, task.worker ?? ""),
        ),
      );
    }
    if (!roots.length) rows.append(h("tr", {}, h("td", { colspan: 4 }, "No tasks yet.")));
    body.replaceChildren(rows);
    if (document.body.dataset.listed === undefined) {
      // The first paint of the list, for `web_tasks_1000_first_paint_ms`.
      requestAnimationFrame(() => requestAnimationFrame(() => performance.mark("tasks-painted")));
    }
    document.body.dataset.listed = String(roots.length);
  };
  while (live) {
    try {
      draw(await api("/tasks"));
      setStatus(`updated ${new Date().toLocaleTimeString()}`);
    } catch (err) {
      if (err instanceof Unauthorized) return askToken(main);
      setStatus(`cannot reach the server: ${err.message}`);
    }
    await sleep(2000);
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// --- following a task's events ----------------------------------------------------------------

/** Follows a task's events as Server-Sent Events (over fetch, so the token can be sent),
 * reconnecting with Last-Event-ID; calls `onEvents` with each batch of recorded events and
 * `onText` with reply text as it streams (not recorded, so it carries no id). */
async function follow(id, onEvents, onText, signal) {
  let last = 0;
  while (!signal.aborted) {
    try {
      const res = await fetch(`/v1/tasks/${encodeURIComponent(id)}/events`, {
        headers: { ...headers(false), Accept: "text/event-stream", "Last-Event-ID": String(last) },
        signal,
      });
      if (res.status === 401) throw new Unauthorized("a token is needed");
      if (!res.ok) throw new Error(`the event stream answered ${res.status}`);
      setStatus("following");
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        const batch = [];
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let data = "";
          let type = "message";
          for (const line of block.split("\n")) {
            if (line.startsWith("data:")) data += line.slice(5).trimStart();
            else if (line.startsWith("event:")) type = line.slice(6).trim();
          }
          if (!data) continue;
          const event = JSON.parse(data);
          if (type === "text") {
            if (batch.length) onEvents(batch.splice(0));
            onText(event.text ?? "");
          } else if (typeof event.seq === "number" && event.seq > last) {
            last = event.seq;
            batch.push(event);
          }
        }
        if (batch.length) onEvents(batch);
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof Unauthorized) throw err;
      setStatus(`reconnecting: ${err.message}`);
    }
    await sleep(1000);
  }
}

// --- one task --------------------------------------------------------------------------------

/** A text block, folded when long. */
function textBlock(text, tag = "pre") {
  const long = text.length > LONG_CHARS || text.split("\n").length > LONG_LINES;
  const block = h(tag, { class: tag === "pre" ? "" : "text" }, text);
  if (!long) return block;
  const lines = text.split("\n").length;
  return h("details", {}, h("summary", {}, `${lines} lines, ${text.length} characters — show`), block);
}

function inputText(input) {
  if (input && typeof input === "object" && Object.keys(input).length === 1) {
    const only = Object.values(input)[0];
    if (typeof only === "string") return only;
  }
  return JSON.stringify(input, null, 2);
}

/** The transcript of a task, built event by event. */
class Transcript {
  constructor(root) {
    this.root = root;
    this.calls = new Map(); // call id → { name, input, el, state }
  }

  entry(kind, who, ...children) {
    const el = h("section", { class: `entry ${kind}` }, who ? h("div", { class: "who" }, who) : null, ...children);
    this.root.append(el);
    return el;
  }

  /** Reply text as it streams in: shown until the reply is recorded. */
  stream(text) {
    if (!this.live) {
      this.liveText = h("div", { class: "text" });
      this.live = this.entry("assistant streaming", "assistant (writing)", this.liveText);
      this.live.setAttribute("aria-busy", "true");
    }
    this.liveText.textContent += text;
  }

  add(event) {
    const { extension, kind, data, message } = event;
    if (this.live && extension === "core" && /^(assistant_reply|turn_|task_)/.test(kind)) {
      this.live.remove();
      this.live = null;
    }
    if (extension !== "core") {
      // Extensions' records: compaction and reminders as such, anything entering the
      // conversation by its message; the rest only in the log view.
      const label = /compact/.test(kind) || /compact/.test(extension) ? "compaction" : extension === "reminders" ? "reminder" : null;
      if (label || message) this.entry("note", label ?? `${extension}/${kind}`, message ? textBlock(message, "div") : `${extension}/${kind}`);
      return;
    }
    switch (kind) {
      case "task_started":
        this.entry("note", "task", `agent ${data.agent}` + (data.parent ? `, child of ${data.parent}` : ""));
        break;
      case "user_message":
        this.entry("user", "you", textBlock(data.text ?? "", "div"));
        break;
      case "assistant_reply": {
        const parts = [];
        if (data.text) parts.push(textBlock(data.text, "div"));
        for (const call of data.calls ?? []) {
          const state = h("span", { class: "state" }, "asked for");
          const el = h("div", { class: "call", id: `call-${call.id}` }, h("span", { class: "name" }, call.name), state, textBlock(inputText(call.input)));
          this.calls.set(call.id, { name: call.name, input: call.input, el, state });
          parts.push(el);
        }
        this.entry("assistant", "assistant", ...parts);
        break;
      }
      case "call_started":
        this.mark(data.call_id, "running");
        break;
      case "call_parked":
        this.mark(data.call_id, "waits for you");
        break;
      case "tool_parked":
        this.mark(data.call_id, data.question ? "waits for your answer" : `waits for ${data.children?.length ?? 0} child task(s)`);
        break;
      case "ask_answered":
        this.mark(data.call_id, data.allow ? "allowed" : "denied");
        break;
      case "call_answered":
        this.mark(data.call_id, "answered");
        break;
      case "call_finished": {
        const call = this.calls.get(data.call_id);
        this.mark(data.call_id, data.outcome, data.outcome);
        const result = textBlock(data.text ?? "");
        if (call) call.el.append(result);
        else this.entry("note", `${data.tool} result`, result);
        break;
      }
      case "children_finished":
        this.entry("note", "subagents", `${data.results?.length ?? 0} child task(s) finished`);
        break;
      case "background_delivered":
        this.entry("note", "background report", message ? textBlock(message, "div") : "");
        break;
      case "note":
        if (message) this.entry("note", "note", textBlock(message, "div"));
        break;
      case "turn_ended":
        this.entry("note", null, "turn ended");
        break;
      case "turn_failed":
        this.entry("failed", "turn failed", data.reason ?? "");
        break;
      case "task_failed":
        this.entry("failed", "task failed", data.reason ?? "");
        break;
      default:
        break;
    }
  }

  mark(id, text, cls = "") {
    const call = this.calls.get(id);
    if (!call) return;
    call.state.textContent = text;
    call.state.className = `state ${cls}`;
  }
}

// --- a new task ----------------------------------------------------------------------------

/**
 * The form that starts a task: its goal, the agent (from `GET /v1/agents`) and a permission
 * mode among those the server allows that agent (its own and the stricter ones). The server
 * checks the choice again; its refusal is shown as it says it.
 */
function newTaskForm(main) {
  const goal = h("textarea", { id: "goal", rows: 3, placeholder: "What should the agent do?" });
  const agent = h("select", { id: "agent" });
  const mode = h("select", { id: "mode" });
  const error = h("p", { class: "error", role: "alert" });
  const start = h("button", { class: "primary", type: "submit", id: "start" }, "Start task");
  let agents = [];
  const fillModes = () => {
    const chosen = agents.find((a) => a.name === agent.value);
    const modes = chosen ? chosen.permission_modes : ["default"];
    mode.replaceChildren(...modes.map((m) => h("option", { value: m, selected: chosen && m === chosen.permission_mode }, m)));
  };
  agent.addEventListener("change", fillModes);
  api("/agents")
    .then((list) => {
      agents = list;
      agent.replaceChildren(
        ...list.map((a) => {
          const about = a.description.length > 80 ? `${a.description.slice(0, 79)}…` : a.description;
          return h("option", { value: a.name, title: a.description }, about ? `${a.name} — ${about}` : a.name);
        }),
      );
      agent.value = "main";
      fillModes();
    })
    .catch((err) => {
      if (err instanceof Unauthorized) return;
      error.textContent = `the agents cannot be listed: ${err.message}`;
    });
  const form = h(
    "form",
    {
      class: "compose new-task",
      onsubmit: async (e) => {
        e.preventDefault();
        error.textContent = "";
        if (!goal.value.trim()) {
          error.textContent = "Say what the agent is to do.";
          goal.focus();
          return;
        }
        start.disabled = true;
        try {
          const made = await api("/tasks", "POST", {
            goal: goal.value,
            agent: agent.value || undefined,
            permission_mode: mode.value || undefined,
          });
          location.hash = `#/task/${encodeURIComponent(made.id)}`;
        } catch (err) {
          if (err instanceof Unauthorized) return askToken(main);
          error.textContent = err.message;
        } finally {
          start.disabled = false;
        }
      },
    },
    h("label", { for: "goal" }, "New task"),
    goal,
    h(
      "div",
      { class: "choices" },
      h("label", { for: "agent" }, "Agent"),
      agent,
      h("label", { for: "mode" }, "Permission mode"),
      mode,
    ),
    error,
    h("div", { class: "actions" }, start),
  );
  goal.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  return form;
}

async function send(path, body, main) {
  try {
    return await api(path, "POST", body);
  } catch (err) {
    if (err instanceof Unauthorized) askToken(main);
    else setStatus(err.message);
    return null;
  }
}

function alwaysKey(id) {
  return `noeta-always-${id}`;
}

function alwaysAllowed(id) {
  try {
    return new Set(JSON.parse(sessionStorage.getItem(alwaysKey(id)) ?? "[]"));
  } catch {
    return new Set();
  }
}

async function showTask(main, id) {
  const controller = new AbortController();
  stopView = () => controller.abort();
  const title = h("h1", {}, id);
  const meta = h("div", { class: "meta" });
  const children = h("nav", { class: "children", "aria-label": "Child tasks" });
  const ask = h("div", { role: "region", "aria-live": "assertive", "aria-label": "What the task waits for" });
  const log = h("div", { class: "transcript", "aria-label": "Transcript" });
  const transcript = new Transcript(log);
  const message = h("textarea", { id: "message", rows: 3 });
  const cancel = h("button", { class: "danger", type: "button" }, "Cancel task");
  const compose = h(
    "form",
    {
      class: "compose",
      onsubmit: async (e) => {
        e.preventDefault();
        const text = message.value.trim();
        if (!text) return;
        if (await send(`/tasks/${encodeURIComponent(id)}/messages`, { text }, main)) message.value = "";
        refresh();
      },
    },
    h("label", { for: "message" }, "Next message"),
    message,
    h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Send"), cancel, h("a", { href: `#/task/${encodeURIComponent(id)}/log` }, "Raw events")),
  );
  cancel.addEventListener("click", async () => {
    if (!confirm("Cancel this task for good?")) return;
    await send(`/tasks/${encodeURIComponent(id)}/cancel`, {}, main);
    refresh();
  });
  message.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) compose.requestSubmit();
  });
  main.replaceChildren(title, meta, children, ask, log, compose);

  let task = null;
  let shownAsk = "";
  const answer = async (body) => {
    ask.replaceChildren(h("p", {}, "Sending…"));
    shownAsk = "sending";
    await send(`/tasks/${encodeURIComponent(id)}/answer`, body, main);
    refresh();
  };
  const drawAsk = () => {
    const waiting = task && waitsForYou(task) ? task.waiting : null;
    const call = waiting ? transcript.calls.get(waiting.call_id) : undefined;
    // Drawn again once the call itself arrives with the events (its tool, its questions).
    const key = waiting ? `${waiting.call_id}:${waiting.on}:${call ? 1 : 0}` : "";
    if (key === shownAsk) return;
    shownAsk = key;
    document.body.dataset.waiting = waiting ? waiting.on : "";
    if (!waiting) return ask.replaceChildren();
    if (waiting.on === "permission") {
      if (call && alwaysAllowed(id).has(call.name)) return answer({ call_id: waiting.call_id, allow: true });
      const allow = h("button", { class: "primary", type: "button", id: "allow", onclick: () => answer({ call_id: waiting.call_id, allow: true }) }, "Allow");
      const deny = h("button", { type: "button", id: "deny", onclick: () => answer({ call_id: waiting.call_id, allow: false }) }, "Deny");
      const always = h(
        "button",
        {
          type: "button",
          id: "always",
          onclick: () => {
            if (call) {
              const set = alwaysAllowed(id);
              set.add(call.name);
              sessionStorage.setItem(alwaysKey(id), JSON.stringify([...set]));
            }
            answer({ call_id: waiting.call_id, allow: true });
          },
        },
        call ? `Always allow ${call.name} here` : "Always",
      );
      ask.replaceChildren(h("div", { class: "ask" }, h("h2", {}, "Permission"), h("p", { class: "text" }, waiting.question), h("div", { class: "actions" }, allow, deny, always)));
      allow.focus();
      return;
    }
    ask.replaceChildren(h("div", { class: "ask" }, h("h2", {}, "Question"), h("p", { class: "text" }, waiting.question), questionForm(call, waiting, answer)));
  };
  const refresh = async () => {
    try {
      task = await api(`/tasks/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err instanceof Unauthorized) return askToken(main);
      return setStatus(err.message);
    }
    title.textContent = task.goal || id;
    meta.replaceChildren(
      ...[
        h("span", { class: statusClass(task), id: "task-status" }, statusText(task)),
        h("span", {}, `agent ${task.agent}`),
        task.worker ? h("span", {}, `worker ${task.worker}`) : null,
        task.parent ? h("a", { href: `#/task/${encodeURIComponent(task.parent)}` }, "parent task") : null,
        h("span", {}, `${task.events} events`),
      ].filter(Boolean),
    );
    document.body.dataset.status = task.status;
    drawAsk();
    try {
      const all = await api("/tasks");
      const kids = all.filter((t) => t.parent === id);
      children.replaceChildren(...(kids.length ? [h("span", {}, "Subagents: ")] : []), ...kids.map((k) => h("a", { href: `#/task/${encodeURIComponent(k.id)}` }, `${k.agent}: ${k.goal} (${statusText(k)})`)));
    } catch {
      // The list is a nicety here.
    }
  };
  await refresh();
  let pending = null;
  follow(
    id,
    (batch) => {
      for (const event of batch) transcript.add(event);
      document.body.dataset.seq = String(batch[batch.length - 1].seq);
      clearTimeout(pending);
      drawAsk();
      pending = setTimeout(refresh, 150);
    },
    (text) => transcript.stream(text),
    controller.signal,
  ).catch((err) => {
    if (err instanceof Unauthorized) askToken(main);
  });
}

/** The form answering a tool's question: AskUserQuestion's options, or free text. */
function questionForm(call, waiting, answer) {
  const questions = call?.name === "AskUserQuestion" ? call.input?.questions ?? [] : [];
  if (!questions.length) {
    const input = h("input", { type: "text", id: "answer-text" });
    return h(
      "form",
      { class: "compose", onsubmit: (e) => { e.preventDefault(); answer({ call_id: waiting.call_id, answer: input.value }); } },
      h("label", { for: "answer-text" }, "Your answer"),
      input,
      h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Answer")),
    );
  }
  const fields = questions.map((q, i) => {
    const name = `q${i}`;
    const options = (q.options ?? []).map((o, j) =>
      h("div", {}, h("input", { type: q.multiSelect ? "checkbox" : "radio", name, id: `${name}-${j}`, value: o.label }), " ", h("label", { for: `${name}-${j}` }, o.label), o.description ? h("span", { class: "meta" }, ` — ${o.description}`) : null),
    );
    const other = h("input", { type: "text", id: `${name}-other`, "aria-label": `Other answer to: ${q.question}` });
    return { q, name, other, el: h("fieldset", {}, h("legend", {}, q.question), ...options, h("div", {}, h("label", { for: `${name}-other` }, "Other: "), other)) };
  });
  const form = h("form", { class: "compose", id: "question-form" }, ...fields.map((f) => f.el), h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Answer")));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const answers = {};
    for (const f of fields) {
      const picked = [...form.querySelectorAll(`input[name="${f.name}"]:checked`)].map((i) => i.value);
      const own = f.other.value.trim();
      if (own) picked.push(own);
      answers[f.q.question] = f.q.multiSelect ? picked : picked[0] ?? "";
    }
    answer({ call_id: waiting.call_id, answer: { answers } });
  });
  return form;
}

// --- the raw log ----------------------------------------------------------------------------

async function showLog(main, id) {
  const controller = new AbortController();
  stopView = () => controller.abort();
  const body = h("tbody");
  main.replaceChildren(
    h("h1", {}, `Events of ${id}`),
    h("p", {}, h("a", { href: `#/task/${encodeURIComponent(id)}` }, "Back to the task")),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "#"), h("th", { scope: "col" }, "Record"), h("th", { scope: "col" }, "Data"))), body),
  );
  follow(
    id,
    (batch) => {
      for (const e of batch) {
        body.append(h("tr", {}, h("td", {}, e.seq), h("td", {}, `${e.extension}/${e.kind}`), h("td", {}, textBlock(JSON.stringify(e.data, null, 2) + (e.message ? `\n\n${e.message}` : "")))));
      }
    },
    () => {},
    controller.signal,
  ).catch((err) => {
    if (err instanceof Unauthorized) askToken(main);
  });
}

// --- routing, keys, theme -------------------------------------------------------------------

function route() {
  stopView();
  const main = document.getElementById("main");
  const path = location.hash.replace(/^#/, "") || "/";
  const log = path.match(/^\/task\/([^/]+)\/log$/);
  const task = path.match(/^\/task\/([^/]+)$/);
  if (log) showLog(main, decodeURIComponent(log[1]));
  else if (task) showTask(main, decodeURIComponent(task[1]));
  else showList(main);
  main.focus();
}

function typing(target) {
  return (
    target instanceof HTMLInputElement ||
    target instanceof HTMLTextAreaElement ||
    target instanceof HTMLSelectElement
  );
}

document.addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "Escape") {
    location.hash = "#/";
    return;
  }
  if (typing(e.target)) return;
  const click = (id) => document.getElementById(id)?.click();
  if (e.key === "a") click("allow");
  else if (e.key === "d") click("deny");
  else if (e.key === "A") click("always");
  else if (e.key === "m") {
    e.preventDefault();
    document.getElementById("message")?.focus();
  } else if (e.key === "n") {
    e.preventDefault();
    if (document.getElementById("goal")) document.getElementById("goal").focus();
    else location.hash = "#/";
  }
});

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
}

document.getElementById("theme").addEventListener("click", () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === "dark"
    : matchMedia("(prefers-color-scheme: dark)").matches;
  const next = dark ? "light" : "dark";
  localStorage.setItem(THEME_KEY, next);
  applyTheme(next);
});

/** The token `noeta serve` put in the page's address (`#token=…`): kept for this tab, and
 * taken out of the address (and its history entry) before anything else happens. */
function takeToken() {
  const given = location.hash.match(/^#token=([^&/]*)$/);
  if (!given) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(given[1]));
  history.replaceState(null, "", location.pathname + "#/");
}

applyTheme(localStorage.getItem(THEME_KEY));
takeToken();
window.addEventListener("hashchange", route);
route();
