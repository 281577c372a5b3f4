// The Voices tab: clone from an uploaded or recorded clip (POST /v1/audio/voices), design from words
// (POST /v1/audio/voices/design, on models that can), and the library (GET /v1/audio/voices?kind=library:
// play the reference, use, export, delete; import an exported archive).
import { call, getJSON } from "./api.js";
import { $, clearError, el, fileName, saveBlob, seconds, showDone, showError } from "./dom.js";
import { Recorder } from "./recorder.js";

const MAX_RECORD_S = 30;
let recorded = null; // a File made from the microphone
let designing = null; // AbortController
let onVoicesChanged = async () => {};
let useVoice = async () => {};
const urls = [];

export function setupVoices({ changed, use }) {
  onVoicesChanged = changed;
  useVoice = use;
  $("clone-form").addEventListener("submit", saveClone);
  new Recorder({
    button: $("clone-record"),
    status: $("clone-record-status"),
    maxSeconds: MAX_RECORD_S,
    starting: () => clearError($("clone-error"), "clone"),
    done: (file) => {
      recorded = file;
      $("clone-file").value = "";
      preview(file);
    },
    failed: (error) => showError($("clone-error"), error, "clone"),
  });
  $("clone-file").addEventListener("change", () => {
    recorded = null;
    const file = $("clone-file").files[0];
    preview(file || null);
  });
  $("design-form").addEventListener("submit", saveDesign);
  $("design-cancel").addEventListener("click", () => designing && designing.abort());
  $("library-import").addEventListener("change", importArchive);
}

// Show the design form when an installed model designs voices, with those models to pick from.
export function showDesignModels(models) {
  const designers = models.filter((m) => (m.voice_modes || []).includes("design"));
  $("design-form").hidden = designers.length === 0;
  $("design-model").replaceChildren(...designers.map((m) => el("option", { value: m.id, text: m.id })));
}

function preview(blob) {
  const audio = $("clone-preview");
  if (audio.src) URL.revokeObjectURL(audio.src);
  audio.hidden = !blob;
  audio.src = blob ? URL.createObjectURL(blob) : "";
}

async function saveClone(event) {
  event.preventDefault();
  const box = $("clone-error");
  clearError(box, "clone");
  const file = recorded || $("clone-file").files[0];
  const form = new FormData();
  form.append("name", $("clone-name").value.trim());
  if (file) form.append("file", file, file.name || "reference.wav");
  for (const field of ["transcript", "language"]) {
    const value = $(`clone-${field}`).value.trim();
    if (value) form.append(field, value);
  }
  if ($("clone-overwrite").checked) form.append("overwrite", "true");
  const button = $("clone-save");
  button.disabled = true;
  try {
    const voice = await (await call("/v1/audio/voices", { method: "POST", form })).json();
    showDone(box, `Saved ${voice.name} (${seconds(voice.duration_s || 0)}).${voice.models.length ? " It is selected on Speak." : " No installed model can clone it yet."}`);
    await onVoicesChanged();
    if (voice.models.length) await useVoice(voice.models[0], voice.name);
  } catch (error) {
    showError(box, error, "clone");
  } finally {
    button.disabled = false;
  }
}

async function saveDesign(event) {
  event.preventDefault();
  const box = $("design-error");
  clearError(box, "design");
  const body = { name: $("design-name").value.trim(), model: $("design-model").value, description: $("design-description").value.trim() };
  const input = $("design-input").value.trim();
  if (input) body.input = input;
  const seed = $("design-seed").value.trim();
  if (seed) body.seed = Number(seed);
  if ($("design-overwrite").checked) body.overwrite = true;
  designing = new AbortController();
  $("design-save").disabled = true;
  $("design-cancel").disabled = false;
  try {
    const voice = await (await call("/v1/audio/voices/design", { method: "POST", json: body, signal: designing.signal })).json();
    showDone(box, `Designed ${voice.name} (${seconds(voice.duration_s || 0)} sample).${voice.models.length ? " Clone it with " + voice.models.join(", ") + "." : " Install a cloning model to speak with it."}`);
    await onVoicesChanged();
  } catch (error) {
    if (error.name === "AbortError") showDone(box, "Cancelled.");
    else showError(box, error, "design");
  } finally {
    designing = null;
    $("design-save").disabled = false;
    $("design-cancel").disabled = true;
  }
}

async function importArchive() {
  const input = $("library-import");
  const file = input.files[0];
  const box = $("library-error");
  clearError(box);
  if (!file) return;
  const form = new FormData();
  form.append("file", file, file.name);
  try {
    const voice = await (await call("/v1/audio/voices/import", { method: "POST", form })).json();
    showDone(box, `Imported ${voice.name}.`);
    await onVoicesChanged();
  } catch (error) {
    showError(box, error);
  } finally {
    input.value = "";
  }
}

// The library, listed again (after a change).
export async function showLibrary() {
  const list = $("library");
  const { data } = await getJSON("/v1/audio/voices?kind=library");
  while (urls.length) URL.revokeObjectURL(urls.pop());
  $("library-empty").hidden = data.length > 0;
  list.replaceChildren(...data.map(libraryItem));
}

function libraryItem(voice) {
  const box = $("library-error");
  const path = `/v1/audio/voices/${encodeURIComponent(voice.id)}`;
  const meta = [voice.source, voice.duration_s ? seconds(voice.duration_s) : null, voice.language, voice.models.length ? `works with ${voice.models.join(", ")}` : "no installed model clones it"];
  const audio = el("audio", { controls: true, hidden: true, "aria-label": `Reference of ${voice.name}` });
  const play = async () => {
    try {
      if (!audio.src) {
        const blob = await (await call(`${path}/reference`)).blob();
        const url = URL.createObjectURL(blob);
        urls.push(url);
        audio.src = url;
      }
      audio.hidden = false;
      await audio.play();
    } catch (error) {
      showError(box, error);
    }
  };
  const exportIt = async () => {
    try {
      saveBlob(await (await call(`${path}/export`)).blob(), fileName([voice.name], "zip"));
    } catch (error) {
      showError(box, error);
    }
  };
  const del = async () => {
    if (!confirm(`Delete the voice ${voice.name}?`)) return;
    try {
      await call(path, { method: "DELETE" });
      await onVoicesChanged();
    } catch (error) {
      showError(box, error);
    }
  };
  return el(
    "li",
    { "data-voice": voice.id },
    el("div", { class: "title", text: voice.name }),
    el("div", { class: "meta", text: meta.filter(Boolean).join(" · ") }),
    voice.transcript ? el("div", { class: "text", text: `“${voice.transcript}”` }) : null,
    voice.description ? el("div", { class: "meta", text: voice.description }) : null,
    audio,
    el(
      "div",
      { class: "row" },
      el("button", { type: "button", text: "Play reference", "aria-label": `Play the reference of ${voice.name}`, onclick: play }),
      voice.models.length ? el("button", { type: "button", text: "Use", "aria-label": `Speak with ${voice.name}`, onclick: () => useVoice(voice.models[0], voice.name) }) : null,
      el("button", { type: "button", text: "Export", "aria-label": `Export ${voice.name}`, onclick: exportIt }),
      el("button", { type: "button", class: "danger", text: "Delete", "aria-label": `Delete ${voice.name}`, onclick: del }),
    ),
  );
}
