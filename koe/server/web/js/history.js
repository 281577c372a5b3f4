// The History tab: the outputs this browser made, kept in IndexedDB (the last 30, audio included),
// so they survive a reload; play, download, use again (the same request and seed says it the same
// way), delete. Nothing here goes to the server.
import { $, el, saveBlob, seconds } from "./dom.js";

const DB = "koe";
const STORE = "outputs";
const KEEP = 30;
let useAgain = () => {};
const urls = new Map(); // entry id -> object URL of its audio, while shown

function open() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE, { keyPath: "id", autoIncrement: true });
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function transaction(mode, work) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const result = work(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(result && "result" in result ? result.result : undefined);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

export async function entries() {
  const all = await transaction("readonly", (store) => store.getAll());
  return (all || []).sort((a, b) => b.id - a.id);
}

// Keep one output: {body, seed, duration, metrics, name, audio (Blob), playable (Blob), created}.
export async function addOutput(entry) {
  try {
    await transaction("readwrite", (store) => store.add(entry));
    const all = await entries();
    for (const old of all.slice(KEEP)) await transaction("readwrite", (store) => store.delete(old.id));
  } catch (error) {
    console.warn("koe: the output was not kept in this browser's history", error);
  }
  await showHistory();
}

async function remove(id) {
  await transaction("readwrite", (store) => store.delete(id));
  await showHistory();
}

export async function showHistory() {
  const list = $("history-list");
  for (const url of urls.values()) URL.revokeObjectURL(url);
  urls.clear();
  let all = [];
  try {
    all = await entries();
  } catch (error) {
    console.warn("koe: this browser's history cannot be read", error);
  }
  $("history-empty").hidden = all.length > 0;
  list.replaceChildren(...all.map(item));
}

function item(entry) {
  const url = URL.createObjectURL(entry.playable || entry.audio);
  urls.set(entry.id, url);
  const { body } = entry;
  const when = new Date(entry.created).toLocaleString();
  const meta = [body.model, body.voice, body.response_format, entry.duration ? seconds(entry.duration) : null, entry.seed != null ? `seed ${entry.seed}` : null, when];
  return el(
    "li",
    { "data-id": entry.id },
    el("div", { class: "text", text: body.input }),
    el("div", { class: "meta", text: meta.filter(Boolean).join(" · ") }),
    el("audio", { controls: true, preload: "metadata", src: url, "aria-label": `Output: ${body.input.slice(0, 60)}` }),
    el(
      "div",
      { class: "row" },
      el("button", { type: "button", text: "Download", onclick: () => saveBlob(entry.audio, entry.name) }),
      el("button", { type: "button", text: "Use again", onclick: () => useAgain(body, entry.seed) }),
      el("button", { type: "button", class: "danger", text: "Delete", "aria-label": `Delete output: ${body.input.slice(0, 40)}`, onclick: () => remove(entry.id) }),
    ),
  );
}

export function setupHistory(onUseAgain) {
  useAgain = onUseAgain;
  $("history-clear").addEventListener("click", async () => {
    if (!confirm("Clear every output kept in this browser?")) return;
    await transaction("readwrite", (store) => store.clear());
    await showHistory();
  });
}
