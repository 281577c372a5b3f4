// The Stream text tab: text goes to the server as it is typed (or a pasted text a word at a time,
// as an LLM's reply would come) over the WebSocket WS /v1/audio/speech/stream, and the speech is
// played as it comes back; then the whole can be played again and downloaded. One connection per
// utterance: Start opens it, End says the text is complete, Cancel closes it (the server stops).
import { ApiError, webSocketProtocols } from "./api.js";
import { renderOptions } from "./options.js";
import { $, clearError, el, fileName, seconds, showError } from "./dom.js";
import { StreamPlayer, audioContext } from "./player.js";
import { abilities, fillVoices, modelLabel } from "./speak.js";

const PATH = "/v1/audio/speech/stream";
let models = [];
let stream = null; // the open connection's state (see start)
let resultUrl = null;
let readOptions = () => ({});

const currentModel = () => models.find((m) => m.id === $("live-model").value) || null;

export async function showLiveModels(list) {
  models = list;
  const select = $("live-model");
  const previous = select.value;
  select.replaceChildren(...models.map((m) => el("option", { value: m.id, text: modelLabel(m) })));
  $("live-start").disabled = !models.length;
  if (!models.length) return;
  select.value = models.some((m) => m.id === previous) ? previous : (models.find((m) => m.default) || models[0]).id;
  await modelChanged();
}

export async function refreshLiveVoices() {
  const model = currentModel();
  if (model) await fillVoices($("live-voice"), model);
}

async function modelChanged() {
  const model = currentModel();
  if (!model) return;
  const caps = model.capabilities || {};
  const how = caps.text_stream ? "This model reads streamed text itself" : "Each sentence is spoken once it is complete";
  $("live-model-about").textContent = [how, abilities(model)].filter(Boolean).join(" · ");
  readOptions = renderOptions($("live-options"), model.options || [], "live");
  await fillVoices($("live-voice"), model);
}

function url() {
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${PATH}`;
}

// Open the connection and send the start message; resolves true once the server has started the
// stream (speech.started), false when it did not.
function start() {
  if (stream) return stream.ready;
  clearError($("live-error"), "live");
  audioContext(); // inside the click: the browser lets it play
  const model = $("live-model").value;
  const voice = $("live-voice").value;
  const message = { type: "start", model, voice, response_format: "wav" };
  const seed = $("live-seed").value.trim();
  if (seed !== "") message.seed = Number(seed);
  const options = readOptions();
  if (Object.keys(options).length) message.options = options;
  const ws = new WebSocket(url(), webSocketProtocols());
  ws.binaryType = "arraybuffer";
  const state = { ws, model, voice, player: new StreamPlayer("wav"), sent: "", opened: false, began: null, started: null, done: null, error: null, feeding: false };
  state.ready = new Promise((resolve) => {
    state.resolve = resolve;
  });
  stream = state;
  setBusy(true);
  status("Connecting…");
  ws.onopen = () => {
    state.opened = true;
    ws.send(JSON.stringify(message));
    status("Waiting for the model…");
  };
  ws.onmessage = (event) => received(state, event.data);
  ws.onclose = (event) => closed(state, event);
  return state.ready;
}

function received(state, data) {
  if (data instanceof ArrayBuffer) {
    state.player.feed(new Uint8Array(data));
    status(`${state.done ? "Finishing" : "Speaking"}: ${seconds(state.player.duration)} of audio so far`);
    return;
  }
  let message;
  try {
    message = JSON.parse(data);
  } catch {
    return;
  }
  if (message.type === "speech.started") {
    state.started = message;
    const input = $("live-input");
    input.disabled = false;
    input.value = "";
    input.focus();
    $("live-end").disabled = false;
    status(message.text_stream ? "Started: the model reads the text as it comes." : "Started: each sentence is spoken once it is complete.");
    state.resolve(true);
  } else if (message.type === "speech.audio.done") {
    state.done = message;
  } else if (message.type === "error") {
    state.error = message;
  } // other types: the protocol may add some; ignored
}

// Send what was typed since the last piece. What is sent cannot be taken back: an edit of it is undone.
function sendTyped() {
  const state = stream;
  const input = $("live-input");
  if (!state || !state.started || input.disabled) return;
  if (!input.value.startsWith(state.sent)) {
    input.value = state.sent; // already spoken (or being spoken): keep it as it was sent
    return;
  }
  const piece = input.value.slice(state.sent.length);
  if (!piece) return;
  if (state.began == null) state.began = performance.now();
  state.ws.send(JSON.stringify({ type: "text", text: piece }));
  state.sent = input.value;
}

function end() {
  const state = stream;
  if (!state || !state.started || state.ended) return;
  sendTyped();
  state.ended = true;
  state.ws.send(JSON.stringify({ type: "end" }));
  $("live-input").disabled = true;
  $("live-end").disabled = true;
  status(`Ended: speaking the rest… (${seconds(state.player.duration)} of audio so far)`);
}

function cancel() {
  const state = stream;
  if (!state) return;
  state.cancelled = true;
  state.player.stop();
  state.ws.close(1000);
}

// A pasted text, a word at a time (with the spaces after it), then the end.
async function sendInPieces() {
  const text = $("live-paste").value;
  if (!text.trim()) {
    showError($("live-error"), new ApiError(0, "paste a text to send first", { param: "paste" }), "live");
    return;
  }
  if (!(await start()) || stream.ended || stream.feeding) return;
  const state = stream;
  state.feeding = true;
  $("live-pieces").disabled = true;
  const pace = Number($("live-pace").value);
  const input = $("live-input");
  for (const piece of text.match(/\s*\S+\s*/g) || []) {
    await new Promise((resolve) => setTimeout(resolve, pace));
    if (stream !== state || state.ended) return;
    input.value += piece;
    sendTyped();
  }
  end();
}

function closed(state, event) {
  if (stream === state) stream = null;
  state.resolve(false);
  setBusy(false);
  const input = $("live-input");
  input.disabled = true;
  if (state.error) {
    const { message, param, code } = state.error.error || {};
    showError($("live-error"), new ApiError(0, message || "the stream failed", { param, code, retryAfter: state.error.retry_after ?? null }), "live");
    state.player.stop();
    status(`Stopped (close ${event.code}).`);
  } else if (state.done) {
    showResult(state);
    status("Done.");
  } else if (state.cancelled) {
    status("Cancelled.");
  } else if (!state.opened) {
    const why = "the server refused the connection (a wrong token, a host name or web origin it does not allow, or it is shutting down): reload the page and try again";
    showError($("live-error"), new ApiError(0, why), "live");
    status("Not connected.");
  } else {
    state.player.stop();
    showError($("live-error"), new ApiError(0, `the connection closed before the speech was complete (close ${event.code})`), "live");
    status("Not connected.");
  }
}

function showResult(state) {
  if (resultUrl) URL.revokeObjectURL(resultUrl);
  const wav = state.player.wav();
  resultUrl = URL.createObjectURL(wav);
  $("live-audio").src = resultUrl;
  const seed = state.done.seed ?? (state.started && state.started.seed);
  const name = fileName(["koe", "live", state.model, state.voice, seed], "wav");
  const link = $("live-download");
  link.href = resultUrl;
  link.download = name;
  link.textContent = `Download ${name}`;
  const parts = [];
  if (state.player.firstAt != null && state.began != null) parts.push(`first audio ${seconds(Math.max(0, state.player.firstAt - state.began) / 1000)} after the first text`);
  parts.push(`${seconds(state.player.duration)} of audio`, `${state.sent.length} characters`);
  if (seed != null) parts.push(`seed ${seed}`);
  const warnings = (state.done.warnings || []).join("; ");
  $("live-metrics").textContent = parts.join(" · ") + (warnings ? `\nNote: ${warnings}` : "");
  $("live-result").hidden = false;
}

function status(text) {
  $("live-status").textContent = text;
}

function setBusy(busy) {
  $("live-start").disabled = busy || !models.length;
  $("live-cancel").disabled = !busy;
  $("live-model").disabled = busy;
  $("live-voice").disabled = busy;
  if (!busy) {
    $("live-end").disabled = true;
    $("live-pieces").disabled = false;
  }
}

export function setupLive() {
  $("live-form").addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  $("live-input").addEventListener("input", sendTyped);
  $("live-end").addEventListener("click", end);
  $("live-cancel").addEventListener("click", cancel);
  $("live-pieces").addEventListener("click", sendInPieces);
  $("live-model").addEventListener("change", () => modelChanged().catch((e) => showError($("live-error"), e, "live")));
}
