// The Convert tab, shown when a model converts voices (`capabilities.conversion`): speech from a
// file or the microphone said again in a library voice or the voice of an uploaded clip
// (POST /v1/audio/conversions), then played and downloaded. Cancel aborts the request (the server
// stops).
import { call } from "./api.js";
import { $, clearError, el, fileName, seconds, showError } from "./dom.js";
import { Recorder } from "./recorder.js";
import { fillVoices } from "./speak.js";

const MAX_RECORD_S = 60;
const EXTENSIONS = { wav: "wav", mp3: "mp3", opus: "ogg", flac: "flac" };
let converters = [];
let recorded = null; // a File made from the microphone
let running = null; // AbortController
let result = null; // object URL of the last result

const currentModel = () => converters.find((m) => m.id === $("convert-model").value) || null;

// Show the tab when an installed model converts voices, with those models to pick from; false when none does.
export async function showConvertModels(models) {
  converters = models.filter((m) => (m.capabilities || {}).conversion);
  $("tab-convert").hidden = converters.length === 0;
  const select = $("convert-model");
  const previous = select.value;
  select.replaceChildren(...converters.map((m) => el("option", { value: m.id, text: m.id })));
  if (!converters.length) return false;
  select.value = converters.some((m) => m.id === previous) ? previous : (converters.find((m) => m.default) || converters[0]).id;
  await refreshConvertVoices();
  return true;
}

// The library voices the chosen model can convert into; without any, the clip is the target.
export async function refreshConvertVoices() {
  const model = currentModel();
  if (!model) return;
  const select = $("convert-voice");
  await fillVoices(select, model, null, "library");
  const none = !select.value;
  if (none) select.options[0].textContent = "no library voice for this model: give a clip";
  $("convert-target-library").disabled = none;
  if (none) $("convert-target-clip").checked = true;
  targetChanged();
}

function targetChanged() {
  const clip = $("convert-target-clip").checked;
  $("convert-voice").disabled = clip;
  $("convert-reference").disabled = !clip;
}

function preview(file) {
  const audio = $("convert-preview");
  if (audio.src) URL.revokeObjectURL(audio.src);
  audio.hidden = !file;
  audio.src = file ? URL.createObjectURL(file) : "";
}

async function convert(event) {
  event.preventDefault();
  if (running) return;
  const box = $("convert-error");
  clearError(box, "convert");
  const model = $("convert-model").value;
  const format = $("convert-response-format").value;
  const form = new FormData();
  const source = recorded || $("convert-file").files[0];
  if (source) form.append("file", source, source.name || "speech.wav");
  let voice = null;
  if ($("convert-target-clip").checked) {
    const clip = $("convert-reference").files[0];
    if (clip) form.append("reference", clip, clip.name || "voice.wav");
  } else {
    voice = $("convert-voice").value;
    form.append("voice", voice);
  }
  form.append("model", model);
  form.append("response_format", format);
  const seed = $("convert-seed").value.trim();
  if (seed !== "") form.append("seed", seed);
  running = new AbortController();
  setBusy(true);
  const started = performance.now();
  try {
    const response = await call("/v1/audio/conversions", { method: "POST", form, signal: running.signal });
    const blob = await response.blob();
    const wall = (performance.now() - started) / 1000;
    const used = response.headers.get("X-Koe-Seed");
    if (result) URL.revokeObjectURL(result);
    result = URL.createObjectURL(blob);
    const audio = $("convert-audio");
    audio.src = result;
    const name = fileName(["koe", "convert", model, voice || "clip", used], EXTENSIONS[format] || "bin");
    const link = $("convert-download");
    link.href = result;
    link.download = name;
    link.textContent = `Download ${name}`;
    $("convert-result").hidden = false;
    await new Promise((resolve) => {
      audio.addEventListener("loadedmetadata", resolve, { once: true });
      audio.addEventListener("error", resolve, { once: true });
    });
    const duration = Number.isFinite(audio.duration) ? audio.duration : 0;
    $("convert-metrics").textContent = [`${seconds(duration)} of audio in ${seconds(wall)}`, used != null ? `seed ${used}` : null].filter(Boolean).join(" · ");
    audio.play().catch(() => {});
  } catch (error) {
    showError(box, error, "convert");
    if (error.name === "AbortError") {
      $("convert-metrics").textContent = "Cancelled.";
      $("convert-result").hidden = false;
    }
  } finally {
    running = null;
    setBusy(false);
  }
}

function setBusy(busy) {
  $("convert-go").disabled = busy;
  $("convert-cancel").disabled = !busy;
  $("convert-go").textContent = busy ? "Converting…" : "Convert";
}

export function setupConvert() {
  $("convert-form").addEventListener("submit", convert);
  $("convert-cancel").addEventListener("click", () => running && running.abort());
  $("convert-model").addEventListener("change", () => refreshConvertVoices().catch((e) => showError($("convert-error"), e, "convert")));
  for (const id of ["convert-target-library", "convert-target-clip"]) $(id).addEventListener("change", targetChanged);
  $("convert-file").addEventListener("change", () => {
    recorded = null;
    preview($("convert-file").files[0] || null);
  });
  new Recorder({
    button: $("convert-record"),
    status: $("convert-record-status"),
    maxSeconds: MAX_RECORD_S,
    starting: () => clearError($("convert-error"), "convert"),
    done: (file) => {
      recorded = file;
      $("convert-file").value = "";
      preview(file);
    },
    failed: (error) => showError($("convert-error"), error, "convert"),
  });
}
