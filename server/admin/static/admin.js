// Referee admin page: polls /api/state once a second (and the open player's detail), renders
// it, and sends the administrator's actions. Every text from the server passes through esc():
// player names and detection reasons come from clients and must never become markup.
"use strict";

const TOKEN_KEY = "referee-admin-token";
const REVIEWER_KEY = "referee-admin-reviewer";
const POLL_MS = 1000;
const LEVELS = ["log", "monitor", "kick", "temp_ban_review", "permanent_ban"];

let selectedSlot = null;
let pollTimer = null;
const rendered = {};  // section id -> last JSON rendered (re-render only on change)
// What the reviewer has typed or chosen but not yet sent, by field key. A pending item keeps
// gathering evidence while a reviewer writes, so its section re-renders under the cursor;
// these drafts are written back after every render so no keystroke is lost.
const drafts = new Map();

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmt(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    return Math.abs(value) >= 100 ? value.toFixed(0) : Number(value.toPrecision(4)).toString();
  }
  return String(value);
}

function levelBadge(level, extra) {
  if (!level) return '<span class="badge">–</span>';
  return `<span class="badge lv-${esc(level)}">${esc(level.replace(/_/g, " "))}${extra ? " " + esc(extra) : ""}</span>`;
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function reviewer() { return sessionStorage.getItem(REVIEWER_KEY) || "admin"; }

async function api(path, options = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`/api${path}`, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    cache: "no-store",
  });
  if (response.status === 401) {
    logout("The token was refused.");
    throw new Error("unauthorized");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.detail ? JSON.stringify(data.detail) : `HTTP ${response.status}`);
  return data;
}

// --- login -----------------------------------------------------------------------------------

function showLogin(message) {
  document.getElementById("login").hidden = false;
  document.getElementById("main").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("login-error").textContent = message || "";
}

function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (pollTimer) clearInterval(pollTimer);
  pollTimer = null;
  showLogin(message);
}

async function start() {
  document.getElementById("login").hidden = true;
  document.getElementById("main").hidden = false;
  document.getElementById("logout").hidden = false;
  document.getElementById("reviewer-name").textContent = reviewer();
  await poll();
  if (!pollTimer && token()) pollTimer = setInterval(poll, POLL_MS);
}

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
  sessionStorage.setItem(REVIEWER_KEY, document.getElementById("reviewer").value.trim() || "admin");
  document.getElementById("token").value = "";
  start().catch(() => {});
});
document.getElementById("logout").addEventListener("click", () => logout(""));

// --- polling and rendering -------------------------------------------------------------------

async function poll() {
  let state;
  try {
    state = await api("/state");
  } catch (error) {
    document.getElementById("server-line").textContent = `no answer: ${error.message}`;
    return;
  }
  renderOverview(state.overview);
  renderIfChanged("players", state.players, renderPlayers);
  renderIfChanged("review", state.review, renderReview);
  renderIfChanged("appeals", state.appeals, renderAppeals);
  if (selectedSlot !== null) {
    try {
      renderIfChanged("player", await api(`/players/${selectedSlot}`), renderPlayer);
    } catch (error) {
      renderIfChanged("player", { gone: selectedSlot, error: error.message }, renderPlayerGone);
    }
  }
  try {
    renderIfChanged("feed", await api("/detections?limit=12"), renderFeed);
  } catch (error) { /* the next poll tries again */ }
  document.getElementById("last-update").textContent = `updated ${new Date().toLocaleTimeString()}`;
}

function renderIfChanged(id, data, render) {
  const json = JSON.stringify(data);
  if (rendered[id] === json) return;
  rendered[id] = json;
  render(data);
}

function renderOverview(o) {
  document.getElementById("server-line").textContent =
    `${o.map} · ${o.tick_rate_hz} Hz · tick ${o.tick} · ${o.time_s.toFixed(0)} s · ${o.players} players · ` +
    `tick p50 ${o.tick_p50_ms.toFixed(2)} ms, p99 ${o.tick_p99_ms.toFixed(2)} ms of ${o.tick_budget_ms.toFixed(2)} ms`;
  document.getElementById("player-count").textContent = `${o.players} connected`;
  document.getElementById("review-count").textContent = `${o.review_pending} pending`;
  document.getElementById("appeal-count").textContent = `${o.appeals_pending} pending`;
}

function renderPlayers(players) {
  const body = document.getElementById("players-body");
  if (!players.length) {
    body.innerHTML = '<tr><td colspan="11" class="muted">No players connected.</td></tr>';
    return;
  }
  body.innerHTML = players.map((p) => {
    const sanction = p.sanction ? levelBadge(p.sanction.recommended, p.sanction.score.toFixed(2)) : "–";
    const review = p.review_item ? ` <span class="badge st-pending">review #${p.review_item}</span>` : "";
    return `<tr class="player${p.slot === selectedSlot ? " selected" : ""}" data-slot="${p.slot}" data-testid="player-row">
      <td class="num">${p.slot}</td><td>${esc(p.name)}</td>
      <td class="num">${fmt(p.rtt_ms)} ms</td><td class="num">${fmt(p.jitter_ms)} ms</td>
      <td class="num">${(p.loss * 100).toFixed(1)}%</td><td class="num">${p.score}</td><td class="num">${p.deaths}</td>
      <td class="num">${p.accuracy === null ? "–" : (p.accuracy * 100).toFixed(0) + "%"}</td>
      <td class="num">${p.detections_total}</td><td>${sanction}${review}</td>
      <td><button class="bad kick" data-slot="${p.slot}" data-name="${esc(p.name)}">Kick</button></td></tr>`;
  }).join("");
}

document.getElementById("players-body").addEventListener("click", async (event) => {
  const kick = event.target.closest("button.kick");
  if (kick) {
    event.stopPropagation();
    const slot = Number(kick.dataset.slot);
    const reason = prompt(`Kick ${kick.dataset.name}? Reason:`, "kicked by an admin");
    if (reason === null) return;
    await act(`/players/${slot}/kick`, { reason });
    return;
  }
  const row = event.target.closest("tr.player");
  if (!row) return;
  selectedSlot = Number(row.dataset.slot);
  delete rendered.player;
  delete rendered.players;
  document.getElementById("player-panel").hidden = false;
  poll();
});

function evidenceList(pairs) {
  if (!pairs || !pairs.length) return "";
  return `<dl class="kv">${pairs.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(fmt(v))}</dd>`).join("")}</dl>`;
}

function detectionCard(d) {
  const state = d.dismissed ? ' <span class="badge st-dismissed">dismissed</span>' : "";
  return `<div class="det${d.dismissed ? " dismissed" : ""}" data-testid="detection">
    <div class="det-head"><span class="det-name">${esc(d.name)}</span><span class="det-reason">${esc(d.reason)}</span>
      <span class="muted">severity ${fmt(d.severity)}${d.time_s !== undefined ? ` · t=${fmt(d.time_s)} s` : ""}</span>${state}</div>
    <div class="det-expl">${esc(d.explanation)}</div>
    ${evidenceList(d.evidence)}</div>`;
}

function familyBars(sanction) {
  if (!sanction || !sanction.families.length) return '<p class="muted">No evidence counts now.</p>';
  return sanction.families.map((f) => `<div class="fam" data-testid="family">
      <span>${esc(f.family)}</span>
      <div class="bar"><div style="width:${Math.round((f.contribution || 0) * 100)}%"></div></div>
      <span class="muted">${fmt(f.contribution)} (${f.evidence} counted${f.dismissed ? `, ${f.dismissed} dismissed` : ""})</span>
    </div>`).join("");
}

function renderPlayer(p) {
  const s = p.sanction_detail;
  const flags = p.flags;
  const detectorBoxes = flags.detectors.map((d) =>
    `<label><input type="checkbox" class="det-flag" data-detector="${esc(d.detector)}" ${d.enabled ? "checked" : ""}>${esc(d.detector)}</label>`).join("");
  const bust = flags.bustaim ? flags.bustaim.checks.map((c) =>
    `<label><input type="checkbox" class="bust-flag" data-bit="${c.bit}" ${c.on ? "checked" : ""}>${esc(c.name.replace(/_/g, " "))}</label>`).join("") : "";
  const scores = Object.entries(p.scores).filter(([, v]) => v !== null && v > 0)
    .map(([k, v]) => [k, v]);
  document.getElementById("player-detail").innerHTML = `
    <div class="item-head"><h2>#${p.slot} ${esc(p.name)}</h2>
      <span class="muted">${esc(p.address)} · ping ${fmt(p.rtt_ms)} ms · loss ${(p.loss * 100).toFixed(1)}% ·
      ${p.kills}/${p.deaths} K/D · ${p.shots} shots, ${p.hits} hits</span>
      <button class="ghost" id="close-player">Close</button></div>
    <div class="detail-grid">
      <div>
        <h3>Detections <small>(newest first, ${p.recent_detections.length} kept)</small></h3>
        ${p.recent_detections.length ? p.recent_detections.map(detectionCard).join("") : '<p class="muted">None.</p>'}
      </div>
      <div>
        <h3>Sanction</h3>
        ${s ? `<p>${levelBadge(s.recommended)} recommended, ${levelBadge(s.applied)} applied automatically ·
          score <strong>${fmt(s.score)}</strong> (raw ${fmt(s.raw_score)} × account ${fmt(s.account_factor)})
          ${s.needs_review ? ' · <span class="badge st-pending">needs review</span>' : ""}</p>
          <p class="muted">Each evidence family counts at most 0.6; families combine so that no single detector can ban.</p>
          ${familyBars(s)}` : '<p class="muted">No sanction policy.</p>'}
        <h3>Detectors for this player</h3><div class="flags">${detectorBoxes}</div>
        ${flags.bustaim ? `<h3>BustAim checks <small>(flags ${flags.bustaim.flags})</small></h3><div class="flags">${bust}</div>` : ""}
        <h3>Detector scores <small>(1.0 = alarm threshold)</small></h3>
        ${scores.length ? evidenceList(scores) : '<p class="muted">All zero.</p>'}
      </div>
    </div>`;
}

function renderPlayerGone(info) {
  document.getElementById("player-detail").innerHTML =
    `<p class="muted">Slot ${esc(info.gone)} is no longer connected.</p><button class="ghost" id="close-player">Close</button>`;
}

document.getElementById("player-detail").addEventListener("click", (event) => {
  if (event.target.id === "close-player") {
    selectedSlot = null;
    delete rendered.players;
    document.getElementById("player-panel").hidden = true;
    poll();
  }
});

document.getElementById("player-detail").addEventListener("change", async (event) => {
  const box = event.target;
  if (box.classList.contains("det-flag")) {
    await act(`/players/${selectedSlot}/detectors/${encodeURIComponent(box.dataset.detector)}`, { enabled: box.checked }, "PUT");
  } else if (box.classList.contains("bust-flag")) {
    let flags = 0;
    document.querySelectorAll(".bust-flag").forEach((b) => { if (b.checked) flags |= Number(b.dataset.bit); });
    await act(`/players/${selectedSlot}/bustaim`, { flags }, "PUT");
  }
});

function reviewItem(item, decided) {
  const player = item.slot !== null ? `#${item.slot} ${esc(item.player)}` : `${esc(item.player)} <span class="muted">(left)</span>`;
  const evidence = item.evidence.length
    ? `<details ${decided ? "" : "open"}><summary>${item.evidence_count} ${item.evidence_count === 1 ? "piece" : "pieces"} of evidence${item.evidence.length < item.evidence_count ? ` (newest ${item.evidence.length} shown)` : ""}</summary>
       ${item.evidence.map(detectionCard).join("")}</details>` : "";
  const outcome = decided
    ? `<div class="muted">${esc(item.status)} by ${esc(item.reviewer)}${item.confirmed_level ? ` at ${esc(item.confirmed_level)}` : ""}${item.note ? ": " + esc(item.note) : ""}</div>`
    : `<div class="actions"><input class="note" data-item="${item.id}" placeholder="note (why)">
         <select class="level" data-item="${item.id}">${LEVELS.map((l) => `<option value="${l}" ${l === item.recommended ? "selected" : ""}>${l.replace(/_/g, " ")}</option>`).join("")}</select>
         <button class="bad confirm" data-item="${item.id}" data-testid="confirm">Confirm</button>
         <button class="ok dismiss" data-item="${item.id}" data-testid="dismiss">Dismiss</button></div>`;
  return `<div class="item" data-testid="review-item" data-item="${item.id}">
    <div class="item-head"><strong>#${item.id}</strong> ${player} ${levelBadge(item.recommended)}
      <span class="badge st-${esc(item.status)}">${esc(item.status)}</span><span class="muted">score ${fmt(item.score)}</span></div>
    <ul>${item.reasons.map((r) => `<li>${esc(r)}</li>`).join("")}</ul>${evidence}${outcome}</div>`;
}

function draftKey(field) {
  if (field.dataset.item !== undefined) return `item:${field.dataset.item}:${field.className}`;
  if (field.dataset.appeal !== undefined) return `appeal:${field.dataset.appeal}:${field.className}`;
  return null;
}

function rememberDraft(event) {
  const key = draftKey(event.target);
  if (key) drafts.set(key, event.target.value);
}

// Replaces a section's markup and puts back the reviewer's unsent text, choices, focus and caret.
function replaceKeepingDrafts(box, html) {
  const active = document.activeElement && box.contains(document.activeElement) ? document.activeElement : null;
  const focusKey = active ? draftKey(active) : null;
  const caret = active && typeof active.selectionStart === "number" ? [active.selectionStart, active.selectionEnd] : null;
  box.innerHTML = html;
  box.querySelectorAll("input, select").forEach((field) => {
    const key = draftKey(field);
    if (key && drafts.has(key)) field.value = drafts.get(key);
    if (key && key === focusKey) {
      field.focus();
      if (caret) field.setSelectionRange(caret[0], caret[1]);
    }
  });
}

function forgetDrafts(owner) {
  [...drafts.keys()].filter((k) => k.startsWith(`${owner}:`)).forEach((k) => drafts.delete(k));
}

["review-pending", "appeals"].forEach((id) => {
  const box = document.getElementById(id);
  box.addEventListener("input", rememberDraft);
  box.addEventListener("change", rememberDraft);
});

function renderReview(review) {
  replaceKeepingDrafts(document.getElementById("review-pending"),
    review.pending.length ? review.pending.map((i) => reviewItem(i, false)).join("") : '<p class="muted">Nothing to review.</p>');
  document.getElementById("review-decided").innerHTML =
    review.decided.length ? review.decided.map((i) => reviewItem(i, true)).join("") : '<p class="muted">None yet.</p>';
}

document.getElementById("review-pending").addEventListener("click", async (event) => {
  const button = event.target.closest("button.confirm, button.dismiss");
  if (!button) return;
  const id = button.dataset.item;
  const note = document.querySelector(`input.note[data-item="${id}"]`).value;
  if (button.classList.contains("dismiss")) {
    await act(`/review/${id}/dismiss`, { reviewer: reviewer(), note });
  } else {
    const level = document.querySelector(`select.level[data-item="${id}"]`).value;
    await act(`/review/${id}/confirm`, { reviewer: reviewer(), note, level });
  }
  forgetDrafts(`item:${id}`);
});

function renderAppeals(appeals) {
  const box = document.getElementById("appeals");
  if (!appeals.length) { box.innerHTML = '<p class="muted">No appeals.</p>'; return; }
  replaceKeepingDrafts(box, appeals.map((a) => `<div class="item" data-testid="appeal">
    <div class="item-head"><strong>#${a.id}</strong> ${esc(a.player)} <span class="muted">against review #${a.review_item}</span>
      <span class="badge st-${esc(a.status)}">${esc(a.status)}</span></div>
    <p>${esc(a.text) || '<span class="muted">(no statement)</span>'}</p>
    ${a.status === "pending" ? `<div class="actions"><input class="appeal-note" data-appeal="${a.id}" placeholder="note">
      <button class="ok grant" data-appeal="${a.id}">Grant (overturn)</button>
      <button class="bad reject" data-appeal="${a.id}">Reject</button></div>`
      : `<div class="muted">${esc(a.status)} by ${esc(a.reviewer)}${a.note ? ": " + esc(a.note) : ""}</div>`}</div>`).join(""));
}

document.getElementById("appeals").addEventListener("click", async (event) => {
  const button = event.target.closest("button.grant, button.reject");
  if (!button) return;
  const id = button.dataset.appeal;
  const note = document.querySelector(`input.appeal-note[data-appeal="${id}"]`).value;
  await act(`/appeals/${id}/decide`, { reviewer: reviewer(), note, overturn: button.classList.contains("grant") });
  forgetDrafts(`appeal:${id}`);
});

function renderFeed(detections) {
  document.getElementById("feed").innerHTML = detections.length
    ? detections.map((d) => `<div class="muted">#${d.slot} <strong>${esc(d.player)}</strong>: <span class="det-name">${esc(d.name)}</span> — ${esc(d.explanation)}</div>`).join("")
    : '<p class="muted">None yet.</p>';
}

async function act(path, body, method = "POST") {
  try {
    await api(path, { method, body });
  } catch (error) {
    alert(`Failed: ${error.message}`);
  }
  Object.keys(rendered).forEach((k) => delete rendered[k]);
  await poll();
}

// --- entry: ?token= once (then removed from the address bar), else sessionStorage, else the form.
(function init() {
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    sessionStorage.setItem(TOKEN_KEY, params.get("token"));
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + (rest ? `?${rest}` : ""));
  }
  if (token()) start().catch(() => {});
  else showLogin("");
})();
