// The Speak tab: pick a model (GET /v1/models) and a voice valid for it (GET /v1/audio/voices?model=),
// on a model that takes an emotion reference (capabilities.emotion_reference) optionally a library
// voice whose clip gives the emotion (emotion_voice), set the family's options from its schema, speak (POST /v1/audio/speech), play while it streams,
// show time to first audio and the real-time factor, download; Cancel aborts the request, which
// the server sees as the client hanging up and stops generating.
import { call, getJSON } from "./api.js";
import { $, clearError, el, fileName, seconds, showError } from "./dom.js";
import { addOutput } from "./history.js";
import { fillOptions, renderOptions } from "./options.js";
import { StreamPlayer, audioContext } from "./player.js";

const LIVE_FORMATS = new Set(["wav", "pcm"]); // what the page can play as it arrives
const EXTENSIONS = { wav: "wav", mp3: "mp3", opus: "ogg", aac: "aac", flac: "flac", pcm: "pcm", m4a: "m4a" };
const LAST_MODEL = "koe.model";

let models = [];
let readOptions = () => ({});
let running = null; // {controller, player}
let lastSeed = null;
let result = { url: null, download: null };

export async function loadModels(preferred) {
  const list = await getJSON("/v1/models");
  models = list.data;
  const select = $("speak-model");
  select.replaceChildren(...models.map((m) => el("option", { value: m.id, text: modelLabel(m) })));
  if (!models.length) {
    $("speak-model-about").textContent = "No model is installed: run `koe models pull` on the server, then reload.";
    $("speak-go").disabled = true;
    return models;
  }
  $("speak-go").disabled = false;
  const wanted = preferred || localStorage.getItem(LAST_MODEL);
  const chosen = models.find((m) => m.id === wanted) || models.find((m) => m.default) || models[0];
  select.value = chosen.id;
  await modelChanged();
  return models;
}

export function modelCards() {
  return models;
}

export function currentModel() {
  return models.find((m) => m.id === $("speak-model").value) || null;
}

// "cv — Qwen3-TTS 12 Hz CustomVoice 11M · random weights (loaded)": the family's title (its spec's), the size from the weights' parameter count.
export function modelLabel(m) {
  const state = m.status === "failed" ? " (failed)" : m.loaded ? " (loaded)" : "";
  const random = m.random_weights ? " · random weights" : "";
  return `${m.id} — ${m.family_title || m.family} ${variantName(m.variant)}${m.size ? " " + m.size : ""}${random}${state}`;
}

// "custom_voice" -> "CustomVoice" (as the releases are named); a name with capitals stays as it is.
function variantName(variant) {
  if (variant !== variant.toLowerCase()) return variant;
  return variant.split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("");
}

// What the model can do, in words, from its capabilities.
export function abilities(m) {
  const caps = m.capabilities || {};
  const modes = m.voice_modes || [];
  const said = {
    preset: `preset speakers (${(m.speakers || []).length})`,
    clone: "clones a voice from a clip",
    design: "designs a voice from words",
    none: "a voice of its own",
  };
  const parts = modes.filter((mode) => said[mode]).map((mode) => said[mode]);
  if (caps.instruct) parts.push("style instructions");
  if (caps.streaming) parts.push("streams");
  if (caps.text_stream) parts.push("reads streamed text");
  if (caps.conversion) parts.push("converts voices");
  if (caps.emotion_reference) parts.push("an emotion from a second clip");
  const languages = (m.languages || []).filter((l) => l !== "auto");
  if (languages.length) parts.push(`${languages.length} language${languages.length > 1 ? "s" : ""}`);
  if (caps.sample_rate) parts.push(`${caps.sample_rate / 1000} kHz`);
  return parts.join(" · ");
}

// "Licence: Apache License 2.0 (Apache-2.0)", linked to where it can be read (an http(s) URL only), with its key
// terms and, for one that must be accepted, whether it was (GET /v1/models' `license`).
export function showLicense(box, license) {
  if (!license) {
    box.replaceChildren("Licence: not declared by its family");
    return;
  }
  const name = license.name && license.name !== license.id ? `${license.name} (${license.id})` : license.id;
  const link = /^https?:\/\//.test(license.url || "") ? el("a", { href: license.url, target: "_blank", rel: "noopener noreferrer", text: name }) : name;
  const notes = [license.summary];
  if (license.needs_acceptance) notes.push(license.accepted_at ? "accepted on this server" : "must be accepted: `koe models pull` asks for it");
  const more = notes.filter(Boolean).join(" · ");
  box.replaceChildren("Licence: ", link, more ? ` · ${more}` : "");
}

async function modelChanged(voice) {
  const model = currentModel();
  if (!model) return;
  localStorage.setItem(LAST_MODEL, model.id);
  $("speak-model-random").hidden = !model.random_weights; // a test model: say so before it speaks noise
  const caps = model.capabilities || {};
  const modes = model.voice_modes || [];
  const test = model.random_weights ? "A test model: it speaks noise, not speech" : "";
  $("speak-model-about").textContent = [test, abilities(model), model.error ? `Not usable now: ${model.error}` : ""].filter(Boolean).join(" · ");
  showLicense($("speak-model-license"), model.license);
  const language = $("speak-language");
  const languages = model.languages.length ? model.languages : ["auto"];
  language.replaceChildren(...languages.map((l) => el("option", { value: l, text: l })));
  const design = modes.includes("design");
  const instruct = design || caps.instruct;
  $("speak-instructions-field").hidden = !instruct;
  $("speak-instructions-label").textContent = design ? "Voice description" : "Style instruction (optional)";
  $("speak-instructions").placeholder = design ? "A warm, low voice of a man in his fifties, speaking slowly." : "Speak cheerfully, a little fast.";
  readOptions = renderOptions($("speak-options"), model.options || []);
  await refreshVoices(voice);
}

// Fill the voice picker with what works on the chosen model: library voices, preset speakers,
// OpenAI voice names (with what each means there); and, where the model takes an emotion
// reference, the emotion picker (the voice's own emotion, or a library voice's).
export async function refreshVoices(wanted) {
  const model = currentModel();
  if (!model) return;
  await fillVoices($("speak-voice"), model, wanted);
  const takes = Boolean((model.capabilities || {}).emotion_reference);
  $("speak-emotion-field").hidden = !takes;
  if (takes) await fillEmotions($("speak-emotion"), model);
}

// The emotion picker: "the voice's own" first, then the library voices that work on `model`.
async function fillEmotions(select, model, wanted) {
  const previous = wanted ?? select.value;
  const list = await getJSON(`/v1/audio/voices?model=${encodeURIComponent(model.id)}&kind=library`);
  const voices = list.data.filter((v) => (v.models || []).includes(model.id));
  select.replaceChildren(el("option", { value: "", text: "the voice's own" }), ...voices.map((v) => el("option", { value: v.id, text: v.name })));
  if ([...select.options].some((o) => o.value === previous)) select.value = previous;
}

// Fill `select` with the voices that work on `model` (GET /v1/audio/voices?model=, `kind` one kind
// only), grouped; keep `wanted` (or what was chosen) selected where it is still there.
export async function fillVoices(select, model, wanted, kind = null) {
  const previous = wanted || select.value;
  const query = `model=${encodeURIComponent(model.id)}${kind ? `&kind=${kind}` : ""}`;
  const list = await getJSON(`/v1/audio/voices?${query}`);
  const groups = { library: [], speaker: [], openai: [] };
  for (const v of list.data) (groups[v.kind] || groups.openai).push(v);
  const titles = { library: "Library voices", speaker: "Speakers", openai: "OpenAI voice names" };
  select.replaceChildren();
  for (const [group, voices] of Object.entries(groups)) {
    if (!voices.length) continue;
    const box = el("optgroup", { label: titles[group] });
    for (const v of voices) {
      const means = v.means && v.means[model.id] ? ` → ${v.means[model.id]}` : "";
      box.append(el("option", { value: v.id, text: `${v.name}${means}` }));
    }
    select.append(box);
  }
  if (!select.options.length) select.append(el("option", { value: "", text: "no voice for this model: clone one under Voices" }));
  const names = [...select.options].map((o) => o.value);
  if (names.includes(previous)) select.value = previous;
}

// Choose `model` and `voice` (after cloning: use the new voice at once).
export async function speakWith(model, voice) {
  if (model && models.some((m) => m.id === model)) $("speak-model").value = model;
  await modelChanged(voice);
  if (voice) $("speak-voice").value = voice;
}

function requestBody() {
  const body = {
    model: $("speak-model").value,
    input: $("speak-input").value,
    voice: $("speak-voice").value,
    response_format: $("speak-response-format").value,
    speed: Number($("speak-speed").value || 1),
  };
  const language = $("speak-language").value;
  if (language && language !== "auto") body.language = language;
  const seed = $("speak-seed").value.trim();
  if (seed !== "") body.seed = Number(seed);
  const instructions = $("speak-instructions").value.trim();
  if (!$("speak-instructions-field").hidden && instructions) body.instructions = instructions;
  const emotion = $("speak-emotion").value;
  if (!$("speak-emotion-field").hidden && emotion) body.emotion_voice = emotion;
  const options = readOptions();
  if (Object.keys(options).length) body.options = options;
  return body;
}

async function speak(event) {
  event.preventDefault();
  if (running) return;
  const box = $("speak-error");
  clearError(box, "speak");
  const body = requestBody();
  const live = $("speak-stream").checked && LIVE_FORMATS.has(body.response_format);
  const streamed = $("speak-stream").checked;
  const controller = new AbortController();
  const rate = (currentModel()?.capabilities || {}).sample_rate || null; // raw pcm comes at the model's rate
  const player = live ? new StreamPlayer(body.response_format, { rate }) : null;
  if (live) audioContext(); // inside the click: the browser lets it play
  running = { controller, player };
  setBusy(true, "Speaking…");
  const started = performance.now();
  try {
    const response = await call("/v1/audio/speech", {
      method: "POST",
      json: streamed ? { ...body, stream_format: "audio" } : body,
      signal: controller.signal,
    });
    const seed = response.headers.get("X-Koe-Seed");
    const chunks = [];
    const reader = response.body.getReader();
    let firstByte = null;
    for (;;) {
      let next;
      try {
        next = await reader.read();
      } catch (error) {
        if (error.name === "AbortError") throw error;
        throw new Error(`the stream broke off after ${player ? seconds(player.duration) + " of audio" : "its first bytes"} (the server's log says why)`);
      }
      const { done, value } = next;
      if (done) break;
      if (firstByte == null) firstByte = performance.now();
      if (player) player.feed(value);
      else chunks.push(value);
    }
    const wall = (performance.now() - started) / 1000;
    const type = response.headers.get("Content-Type") || "application/octet-stream";
    let playable;
    let download;
    let duration;
    if (player) {
      playable = player.wav();
      download = body.response_format === "pcm" ? player.pcm() : playable;
      duration = player.duration;
    } else {
      download = new Blob(chunks, { type });
      playable = body.response_format === "pcm" ? pcmAsWav(chunks, rate) : download;
      duration = Number(response.headers.get("X-Koe-Duration")) || null;
    }
    const metrics = {
      first_audio_s: player && player.firstAt != null ? (player.firstAt - started) / 1000 : null,
      first_byte_s: firstByte != null ? (firstByte - started) / 1000 : null,
      rtf: player ? player.realTimeFactor() : null,
      wall_s: wall,
      streamed,
    };
    const warnings = response.headers.get("X-Koe-Warnings");
    if (warnings) metrics.warnings = warnings;
    lastSeed = seed;
    const name = fileName(["koe", body.model, body.voice, seed], EXTENSIONS[body.response_format] || "bin");
    duration = await showResult(playable, download, name, duration, metrics, seed, !live);
    await addOutput({ body, seed: seed == null ? null : Number(seed), duration, metrics, name, audio: download, playable, created: Date.now() });
    setBusy(false, null);
    document.dispatchEvent(new Event("koe:spoke"));
  } catch (error) {
    if (player) player.stop();
    setBusy(false, error.name === "AbortError" ? "Cancelled." : "");
    showError(box, error, "speak");
  } finally {
    running = null;
  }
}

async function showResult(playable, download, name, duration, metrics, seed, autoplay) {
  for (const url of [result.url, result.download]) if (url) URL.revokeObjectURL(url);
  result.url = URL.createObjectURL(playable);
  result.download = download === playable ? result.url : URL.createObjectURL(download);
  const audio = $("speak-audio");
  audio.src = result.url;
  const link = $("speak-download");
  link.href = result.download;
  link.download = name;
  link.textContent = `Download ${name}`;
  $("speak-result").hidden = false;
  if (!duration) {
    await new Promise((resolve) => {
      audio.addEventListener("loadedmetadata", resolve, { once: true });
      audio.addEventListener("error", resolve, { once: true });
    });
    duration = Number.isFinite(audio.duration) ? audio.duration : 0;
  }
  $("speak-metrics").textContent = metricsText(duration, metrics, seed);
  if (autoplay) audio.play().catch(() => {});
  return duration;
}

export function metricsText(duration, m, seed) {
  const parts = [];
  if (m.first_audio_s != null) parts.push(`first audio after ${seconds(m.first_audio_s)}`);
  else if (m.streamed && m.first_byte_s != null) parts.push(`first bytes after ${seconds(m.first_byte_s)}`);
  if (m.rtf != null) parts.push(`real-time factor ${m.rtf.toFixed(2)}${m.rtf < 1 ? ` (${(1 / m.rtf).toFixed(1)}× faster than real time)` : ""}`);
  else if (duration) parts.push(`real-time factor ${(m.wall_s / duration).toFixed(2)}`);
  parts.push(`${seconds(duration || 0)} of audio in ${seconds(m.wall_s)}`);
  if (seed != null) parts.push(`seed ${seed}`);
  const text = parts.join(" · ");
  return m.warnings ? `${text}\nNote: ${m.warnings}` : text;
}

function pcmAsWav(chunks, rate) {
  const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const c of chunks) {
    bytes.set(c, offset);
    offset += c.length;
  }
  const player = new StreamPlayer("pcm", { play: false, rate });
  player.feed(bytes);
  return player.wav();
}

function setBusy(busy, status) {
  $("speak-go").disabled = busy;
  $("speak-cancel").disabled = !busy;
  $("speak-go").textContent = busy ? "Speaking…" : "Speak";
  if (status == null) return;
  $("speak-metrics").textContent = status;
  if (status) $("speak-result").hidden = false;
}

function cancel() {
  if (running) running.controller.abort();
}

// Put a past request back into the form (History's "Use again").
export async function fillForm(body, seed) {
  await speakWith(body.model, body.voice);
  $("speak-input").value = body.input;
  $("speak-response-format").value = body.response_format;
  $("speak-speed").value = String(body.speed ?? 1);
  $("speak-language").value = body.language || "auto";
  $("speak-seed").value = seed == null ? "" : String(seed);
  $("speak-instructions").value = body.instructions || "";
  const model = currentModel();
  if (model && (model.capabilities || {}).emotion_reference) await fillEmotions($("speak-emotion"), model, body.emotion_voice || "");
  fillOptions(body.options);
}

export function setupSpeak() {
  $("speak-form").addEventListener("submit", speak);
  $("speak-cancel").addEventListener("click", cancel);
  $("speak-model").addEventListener("change", () => modelChanged().catch((e) => showError($("speak-error"), e, "speak")));
  $("speak-reuse-seed").addEventListener("click", () => {
    if (lastSeed != null) $("speak-seed").value = lastSeed;
  });
  const input = $("speak-input");
  input.addEventListener("input", () => {
    $("speak-count").textContent = input.value ? `${input.value.length} characters` : "";
  });
  $("speak-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("speak-form").requestSubmit();
  });
}
