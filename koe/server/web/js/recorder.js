// Recording from the microphone, for a voice's reference clip (Voices) and the speech to convert
// (Convert): a Record/Stop button, a status line, and the recording as a WAV file made in the
// browser (MediaRecorder's webm, decoded and written as 16-bit mono WAV).
import { seconds } from "./dom.js";
import { audioBufferToWav, audioContext } from "./player.js";

// A Record button: `button` toggles recording, `status` says how long; at most `maxSeconds`.
// `starting()` is called as it starts; `done(file)` gets the recording as a File (recording.wav);
// `failed(error)` an Error to show.
export class Recorder {
  constructor({ button, status, maxSeconds, starting = () => {}, done, failed }) {
    Object.assign(this, { button, status, maxSeconds, starting, done, failed });
    this.active = null; // {recorder, stream, timer}
    button.addEventListener("click", () => this.toggle());
  }

  async toggle() {
    if (this.active) {
      this.active.recorder.stop();
      return;
    }
    this.starting();
    if (!navigator.mediaDevices || !window.MediaRecorder) {
      const why = window.isSecureContext ? "this browser cannot record" : "browsers allow the microphone only on https:// pages or on localhost";
      this.failed(new Error(`${why}; choose a file instead`));
      return;
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false } });
    } catch (error) {
      this.failed(new Error(`the microphone is not available (${error.message}); choose a file instead`));
      return;
    }
    const recorder = new MediaRecorder(stream);
    const parts = [];
    recorder.ondataavailable = (e) => e.data.size && parts.push(e.data);
    recorder.onstop = async () => {
      clearInterval(this.active.timer);
      stream.getTracks().forEach((t) => t.stop());
      this.active = null;
      this.button.textContent = "Record";
      this.button.setAttribute("aria-pressed", "false");
      try {
        const decoded = await audioContext().decodeAudioData(await new Blob(parts).arrayBuffer());
        this.status.textContent = `recorded ${seconds(decoded.duration)}`;
        this.done(new File([audioBufferToWav(decoded)], "recording.wav", { type: "audio/wav" }));
      } catch (error) {
        this.failed(new Error(`the recording could not be read (${error.message})`));
      }
    };
    const started = performance.now();
    this.active = { recorder, stream, timer: null };
    this.active.timer = setInterval(() => {
      const elapsed = (performance.now() - started) / 1000;
      this.status.textContent = `recording… ${elapsed.toFixed(0)} s (press Stop)`;
      if (elapsed >= this.maxSeconds) recorder.stop();
    }, 250);
    recorder.start(250);
    this.button.textContent = "Stop";
    this.button.setAttribute("aria-pressed", "true");
    this.status.textContent = "recording…";
  }
}
