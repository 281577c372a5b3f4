// koe's web page: tabs, the token dialog, the server's status, and the tabs wired together.
import { forgetToken, getJSON, onTokenNeeded } from "./api.js";
import { refreshConvertVoices, setupConvert, showConvertModels } from "./convert.js";
import { $, showError } from "./dom.js";
import { setupHistory, showHistory } from "./history.js";
import { refreshLiveVoices, setupLive, showLiveModels } from "./live.js";
import { fillForm, loadModels, modelCards, refreshVoices, setupSpeak, speakWith } from "./speak.js";
import { setupVoices, showDesignModels, showLibrary } from "./voices.js";

// Tabs (WAI-ARIA tabs pattern: arrow keys move between them, Home/End jump; a hidden tab is skipped).
function setupTabs() {
  const all = [...document.querySelectorAll('[role="tab"]')];
  const select = (tab, focus = true) => {
    for (const t of all) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (focus) tab.focus();
    history.replaceState(null, "", `#${tab.getAttribute("aria-controls")}`);
  };
  for (const tab of all) {
    tab.addEventListener("click", () => select(tab));
    tab.addEventListener("keydown", (e) => {
      const tabs = all.filter((t) => !t.hidden);
      const i = tabs.indexOf(tab);
      const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (to === undefined) return;
      e.preventDefault();
      select(tabs[(to + tabs.length) % tabs.length]);
    });
  }
  const wanted = all.find((t) => `#${t.getAttribute("aria-controls")}` === location.hash);
  if (wanted) select(wanted, false);
  return (id, focus = true) => select(all.find((t) => t.getAttribute("aria-controls") === id), focus);
}

// The token dialog: resolves {token, remember}, or null when cancelled.
function askForToken(reason) {
  const dialog = $("token-dialog");
  $("token-reason").textContent = reason || "Ask whoever runs it (server.token).";
  $("token-input").value = "";
  return new Promise((resolve) => {
    const done = (answer) => {
      $("token-form").removeEventListener("submit", submit);
      $("token-cancel").removeEventListener("click", cancel);
      dialog.close();
      resolve(answer);
    };
    const submit = (e) => {
      e.preventDefault();
      const token = $("token-input").value.trim();
      if (token) done({ token, remember: $("token-remember").checked });
    };
    const cancel = () => done(null);
    $("token-form").addEventListener("submit", submit);
    $("token-cancel").addEventListener("click", cancel);
    dialog.addEventListener("cancel", cancel, { once: true });
    dialog.showModal();
    $("token-input").focus();
  });
}

async function showServer() {
  try {
    const health = await getJSON("/health");
    const failed = Object.keys(health.models_failed || {});
    $("server-version").textContent = `koe ${health.version}`;
    const loaded = health.models_loaded.length ? `loaded: ${health.models_loaded.join(", ")}` : "no model loaded yet";
    $("server-status").textContent = failed.length ? `${loaded} · failed: ${failed.join(", ")}` : loaded;
  } catch {
    $("server-status").textContent = "the server is not answering";
  }
}

async function start() {
  const show = setupTabs();
  onTokenNeeded(askForToken);
  const refreshVoiceLists = async () => {
    await showLibrary();
    await refreshVoices();
    await refreshLiveVoices();
    await refreshConvertVoices();
  };
  setupSpeak();
  setupLive();
  setupConvert();
  setupVoices({
    changed: refreshVoiceLists,
    use: async (model, voice) => {
      await speakWith(model, voice);
      show("speak");
      $("speak-input").focus();
    },
  });
  setupHistory(async (body, seed) => {
    await fillForm(body, seed);
    show("speak");
  });
  await showServer();
  document.addEventListener("koe:spoke", showServer); // a model may have loaded
  try {
    await loadModels();
    showDesignModels(modelCards());
    await showLiveModels(modelCards());
    if (!(await showConvertModels(modelCards())) && location.hash === "#convert") show("speak", false); // no model converts
    await showLibrary();
  } catch (error) {
    if (error.status === 401) forgetToken();
    showError($("speak-error"), error, "speak");
  }
  await showHistory();
  document.body.dataset.ready = "true"; // for tests and scripts: the page has loaded its lists
}

start();
