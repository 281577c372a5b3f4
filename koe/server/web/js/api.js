// koe's HTTP API from the page: the same public endpoints any client calls, on this origin.
// A 401 asks for the token (the page's dialog, see main.js) and tries again with it; every other
// failure is an ApiError carrying the API's own message, the field at fault and when to retry.

const TOKEN_KEY = "koe.token";
let token = sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || "";
let askToken = null; // (reason) => Promise<{token, remember}>, set by the page

export class ApiError extends Error {
  constructor(status, message, { param = null, code = null, retryAfter = null } = {}) {
    super(message);
    this.status = status;
    this.param = param;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  // What to show: the API's message, and for a 429 / 503 when to try again.
  get text() {
    if (this.retryAfter != null) return `${this.message}\nTry again in ${this.retryAfter} s.`;
    return this.message;
  }
}

export function onTokenNeeded(ask) {
  askToken = ask;
}

export function setToken(value, remember) {
  token = value;
  sessionStorage.setItem(TOKEN_KEY, value);
  if (remember) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
}

export function forgetToken() {
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
}

// The subprotocols a WebSocket to koe offers: `koe`, and the token as `koe.bearer.<base64url>`
// when there is one (a browser cannot set Authorization on a WebSocket; the server selects `koe`).
export function webSocketProtocols() {
  if (!token) return ["koe"];
  const bytes = new TextEncoder().encode(token);
  const b64url = btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return ["koe", `koe.bearer.${b64url}`];
}

export function hasToken() {
  return Boolean(token);
}

// fetch(path) with the token; `json` or `form` as the body. Returns the Response (ok), or throws
// ApiError. An AbortError (the signal) passes through as it is.
export async function call(path, { method = "GET", json, form, signal } = {}) {
  for (let attempt = 0; ; attempt++) {
    const headers = {};
    if (token) headers.Authorization = `Bearer ${token}`;
    let body;
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(json);
    } else if (form) {
      body = form;
    }
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal, cache: "no-store", credentials: "omit" });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "the server did not answer: is koe serve still running?");
    }
    if (response.status === 401 && askToken && attempt < 3) {
      const error = await errorOf(response);
      const answer = await askToken(token ? "That token was not accepted." : error.message);
      if (!answer) throw error;
      setToken(answer.token, answer.remember);
      continue;
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

export async function getJSON(path, options) {
  return (await call(path, options)).json();
}

export async function sendJSON(path, json, options = {}) {
  return (await call(path, { method: "POST", json, ...options })).json();
}

// The API's error object ({"error": {"message", "param", "code"}}) as an ApiError.
export async function errorOf(response) {
  let message = `${response.status} ${response.statusText}`;
  let param = null;
  let code = null;
  try {
    const body = await response.json();
    const error = body.error || body;
    if (typeof error.message === "string") message = error.message;
    else if (typeof body.detail === "string") message = body.detail;
    param = error.param || null;
    code = error.code || null;
  } catch {
    // not JSON (a proxy's page): the status says enough
  }
  const after = response.headers.get("Retry-After");
  const retryAfter = after && /^\d+$/.test(after) ? Number(after) : null;
  return new ApiError(response.status, message, { param, code, retryAfter });
}
