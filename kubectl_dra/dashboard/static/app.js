// The device dashboard: follows /api/events (a snapshot, then patches) and draws a virtualised
// device map (only the rows in view exist in the page: per node, each driver's devices under the
// driver's name, each device with its name), pending pods with the scheduler's explanations
// (the devices that keep the chosen pod out are marked on the map), and claims. Plain
// JavaScript, nothing loaded from elsewhere.
"use strict";

const STATES = ["free", "shared", "blocked", "allocated", "tainted", "unhealthy"];
const STATE_TEXT = {
  free: "free", shared: "shared (partly used)", blocked: "blocked (counters used by others)",
  allocated: "allocated", tainted: "tainted", unhealthy: "unhealthy",
};
// A device cell is CELL_W x CELL_H with its name in it; each driver's devices sit under a
// DRIVER_H line with the driver's name. These match app.css (the layout computes row heights).
const CELL_W = 66, CELL_H = 18, GAP = 2, DRIVER_H = 16, LABEL = 150, PAD = 28, OVERSCAN = 400;
const [ID, NODE, DRIVER, DEVICE, STATE, USAGE] = [0, 1, 2, 3, 4, 5];

const dra = window.dra = {
  devices: new Map(), nodes: [], summary: null, claims: { total: 0, items: [] }, pending: { total: 0, items: [], reasons: [] },
  status: { problems: [] }, version: -1, layout: null, filter: { text: "", driver: "", state: "" },
  selectedDevice: "", selectedPod: "", blocking: new Set(), connected: false, firstRenderAt: 0, updates: 0,
};

const $ = (id) => document.getElementById(id);
const esc = (text) => String(text ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// --- the feed ---------------------------------------------------------------------------------

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => setLive("live"));
  source.addEventListener("error", () => {
    setLive("reconnecting");
    // The browser retries a dropped stream by itself, but gives up on an answer that is not a
    // stream (a proxy's error page, a server still starting): then start over.
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
  });
  source.addEventListener("snapshot", (event) => {
    const data = JSON.parse(event.data);
    dra.devices = new Map(Object.entries(data.devices || {}));
    apply(data, true);
  });
  source.addEventListener("patch", (event) => apply(JSON.parse(event.data), false));
}

function setLive(state) {
  dra.connected = state === "live";
  const pill = $("live");
  pill.dataset.live = state;
  pill.textContent = state === "live" ? "live" : "reconnecting…";
  renderProblems();
}

function apply(data, whole) {
  let relayout = whole;
  if (data.devices && !whole) {
    for (const cell of data.devices.upsert || []) {
      const old = dra.devices.get(cell[ID]);
      if (!old || old[NODE] !== cell[NODE]) relayout = true;
      dra.devices.set(cell[ID], cell);
    }
    for (const id of data.devices.remove || []) {
      dra.devices.delete(id);
      relayout = true;
    }
  }
  for (const key of ["nodes", "summary", "claims", "pending", "status"]) {
    if (data[key] !== undefined) dra[key] = data[key];
  }
  if (data.version !== undefined) dra.version = data.version;
  dra.updates += 1;
  if (relayout) dra.layout = null;
  if (data.summary || whole) { renderLegend(); renderDrivers(); }
  if (data.pending || whole) renderPending();
  if (data.claims || whole) renderClaims();
  if (data.status || whole) renderProblems();
  scheduleMap();
  if (!dra.firstRenderAt) requestAnimationFrame(() => { dra.firstRenderAt = performance.now(); });
}

// --- the map ------------------------------------------------------------------------------------

let mapQueued = false;
function scheduleMap() {
  if (mapQueued) return;
  mapQueued = true;
  requestAnimationFrame(() => { mapQueued = false; renderMap(); });
}

function layout() {
  const width = $("map").clientWidth || 800;
  const perLine = Math.max(1, Math.floor((width - LABEL - PAD + GAP) / (CELL_W + GAP)));
  const byNode = new Map();
  const { text, driver, state } = dra.filter;
  for (const cell of dra.devices.values()) {
    if (driver && cell[DRIVER] !== driver) continue;
    if (text && !cell[NODE].includes(text)) continue;
    let list = byNode.get(cell[NODE]);
    if (!list) byNode.set(cell[NODE], list = []);
    list.push(cell[ID]);
  }
  const natural = new Intl.Collator(undefined, { numeric: true });
  const names = [...byNode.keys()].sort((a, b) => (a.startsWith("<") - b.startsWith("<")) || natural.compare(a, b));
  const rows = [], offsets = [];
  let y = 0;
  for (const name of names) {
    const ids = byNode.get(name).sort(natural.compare);
    const shown = state ? ids.filter((id) => dra.devices.get(id)[STATE] === state) : ids;
    if (state && !shown.length) continue;
    const groups = [];  // [driver, ids]: each driver's devices, under its name
    for (const id of shown) {
      const driver = dra.devices.get(id)[DRIVER];
      if (!groups.length || groups[groups.length - 1][0] !== driver) groups.push([driver, []]);
      groups[groups.length - 1][1].push(id);
    }
    const height = groups.reduce((h, [, g]) => h + DRIVER_H + Math.ceil(g.length / perLine) * (CELL_H + GAP), 0) + 4;
    rows.push({ name, ids: shown, groups, height });
    offsets.push(y);
    y += height + 1;
  }
  return { rows, offsets, total: y, perLine, width };
}

function renderMap() {
  const map = $("map");
  if (!dra.layout || dra.layout.width !== map.clientWidth) dra.layout = layout();
  const { rows, offsets, total } = dra.layout;
  $("spacer").style.height = `${total}px`;
  const top = Math.max(0, map.scrollTop - OVERSCAN), bottom = map.scrollTop + map.clientHeight + OVERSCAN;
  let lo = 0, hi = offsets.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (offsets[mid] + rows[mid].height < top) lo = mid + 1; else hi = mid; }
  const notReady = new Set((dra.nodes || []).filter((n) => !n.ready).map((n) => n.name));
  const html = [];
  for (let i = lo; i < rows.length && offsets[i] <= bottom; i++) {
    const row = rows[i];
    const groups = row.groups.map(([driver, ids]) => {
      const cells = ids.map((id) => {
        const cell = dra.devices.get(id);
        const usage = cell[STATE] === "shared" ? ` style="--u:${Math.round(cell[USAGE] * 100)}%"` : "";
        const marks = (id === dra.selectedDevice ? " selected" : "") + (dra.blocking.has(id) ? " blocking" : "");
        return `<div class="cell s-${cell[STATE]}${marks}" data-id="${esc(id)}" data-state="${cell[STATE]}"${usage}>${esc(cell[DEVICE])}</div>`;
      }).join("");
      return `<div class="driver" data-driver="${esc(driver)}"><div class="driver-name">${esc(driver)}</div><div class="cells">${cells}</div></div>`;
    }).join("");
    const ready = notReady.has(row.name) ? " notready" : "";
    html.push(`<div class="row" data-node="${esc(row.name)}" style="top:${offsets[i]}px;height:${row.height}px"><div class="node${ready}" title="${esc(row.name)}">${esc(row.name)}</div><div class="drivers">${groups}</div></div>`);
  }
  $("window").innerHTML = html.join("");
  const devices = rows.reduce((n, r) => n + r.ids.length, 0);
  $("map-count").textContent = `${rows.length} nodes, ${devices} devices${dra.filter.text || dra.filter.driver || dra.filter.state ? " (filtered)" : ""}`;
}

function renderLegend() {
  const counts = (dra.summary && dra.summary.states) || {};
  $("legend").innerHTML = STATES.map((s) =>
    `<span class="key" role="button" data-state="${s}" aria-pressed="${dra.filter.state === s}"><span class="swatch cell s-${s}" style="--u:50%"></span>${STATE_TEXT[s]} <b data-count="${s}">${counts[s] || 0}</b></span>`
  ).join("");
}

function renderDrivers() {
  const select = $("driver");
  const drivers = Object.keys((dra.summary && dra.summary.drivers) || {});
  const current = select.value;
  select.innerHTML = `<option value="">all drivers</option>` + drivers.map((d) => `<option${d === current ? " selected" : ""}>${esc(d)}</option>`).join("");
}

// --- problems and crowds ------------------------------------------------------------------------

function renderProblems() {
  const problems = [...((dra.status && dra.status.problems) || [])];
  if (!dra.connected && dra.version >= 0) problems.unshift("lost the connection to the dashboard server; reconnecting…");
  const box = $("problems");
  box.hidden = !problems.length;
  box.innerHTML = problems.length ? `<b>Something is wrong:</b><ul>${problems.map((p) => `<li>${esc(p)}</li>`).join("")}</ul>` : "";
  $("who").textContent = dra.status && dra.status.user ? `as ${dra.status.user} on ${dra.status.server}` : "";
}

// --- pending pods and explanations -------------------------------------------------------------

function renderPending() {
  const pending = dra.pending;
  $("pending-count").textContent = pending.total;
  const crowd = $("crowd");
  crowd.hidden = pending.total <= pending.items.length;
  if (!crowd.hidden) {
    const listed = pending.items.length === 1 ? "the oldest is listed" : `the ${pending.items.length} oldest are listed`;
    crowd.innerHTML = `<b>${pending.total.toLocaleString("en")} pods are pending</b>; ${listed}. Commonest reasons:<ul>` +
      pending.reasons.map((r) => `<li>${r.count.toLocaleString("en")} × ${esc(r.reason)}</li>`).join("") + "</ul>";
  }
  if (!pending.items.length) { $("pending").innerHTML = `<p class="muted">No pending pods.</p>`; return; }
  $("pending").innerHTML = pending.items.map((p) => {
    const key = `${p.namespace}/${p.name}`;
    return `<div class="item${key === dra.selectedPod ? " selected" : ""}" data-pod="${esc(key)}"><div class="name">${esc(key)}</div><div class="why">${esc(p.reason ? p.reason + ": " : "")}${esc(p.message)}</div></div>`;
  }).join("");
}

let explainTimer = 0;
// One selection at a time: a pending pod or a device; the details tab shows it.
function select(pod, device) {
  if (pod && pod !== dra.selectedPod) dra.blocking = new Set();  // the marks stay while its devices are looked at
  dra.selectedPod = pod;
  dra.selectedDevice = device;
  clearTimeout(explainTimer);
  renderPending();
  scheduleMap();
  showTab("details");
}

async function explain(key) {
  select(key, "");
  const [namespace, name] = key.split("/");
  const details = $("details");
  if (!details.dataset.pod || details.dataset.pod !== key) details.innerHTML = `<p class="muted">Asking the scheduler about ${esc(key)}…</p>`;
  details.dataset.pod = key;
  let body;
  try {
    const response = await fetch(`/api/explain/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`);
    body = await response.json();
  } catch (error) {
    body = { kind: "Status", message: `cannot reach the dashboard server: ${error}` };
  }
  if (dra.selectedPod !== key) return;
  const first = !dra.blocking.size;
  dra.blocking = body.kind === "Status" ? new Set() : blockingDevices(body);
  details.innerHTML = body.kind === "Status" ? `<h2>${esc(key)}</h2><p class="banner problem">${esc(body.message)}</p>` : renderExplanation(body);
  scheduleMap();
  if (first) requestAnimationFrame(showBlocking);
  // Keep it current while it is shown and the pod still waits.
  if (body.kind !== "Status" && !["Bound", "Finished"].includes(body.state)) explainTimer = setTimeout(() => { if (dra.selectedPod === key) explain(key); }, 5000);
}

// The devices the explanation says keep the pod out (taken, tainted, full), on every node named.
function blockingDevices(doc) {
  const ids = new Set();
  const add = (reason) => { for (const id of reason.devices || []) ids.add(id); (reason.alternatives || []).forEach(add); };
  for (const group of doc.groups || []) group.reasons.forEach(add);
  return ids;
}

// Scroll the map to the first marked device when none is in view.
function showBlocking() {
  if (!dra.blocking.size || document.querySelector("#map .cell.blocking")) return;
  const map = $("map");
  if (!dra.layout) dra.layout = layout();
  const index = dra.layout.rows.findIndex((row) => row.ids.some((id) => dra.blocking.has(id)));
  if (index >= 0) { map.scrollTop = dra.layout.offsets[index]; scheduleMap(); }
}

function renderReason(reason) {
  const details = (reason.details || []).map((d) => `<div class="detail">${esc(d)}</div>`).join("");
  const alternatives = (reason.alternatives || []).map((a) => `<div class="detail">– ${esc(a.message)}${(a.details || []).map((d) => `<br>&nbsp;&nbsp;${esc(d)}`).join("")}</div>`).join("");
  return `<div class="reason" data-kind="${esc(reason.kind)}">${esc(reason.message)}${details}${alternatives}</div>`;
}

function renderExplanation(doc) {
  const parts = [`<h2>${esc(doc.pod)} <span class="state ${esc(doc.state)}">${esc(doc.state)}</span></h2>`, `<p class="explanation-message">${esc(doc.message)}</p>`];
  if (doc.schedulerMessage) parts.push(`<p class="muted">The scheduler said: ${esc(doc.schedulerMessage)}</p>`);
  if (doc.note) parts.push(`<p class="muted">${esc(doc.note)}</p>`);
  if ((doc.claims || []).length) {
    parts.push("<h3>Claims</h3>");
    for (const claim of doc.claims) {
      const requests = (claim.requests || []).map((r) => {
        const amount = r.allocationMode === "All" ? "all" : `${r.count} ×`;
        const selectors = (r.selectors || []).map((s) => ` <code>${esc(s)}</code>`).join(" &amp;&amp;");
        return `<div class="detail">request ${esc(r.name)}: ${amount} ${esc(r.deviceClassName)}${selectors}</div>`;
      }).join("");
      parts.push(`<div class="reason"><b>${esc(claim.name)}</b> ${claim.allocated ? "allocated: " + esc((claim.devices || []).join(", ")) : "not allocated"}${requests}</div>`);
    }
  }
  if (doc.nodes && doc.groups) {
    parts.push(`<h3>Nodes: ${doc.nodes.fit} of ${doc.nodes.total} fit</h3>`);
    const marked = blockingDevices(doc).size;
    if (marked) parts.push(`<p class="marked"><span class="swatch mark"></span>${marked} ${marked === 1 ? "device keeps" : "devices keep"} the pod out (taken, tainted or full); marked on the map.</p>`);
    for (const group of doc.groups) {
      const names = (group.nodes || []).join(", ") + ((group.nodes || []).length < group.count ? ", …" : "");
      parts.push(`<div class="group"><div class="count-line">${group.count} ${group.count === 1 ? "node" : "nodes"}${names ? ` <span class="muted">(${esc(names)})</span>` : ""}</div>${group.reasons.map(renderReason).join("")}</div>`);
    }
    if (doc.moreGroups) parts.push(`<p class="muted">… ${doc.moreGroups.nodes} more nodes in ${doc.moreGroups.groups} more groups</p>`);
  }
  return `<div class="explanation" data-state="${esc(doc.state)}">${parts.join("")}</div>`;
}

// --- claims and device details -----------------------------------------------------------------

function renderClaims() {
  $("claims-count").textContent = dra.claims.total;
  const more = dra.claims.total > dra.claims.items.length ? `<p class="muted">${dra.claims.items.length} of ${dra.claims.total} listed.</p>` : "";
  $("claims").innerHTML = more + (dra.claims.items.map((c) =>
    `<div class="item" data-claim="${esc(c.namespace + "/" + c.name)}"><div class="name">${esc(c.namespace)}/${esc(c.name)} <span class="muted">${esc(c.state)}</span></div>` +
    `<div class="why">${c.devices.length ? esc(c.devices.join(", ")) : "no devices yet"}${c.reserved_for.length ? " · for " + esc(c.reserved_for.join(", ")) : ""}${c.node ? " · on " + esc(c.node) : ""}</div></div>`
  ).join("") || `<p class="muted">No claims.</p>`);
}

async function showDevice(id) {
  select("", id);
  const details = $("details");
  details.dataset.pod = "";
  const response = await fetch(`/api/device?id=${encodeURIComponent(id)}`);
  const d = await response.json();
  if (dra.selectedDevice !== id) return;
  if (d.kind === "Status") { details.innerHTML = `<p class="banner problem">${esc(d.message)}</p>`; return; }
  const rows = [
    ["state", STATE_TEXT[d.state] || d.state], ["node", d.node || `(${d.nodes})`], ["driver", d.driver], ["pool", d.pool], ["slice", d.slice],
    ["claims", d.claims.join(", ") || "none"], ["pods", d.pods.join(", ") || "none"], ["admin access", d.admin.join(", ")],
    ["taints", d.taints.join(", ") || "none"], ["health", d.health || "not reported"],
    ...Object.entries(d.capacity).map(([k, v]) => [`capacity ${k}`, v]),
    ...Object.entries(d.attributes).map(([k, v]) => [k, v]),
  ].filter(([, v]) => v !== "");
  details.innerHTML = `<h2 class="device-title">${esc(d.device)}</h2><table class="kv">${rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join("")}</table>`;
}

function showTab(name) {
  for (const button of document.querySelectorAll(".tabs button")) button.setAttribute("aria-selected", String(button.dataset.tab === name));
  for (const tab of ["pending", "claims", "details"]) $(`tab-${tab}`).hidden = tab !== name;
}

// --- wiring -------------------------------------------------------------------------------------

function tooltip(event) {
  const tip = $("tip");
  const target = event.target.closest(".cell");
  if (!target || !target.dataset.id) { tip.hidden = true; return; }
  const cell = dra.devices.get(target.dataset.id);
  if (!cell) { tip.hidden = true; return; }
  const usage = cell[STATE] === "shared" ? ` · ${Math.round(cell[USAGE] * 100)}% used` : "";
  tip.textContent = `${cell[NODE]} · ${cell[DRIVER]}\n${cell[DEVICE]}: ${STATE_TEXT[cell[STATE]] || cell[STATE]}${usage}\n(click for details)`;
  const pane = $("map-pane").getBoundingClientRect();
  tip.style.left = `${Math.min(event.clientX - pane.left + 12, pane.width - 240)}px`;
  tip.style.top = `${event.clientY - pane.top + 14}px`;
  tip.hidden = false;
}

function wire() {
  const map = $("map");
  map.addEventListener("scroll", scheduleMap, { passive: true });
  map.addEventListener("mousemove", tooltip);
  map.addEventListener("mouseleave", () => { $("tip").hidden = true; });
  map.addEventListener("click", (event) => { const cell = event.target.closest(".cell"); if (cell) showDevice(cell.dataset.id); });
  window.addEventListener("resize", () => { dra.layout = null; scheduleMap(); });
  $("filter").addEventListener("input", (event) => { dra.filter.text = event.target.value.trim(); dra.layout = null; scheduleMap(); });
  $("driver").addEventListener("change", (event) => { dra.filter.driver = event.target.value; dra.layout = null; scheduleMap(); });
  $("legend").addEventListener("click", (event) => {
    const key = event.target.closest(".key");
    if (!key) return;
    dra.filter.state = dra.filter.state === key.dataset.state ? "" : key.dataset.state;
    dra.layout = null;
    renderLegend();
    scheduleMap();
  });
  $("pending").addEventListener("click", (event) => { const item = event.target.closest("[data-pod]"); if (item) explain(item.dataset.pod); });
  for (const button of document.querySelectorAll(".tabs button")) button.addEventListener("click", () => showTab(button.dataset.tab));
}

wire();
renderLegend();
connect();
