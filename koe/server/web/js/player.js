// Playing speech while it streams: koe streams 16-bit PCM (a WAV whose header has unknown sizes, or
// raw `pcm` at the model's sample rate); each chunk is scheduled on the Web Audio clock right behind the one before,
// so playback starts with the first chunk. At the end the samples become one WAV file (exact
// sizes) for the <audio> element and the download.

const PCM_RATE = 24000; // koe's `pcm` format is signed 16-bit little-endian mono at the model's rate: this where it is not known
const LEAD_S = 0.05; // scheduling slack for the first chunk

let context = null;

// The page's AudioContext, created (or resumed) inside a click so the browser lets it play.
export function audioContext() {
  if (!context) context = new AudioContext();
  if (context.state === "suspended") context.resume();
  return context;
}

export class StreamPlayer {
  // format: "wav" (parse the header) or "pcm" (at `rate`: the model's `capabilities.sample_rate`);
  // play: schedule on the speakers as chunks arrive.
  constructor(format, { play = true, rate = null } = {}) {
    this.play = play;
    this.context = play ? audioContext() : null;
    this.header = format === "wav" ? new Uint8Array(0) : null; // bytes of the header until "data" is found
    this.rate = format === "pcm" ? rate || PCM_RATE : null;
    this.channels = 1;
    this.carry = null; // an odd byte left between chunks
    this.chunks = []; // Int16Array per chunk
    this.samples = 0;
    this.next = 0; // where the next chunk starts on the audio clock
    this.sources = [];
    this.firstAt = null; // performance.now() when the first samples arrived
    this.firstSamples = 0;
    this.lastAt = null;
  }

  get duration() {
    return this.rate ? this.samples / this.channels / this.rate : 0;
  }

  // Feed the next bytes of the response.
  feed(bytes) {
    if (this.header) {
      const joined = concat(this.header, bytes);
      const found = parseWavHeader(joined);
      if (!found) {
        this.header = joined;
        return;
      }
      this.header = null;
      this.rate = found.rate;
      this.channels = found.channels;
      bytes = joined.subarray(found.dataOffset);
    }
    if (this.carry) {
      bytes = concat(this.carry, bytes);
      this.carry = null;
    }
    if (bytes.length % 2) {
      this.carry = bytes.slice(bytes.length - 1);
      bytes = bytes.subarray(0, bytes.length - 1);
    }
    if (!bytes.length) return;
    const pcm = new Int16Array(bytes.slice().buffer);
    const now = performance.now();
    if (this.firstAt == null) {
      this.firstAt = now;
      this.firstSamples = pcm.length;
    }
    this.lastAt = now;
    this.chunks.push(pcm);
    this.samples += pcm.length;
    if (this.play) this.schedule(pcm);
  }

  schedule(pcm) {
    const frames = Math.floor(pcm.length / this.channels);
    if (!frames) return;
    const buffer = this.context.createBuffer(this.channels, frames, this.rate);
    for (let c = 0; c < this.channels; c++) {
      const channel = buffer.getChannelData(c);
      for (let i = 0; i < frames; i++) channel[i] = pcm[i * this.channels + c] / 32768;
    }
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const at = Math.max(this.next, this.context.currentTime + LEAD_S);
    source.start(at);
    this.next = at + frames / this.rate;
    this.sources.push(source);
    source.onended = () => {
      this.sources = this.sources.filter((s) => s !== source);
    };
  }

  // Seconds of audio still queued on the speakers.
  get queued() {
    return this.play ? Math.max(0, this.next - this.context.currentTime) : 0;
  }

  stop() {
    for (const source of this.sources) {
      try {
        source.stop();
      } catch {
        // already ended
      }
    }
    this.sources = [];
  }

  // Streaming speed: wall seconds between the first and the last chunk over the audio they hold
  // after the first (below 1: faster than real time). Null with a single chunk.
  realTimeFactor() {
    const audio = (this.samples - this.firstSamples) / this.channels / this.rate;
    if (this.firstAt == null || audio <= 0) return null;
    return (this.lastAt - this.firstAt) / 1000 / audio;
  }

  // Everything received, as one WAV file.
  wav() {
    return wavBlob(this.chunks, this.rate || PCM_RATE, this.channels);
  }

  // The raw bytes as received after the header (for a `pcm` download).
  pcm() {
    return new Blob(this.chunks.map((c) => c.buffer), { type: "audio/pcm" });
  }
}

// A WAV header's facts once its "data" chunk has begun: {rate, channels, dataOffset}; null while
// more bytes are needed. Throws on something that is not 16-bit PCM WAV.
export function parseWavHeader(bytes) {
  if (bytes.length < 12) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (text(bytes, 0, 4) !== "RIFF" || text(bytes, 8, 4) !== "WAVE") throw new Error("the stream is not a WAV file");
  let offset = 12;
  let rate = null;
  let channels = 1;
  while (offset + 8 <= bytes.length) {
    const id = text(bytes, offset, 4);
    const size = view.getUint32(offset + 4, true);
    if (id === "data") {
      if (!rate) throw new Error("the WAV stream has no format chunk before its data");
      return { rate, channels, dataOffset: offset + 8 };
    }
    if (offset + 8 + size > bytes.length) return null;
    if (id === "fmt ") {
      channels = view.getUint16(offset + 10, true);
      rate = view.getUint32(offset + 12, true);
      const bits = view.getUint16(offset + 22, true);
      if (view.getUint16(offset + 8, true) !== 1 || bits !== 16) throw new Error("the WAV stream is not 16-bit PCM");
    }
    offset += 8 + size + (size % 2);
  }
  return null;
}

// 16-bit PCM chunks as a WAV Blob with exact sizes.
export function wavBlob(chunks, rate, channels = 1) {
  const samples = chunks.reduce((n, c) => n + c.length, 0);
  const header = new DataView(new ArrayBuffer(44));
  const put = (offset, s) => [...s].forEach((ch, i) => header.setUint8(offset + i, ch.charCodeAt(0)));
  put(0, "RIFF");
  header.setUint32(4, 36 + samples * 2, true);
  put(8, "WAVE");
  put(12, "fmt ");
  header.setUint32(16, 16, true);
  header.setUint16(20, 1, true);
  header.setUint16(22, channels, true);
  header.setUint32(24, rate, true);
  header.setUint32(28, rate * channels * 2, true);
  header.setUint16(32, channels * 2, true);
  header.setUint16(34, 16, true);
  put(36, "data");
  header.setUint32(40, samples * 2, true);
  return new Blob([header.buffer, ...chunks.map((c) => c.buffer)], { type: "audio/wav" });
}

// An AudioBuffer (a recording, decoded) as a 16-bit mono WAV Blob.
export function audioBufferToWav(buffer) {
  const mono = new Float32Array(buffer.length);
  for (let c = 0; c < buffer.numberOfChannels; c++) {
    const data = buffer.getChannelData(c);
    for (let i = 0; i < data.length; i++) mono[i] += data[i] / buffer.numberOfChannels;
  }
  const pcm = new Int16Array(mono.length);
  for (let i = 0; i < mono.length; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(mono[i] * 32767)));
  return wavBlob([pcm], buffer.sampleRate, 1);
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

function text(bytes, offset, length) {
  return String.fromCharCode(...bytes.subarray(offset, offset + length));
}
