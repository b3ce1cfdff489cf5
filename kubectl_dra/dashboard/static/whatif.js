// The "What if" panel: paste a Pod or pick a pending one, ask /api/whatif (the scheduler's what-if,
// nothing is created), show the totals and the reasons, and paint the copies' devices on the map
// in a colour of their own. The map draws only the rows in view, so the painting is reapplied
// whenever app.js redraws them.
"use strict";

(() => {
  const whatif = window.dra.whatif = { answer: null, devices: new Map() };
  const $ = (id) => document.getElementById(id);
  const esc = (text) => String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const EXAMPLE = [
    "apiVersion: v1", "kind: Pod", "metadata:", "  name: worker", "spec:", "  containers:", "  - name: main", "    image: registry.k8s.io/pause:3.10",
    "    resources:", "      claims:", "      - name: gpu", "  resourceClaims:", "  - name: gpu", "    resourceClaimTemplateName: one-gpu",
  ].join("\n");

  $("tab-whatif").innerHTML = `
    <p class="muted">How many more pods like this one fit, and where? The scheduler answers from a copy of its caches; nothing is created.</p>
    <textarea id="whatif-pod" spellcheck="false" aria-label="pod">${esc(EXAMPLE)}</textarea>
    <div class="controls">
      <label>or pick <select id="whatif-pick" aria-label="pending pod"><option value="">a pending pod…</option></select></label>
      <label>max <input id="whatif-max" type="number" min="1" value="100"></label>
      <button id="whatif-ask">Ask</button>
      <button id="whatif-clear">Clear</button>
    </div>
    <div id="whatif-result"></div>`;

  function paint() {
    for (const cell of document.querySelectorAll("#window .cell[data-id]")) {
      const copy = whatif.devices.get(cell.dataset.id);
      cell.classList.toggle("whatif", copy !== undefined);
      if (copy !== undefined) cell.dataset.whatif = String(copy); else delete cell.dataset.whatif;
    }
  }

  function render(answer) {
    const nodes = answer.nodes || [], unfit = answer.unfit || [];
    const rows = nodes.map((n) => `<tr data-whatif-node="${esc(n.name)}"><td>${esc(n.name)}</td><td>${n.count}</td><td>${esc(n.devices.map((copy) => copy.map((d) => d.split("/").pop()).join(",")).join(" "))}</td></tr>`);
    const reasons = new Map();
    for (const u of unfit) reasons.set(u.reason, [...(reasons.get(u.reason) || []), u.name]);
    const why = [...reasons].sort((a, b) => b[1].length - a[1].length).map(([reason, names]) =>
      `<li><b>${names.length} ${names.length === 1 ? "node" : "nodes"}</b> (${esc(names.slice(0, 5).join(", "))}${names.length > 5 ? ` +${names.length - 5} more` : ""}): ${esc(reason)}</li>`);
    $("whatif-result").innerHTML =
      `<div id="whatif-total" data-total="${answer.total}">Total: ${answer.total} ${answer.total === 1 ? "copy fits" : "copies fit"} on ${nodes.length} ${nodes.length === 1 ? "node" : "nodes"} <span class="swatch whatif"></span></div>` +
      (rows.length ? `<table><tr><th>node</th><th>copies</th><th>devices (per copy)</th></tr>${rows.join("")}</table>` : "") +
      (why.length ? `<h3>Nodes that take none</h3><ul id="whatif-unfit">${why.join("")}</ul>` : "");
  }

  async function ask() {
    const params = new URLSearchParams({ max: $("whatif-max").value || "100" });
    const picked = $("whatif-pick").value;
    if (picked) params.set("from", picked); else params.set("pod", $("whatif-pod").value);
    $("whatif-result").innerHTML = `<p class="muted">Asking the scheduler…</p>`;
    let body;
    try {
      const response = await fetch(`/api/whatif?${params}`);
      body = await response.json();
      if (!response.ok) throw new Error(body.message || `${response.status}`);
    } catch (error) {
      $("whatif-result").innerHTML = `<p class="error">${esc(error.message)}</p>`;
      return;
    }
    whatif.answer = body;
    whatif.devices = new Map();
    let copy = 0;
    for (const node of body.nodes || []) for (const devices of node.devices) { copy += 1; for (const id of devices) whatif.devices.set(id, copy); }
    render(body);
    paint();
  }

  function clear() {
    whatif.answer = null;
    whatif.devices = new Map();
    $("whatif-result").innerHTML = "";
    paint();
  }

  function refreshPick() {
    const select = $("whatif-pick"), current = select.value;
    const keys = (window.dra.pending.items || []).map((p) => `${p.namespace}/${p.name}`);
    select.innerHTML = `<option value="">a pending pod…</option>` + keys.map((k) => `<option value="${esc(k)}"${k === current ? " selected" : ""}>${esc(k)}</option>`).join("");
  }

  $("whatif-ask").addEventListener("click", ask);
  $("whatif-clear").addEventListener("click", clear);
  $("whatif-pick").addEventListener("focus", refreshPick);
  for (const button of document.querySelectorAll(".tabs button")) {
    button.addEventListener("click", () => { $("tab-whatif").hidden = button.dataset.tab !== "whatif"; if (button.dataset.tab === "whatif") refreshPick(); });
  }
  new MutationObserver(paint).observe($("window"), { childList: true });
})();
