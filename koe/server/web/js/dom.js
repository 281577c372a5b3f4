// Small DOM helpers: build elements, show an error where the user is, name downloads.
import { ApiError } from "./api.js";

export const $ = (id) => document.getElementById(id);

// el("button", {type: "button", onclick}, "Play"): attributes starting with "on" are listeners,
// `text` sets textContent; children are nodes or strings (never parsed as HTML).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child != null) node.append(child);
  }
  return node;
}

// Show `error` in `box` (an ApiError: its message and retry time; the field it names is marked
// invalid and focused, found by the form's id `prefix`). A cancelled request shows nothing.
export function showError(box, error, prefix) {
  clearError(box, prefix);
  if (error && error.name === "AbortError") return;
  const text = error instanceof ApiError ? error.text : `Something went wrong: ${error && error.message ? error.message : error}`;
  box.textContent = text;
  box.classList.remove("ok");
  box.hidden = false;
  const field = error instanceof ApiError ? fieldFor(error.param, prefix) : null;
  if (field) {
    field.setAttribute("aria-invalid", "true");
    field.setAttribute("aria-errormessage", box.id);
    field.focus();
  }
}

export function showDone(box, text) {
  box.textContent = text;
  box.classList.add("ok");
  box.hidden = false;
}

export function clearError(box, prefix) {
  box.hidden = true;
  box.textContent = "";
  box.classList.remove("ok");
  if (prefix) {
    for (const field of document.querySelectorAll(`[id^="${prefix}-"][aria-invalid]`)) {
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-errormessage");
    }
  }
}

export function seconds(value) {
  return `${value.toFixed(value < 10 ? 2 : 1)} s`;
}

// A download of `blob` named `name` (the browser's own save, no server round trip).
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = el("a", { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// A file name made of safe characters: "koe-cv-ryan-42.wav".
export function fileName(parts, extension) {
  const stem = parts.filter(Boolean).join("-").replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 80);
  return `${stem || "koe"}.${extension}`;
}

// Each request field's name on the page's forms, for marking the one an error names.
function fieldFor(param, prefix) {
  if (!param) return null;
  return document.getElementById(`${prefix}-${param.replaceAll("_", "-")}`) || document.getElementById(`${prefix}-opt-${param}`);
}
