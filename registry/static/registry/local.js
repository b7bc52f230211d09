// Reads only a GGUF header with File.slice and posts it; sends more only when the server says it needs more.
"use strict";
(function () {
  const config = JSON.parse(document.getElementById("local-config").textContent);
  const input = document.getElementById("gguf-file");
  const status = document.getElementById("local-status");
  const out = document.getElementById("local-result");
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

  class Short extends Error {}

  // Where the header ends (after the tensor infos), walking the bytes we have; throws Short if they end first.
  function headerEnd(view) {
    let pos = 0;
    const need = (n) => { if (pos + n > view.byteLength) throw new Short(); };
    need(8);
    if (view.getUint32(0, true) !== 0x46554747) throw new Error("not a GGUF file (bad magic)");
    let le = true;
    if ((view.getUint32(4, true) & 0xffff) === 0) le = false; // written big-endian
    pos = 8;
    const u32 = () => { need(4); const v = view.getUint32(pos, le); pos += 4; return v; };
    const u64 = () => { need(8); const v = Number(view.getBigUint64(pos, le)); pos += 8; return v; };
    const skipString = () => { const n = u64(); need(n); pos += n; };
    const skipValue = (type) => {
      if (type in SIZES) { need(SIZES[type]); pos += SIZES[type]; return; }
      if (type === 8) { skipString(); return; }
      if (type === 9) {
        const et = u32(), count = u64();
        if (et in SIZES) { need(count * SIZES[et]); pos += count * SIZES[et]; return; }
        // Only strings are walked one by one; arrays of arrays are not GGUF that llama.cpp reads.
        if (et !== 8) throw new Error("array of value type " + et);
        need(count * 8);
        for (let i = 0; i < count; i++) skipString();
        return;
      }
      throw new Error("unknown value type " + type);
    };
    const nTensors = u64(), nKv = u64();
    for (let i = 0; i < nKv; i++) { skipString(); skipValue(u32()); }
    for (let i = 0; i < nTensors; i++) {
      skipString();
      const dims = u32();
      need(dims * 8 + 12); pos += dims * 8 + 12;
    }
    return pos;
  }

  async function localHeaderSize(file) {
    let size = Math.min(file.size, 1 << 20);
    for (;;) {
      const view = new DataView(await file.slice(0, size).arrayBuffer());
      try { return headerEnd(view); } catch (e) {
        if (!(e instanceof Short)) throw e;
      }
      if (size >= file.size || size >= config.cap) return Math.min(file.size, config.cap);
      size = Math.min(file.size, config.cap, size * 2);
    }
  }

  function csrfToken() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  async function send(file, n) {
    const body = await file.slice(0, n).arrayBuffer(); // only these bytes are read from disk and sent
    const response = await fetch(config.url, {
      method: "POST", body: body, credentials: "same-origin",
      headers: { "Content-Type": "application/octet-stream", "X-CSRFToken": csrfToken(),
                 "X-File-Name": encodeURIComponent(file.name), "X-File-Size": String(file.size) },
    });
    return response.json();
  }

  input.addEventListener("change", async () => {
    const file = input.files[0];
    out.textContent = "";
    if (!file) return;
    try {
      status.textContent = "Reading the header…";
      let n;
      try { n = await localHeaderSize(file); } catch (e) { n = Math.min(file.size, 256 * 1024); }
      let sent = 0;
      for (let round = 0; round < 8; round++) {
        status.textContent = `Sending ${n.toLocaleString()} header bytes of ${file.size.toLocaleString()}…`;
        const answer = await send(file, n);
        sent += n;
        if (answer.status === "need_more") { n = Math.min(file.size, Math.max(answer.need, n + 1)); continue; }
        if (answer.status !== "ok") { status.textContent = answer.error || "The server could not read this header."; status.className = "error"; return; }
        status.textContent = `${file.name}: header of ${answer.header_size.toLocaleString()} bytes read; ${sent.toLocaleString()} bytes sent in all (the file has ${file.size.toLocaleString()}).`;
        status.dataset.sent = String(sent);
        status.className = "ok";
        out.replaceChildren(...safeNodes(answer.html));
        return;
      }
      status.textContent = "The header is still incomplete after 8 rounds; giving up.";
    } catch (e) {
      status.textContent = "Could not read the file: " + e.message;
      status.className = "error";
    }
  });
  // The server renders the result with its templates (every file-supplied string escaped). It is put
  // in the page as nodes of a parsed document, never through innerHTML: a parsed document runs no
  // script, and scripts, frames, on* handlers and javascript: links are dropped besides (the CSP
  // would block them too).
  function safeNodes(html) {
    const doc = new DOMParser().parseFromString(html, "text/html");
    doc.querySelectorAll("script, iframe, object, embed, base, meta, link").forEach((n) => n.remove());
    for (const el of doc.body.querySelectorAll("*")) {
      for (const a of [...el.attributes]) {
        if (a.name.startsWith("on") || /^\s*javascript:/i.test(a.value)) el.removeAttribute(a.name);
      }
    }
    return [...doc.body.childNodes];
  }
})();
