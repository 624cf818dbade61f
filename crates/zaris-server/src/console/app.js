// The Zaris console: plain JavaScript over the JSON API (/api/v1/...). Every value from the
// cluster goes into the page as text (textContent), never as HTML.
"use strict";

const PAGE_SIZE = 50;
const REFRESH_MS = { cluster: 2000, leases: 5000, lease: 2000, locks: 2000, presence: 2000 };

let refreshTimer = null;
let renderToken = 0;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "onclick" || name === "onsubmit") node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(headers, rows, emptyText) {
  if (rows.length === 0) return el("p", { class: "empty" }, emptyText);
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map(([label, cls]) => el("th", { class: cls }, label)))),
    el("tbody", {}, rows));
}

function leaseLink(id) {
  return id ? el("a", { href: `#/leases/${id}` }, String(id)) : "—";
}

function duration(ms) {
  if (ms >= 60000) return `${Math.floor(ms / 60000)}m ${Math.floor((ms % 60000) / 1000)}s`;
  if (ms >= 10000) return `${Math.floor(ms / 1000)}s`;
  return `${(ms / 1000).toFixed(1)}s`;
}

// A remaining-TTL cell that counts down between refreshes.
function countdown(remainingMs, ttlMs) {
  const cell = el("td", { class: "num countdown", "data-deadline": Date.now() + remainingMs, "data-ttl": ttlMs });
  tick(cell);
  return cell;
}

function tick(cell) {
  const left = Math.max(0, Number(cell.dataset.deadline) - Date.now());
  cell.textContent = duration(left);
  cell.classList.toggle("low", left < Number(cell.dataset.ttl) / 3);
}

setInterval(() => document.querySelectorAll(".countdown").forEach(tick), 200);

class ApiError extends Error {
  constructor(status, error) {
    super(`${status} ${error.code}: ${error.message}`);
    this.status = status;
  }
}

async function api(path, method) {
  // Actions carry X-Zaris-Action: the server refuses a POST without it (cross-site requests).
  const headers = method === "POST" ? { "X-Zaris-Action": "1" } : {};
  const token = sessionStorage.getItem("zaris-token");
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`/api/v1/${path}`, { method: method || "GET", headers });
  const body = await response.json();
  if (!response.ok) throw new ApiError(response.status, body.error || { code: "?", message: "" });
  document.getElementById("answered").textContent =
    `answered by node ${body.answered_by} at revision ${body.revision} (term ${body.raft_term})`;
  return body;
}

function params() {
  const [path, query] = (location.hash.slice(1) || "/cluster").split("?");
  return { parts: path.split("/").filter(Boolean), query: new URLSearchParams(query || "") };
}

// ---- pages ----

// A small line chart of the last five minutes (150 samples, newest at the right edge).
const SAMPLE_SLOTS = 150;

function chart(title, samples, field, unit) {
  const values = samples.map((sample) => sample[field]);
  const latest = values.length ? values[values.length - 1] : null;
  const canvas = el("canvas", { width: 300, height: 70, "data-series": field });
  const context = canvas.getContext("2d");
  const present = values.filter((value) => value !== null);
  const top = Math.max(1, ...present);
  context.strokeStyle = "#d8dde2";
  context.beginPath(); context.moveTo(0, 69.5); context.lineTo(300, 69.5); context.stroke();
  context.strokeStyle = "#1f6feb";
  context.lineWidth = 1.5;
  context.beginPath();
  let drawing = false;
  values.forEach((value, i) => {
    if (value === null) { drawing = false; return; }
    const x = 300 - (values.length - 1 - i) * (300 / (SAMPLE_SLOTS - 1));
    const y = 67 - (value / top) * 62;
    if (drawing) context.lineTo(x, y); else context.moveTo(x, y);
    drawing = true;
  });
  context.stroke();
  if (latest !== null) {
    context.fillStyle = "#1f6feb";
    context.fillRect(297, 67 - (latest / top) * 62 - 2, 3, 4);
  }
  const shown = (value) => (value >= 100 ? value.toFixed(0) : value.toFixed(1));
  return el("div", { class: "chart" },
    el("div", { class: "chart-title" }, title, " ",
      el("strong", { class: "chart-latest", "data-series": field }, latest === null ? "—" : `${shown(latest)} ${unit}`),
      el("span", { class: "empty" }, ` (max ${shown(top)})`)),
    canvas);
}

async function clusterPage() {
  const [cluster, node, stats] = await Promise.all([api("cluster"), api("node"), api("stats")]);
  const rows = cluster.members.map((m) => el("tr", { class: m.role === "leader" ? "leader" : null, "data-member": m.id },
    el("td", {}, String(m.id), " ", m.role === "leader" ? el("span", { class: "badge leader" }, "leader") : null),
    el("td", {}, m.role), el("td", {}, el("code", {}, m.address)), el("td", {}, m.voter ? "voter" : "learner"),
    el("td", { class: "num" }, m.matched_index), el("td", { class: "num" }, m.lag),
    el("td", { class: "num" }, m.last_contact_ms === null ? "never" : `${m.last_contact_ms} ms ago`)));
  return [
    el("h1", {}, "Cluster"),
    el("dl", {},
      el("dt", {}, "leader"), el("dd", { id: "leader-id" }, `node ${cluster.leader_id}`),
      el("dt", {}, "term"), el("dd", {}, cluster.term),
      el("dt", {}, "commit / applied index"), el("dd", {}, `${cluster.commit_index} / ${cluster.applied_index}`),
      el("dt", {}, "this console's node"), el("dd", {}, `node ${node.id} (${node.role}, applied ${node.applied_index})`)),
    el("h2", {}, `The last five minutes (leader's view, every ${stats.interval_ms / 1000} s)`),
    el("div", { class: "charts" },
      chart("grants", stats.samples, "grants_per_s", "/s"),
      chart("renewals", stats.samples, "renewals_per_s", "/s"),
      chart("expiries", stats.samples, "expiries_per_s", "/s"),
      chart("revocations", stats.samples, "revocations_per_s", "/s"),
      chart("commit latency", stats.samples, "commit_ms", "ms")),
    el("h2", {}, "Members"),
    table([["id"], ["role"], ["client address"], ["kind"], ["matched index", "num"], ["lag", "num"], ["last contact", "num"]],
      rows, "no members"),
  ];
}

async function leasesPage({ query }) {
  const after = query.get("after") || "0";
  const page = await api(`leases?after=${encodeURIComponent(after)}&limit=${PAGE_SIZE}`);
  const search = el("form", { class: "tools", onsubmit: (event) => {
    event.preventDefault();
    const id = event.target.elements.id.value.trim();
    if (id) location.hash = `#/leases/${encodeURIComponent(id)}`;
  } }, el("input", { name: "id", placeholder: "lease id", inputmode: "numeric" }), el("button", { type: "submit" }, "Open"));
  const rows = page.leases.map((l) => el("tr", { "data-lease": l.id },
    el("td", {}, leaseLink(l.id)), el("td", { class: "num" }, duration(l.ttl_ms)), countdown(l.remaining_ttl_ms, l.ttl_ms),
    el("td", { class: "num" }, l.key_count), el("td", { class: "num" }, l.lock_count),
    el("td", { class: "num" }, l.granted_revision), el("td", { class: "num" }, l.renewed_revision), el("td", {}, l.owner || "—")));
  const last = page.leases.length ? page.leases[page.leases.length - 1].id : null;
  return [
    el("h1", {}, "Leases"), search,
    table([["id"], ["ttl", "num"], ["remaining", "num"], ["keys", "num"], ["locks", "num"], ["granted at", "num"], ["renewed at", "num"], ["owner"]],
      rows, "no leases"),
    el("p", { class: "tools" },
      after !== "0" ? el("a", { href: "#/leases" }, "« first page") : null,
      page.more && last ? el("a", { href: `#/leases?after=${last}`, id: "next-page" }, "next page »") : null),
  ];
}

async function leasePage({ parts }) {
  const id = parts[1];
  const lease = await api(`leases/${encodeURIComponent(id)}`);
  const revoke = el("button", { class: "danger", id: "revoke", onclick: async () => {
    if (!confirm(`Revoke lease ${lease.id}? Its ${lease.keys.length} key(s) are deleted and its locks pass on.`)) return;
    try {
      const result = await api(`leases/${lease.id}/revoke`, "POST");
      showProblem(result.result === "revoked" ? "" : `lease ${lease.id}: ${result.result}`);
      location.hash = "#/leases";
    } catch (error) {
      showProblem(error.message);
    }
  } }, "Revoke…");
  const lockLinks = (names) => names.length
    ? names.map((name) => el("div", {}, el("a", { href: `#/locks?prefix=${encodeURIComponent(name)}` }, name)))
    : "none";
  return [
    el("h1", {}, `Lease ${lease.id}`),
    el("dl", {},
      el("dt", {}, "remaining"), countdownInline(lease.remaining_ttl_ms, lease.ttl_ms),
      el("dt", {}, "ttl"), el("dd", {}, duration(lease.ttl_ms)),
      el("dt", {}, "granted / last renewed at revision"), el("dd", {}, `${lease.granted_revision} / ${lease.renewed_revision}`),
      el("dt", {}, "owner"), el("dd", {}, lease.owner || "anonymous"),
      el("dt", {}, "locks held"), el("dd", { id: "locks-held" }, lockLinks(lease.locks_held)),
      el("dt", {}, "waiting for"), el("dd", {}, lockLinks(lease.locks_waiting))),
    el("h2", {}, `Bound keys (${lease.keys.length}${lease.keys_truncated ? ", list cut" : ""})`),
    lease.keys.length ? el("ul", { id: "keys" }, lease.keys.map((key) => el("li", {}, el("code", {}, key)))) : el("p", { class: "empty" }, "no keys"),
    el("p", {}, revoke),
  ];
}

function countdownInline(remainingMs, ttlMs) {
  const cell = el("dd", { class: "countdown", id: "remaining", "data-deadline": Date.now() + remainingMs, "data-ttl": ttlMs });
  tick(cell);
  return cell;
}

async function locksPage({ query }) {
  const prefix = query.get("prefix") || "";
  const after = query.get("after") || "";
  const page = await api(`locks?prefix=${encodeURIComponent(prefix)}&after=${encodeURIComponent(after)}&limit=${PAGE_SIZE}`);
  const filter = el("form", { class: "tools", onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/locks?prefix=${encodeURIComponent(event.target.elements.prefix.value)}`;
  } }, el("input", { name: "prefix", placeholder: "name prefix", value: prefix }), el("button", { type: "submit" }, "Filter"));
  const rows = page.locks.map((lock) => el("tr", { "data-lock": lock.name },
    el("td", {}, el("code", {}, lock.name)), el("td", { class: "holder" }, leaseLink(lock.holder_lease)),
    el("td", { class: "num" }, lock.token),
    el("td", { class: "waiters" }, lock.waiters.length ? lock.waiters.map((w, i) => [i ? " → " : "", leaseLink(w)]) : "none",
      lock.waiter_count > lock.waiters.length ? ` (+${lock.waiter_count - lock.waiters.length} more)` : "")));
  const last = page.locks.length ? page.locks[page.locks.length - 1].name : null;
  return [
    el("h1", {}, "Locks and elections"), filter,
    table([["name"], ["holder lease"], ["fencing token (held since revision)", "num"], ["waiting, next first"]], rows, "no locks held"),
    page.more && last ? el("p", {}, el("a", { href: `#/locks?prefix=${encodeURIComponent(prefix)}&after=${encodeURIComponent(last)}` }, "next page »")) : null,
  ];
}

async function presencePage({ query }) {
  const group = query.get("group") || "";
  const form = el("form", { class: "tools", onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/presence?group=${encodeURIComponent(event.target.elements.group.value.trim())}`;
  } }, el("input", { name: "group", placeholder: "group", value: group }), el("button", { type: "submit" }, "Show"));
  if (!group) return [el("h1", {}, "Presence groups"), form, el("p", { class: "empty" }, "Name a group (members are keys presence/GROUP/MEMBER).")];
  const members = await api(`presence/${encodeURIComponent(group)}?limit=${PAGE_SIZE}`);
  const rows = members.members.map((m) => el("tr", { "data-member": m.member },
    el("td", {}, m.member), el("td", {}, el("code", {}, m.value)), el("td", {}, leaseLink(m.lease)),
    el("td", { class: "num" }, m.joined_revision), el("td", { class: "num" }, m.updated_revision)));
  return [
    el("h1", {}, `Presence: ${group}`), form,
    table([["member"], ["metadata"], ["lease"], ["joined at revision", "num"], ["updated at revision", "num"]], rows, "no members"),
  ];
}

// The event feed: a fetch stream (EventSource cannot send the Authorization header), kept open
// while the page shows, newest first, at most FEED_ROWS rows.
const FEED_ROWS = 200;
let feed = null;

function closeFeed() {
  if (feed) feed.abort();
  feed = null;
}

async function eventsPage({ query }) {
  const prefix = query.get("prefix") || "";
  const filter = el("form", { class: "tools", onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/events?prefix=${encodeURIComponent(event.target.elements.prefix.value)}`;
  } }, el("input", { name: "prefix", placeholder: "key prefix", value: prefix }), el("button", { type: "submit" }, "Filter"),
  el("span", { id: "feed-state", class: "empty" }, "connecting…"));
  const body = el("tbody", { id: "events" });
  const events = el("table", {},
    el("thead", {}, el("tr", {}, ["revision", "type", "key", "value", "lease"].map((h) => el("th", {}, h)))), body);
  openFeed(prefix, body);
  return [el("h1", {}, "Events"), filter, events];
}

async function openFeed(prefix, body) {
  closeFeed();
  const controller = new AbortController();
  feed = controller;
  const state = (text) => { const node = document.getElementById("feed-state"); if (node) node.textContent = text; };
  const headers = {};
  const token = sessionStorage.getItem("zaris-token");
  if (token) headers.Authorization = `Bearer ${token}`;
  try {
    const response = await fetch(`/api/v1/events?prefix=${encodeURIComponent(prefix)}`, { headers, signal: controller.signal });
    if (!response.ok) {
      const error = (await response.json()).error || {};
      state(`${response.status} ${error.code}: ${error.message}`);
      return;
    }
    state("live");
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const kind = (message.match(/^event: (.*)$/m) || [])[1];
        const data = message.split("\n").filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n");
        if (!data) continue;
        const change = JSON.parse(data);
        if (kind === "gap") { state(change.message); continue; }
        body.prepend(el("tr", { class: `event ${change.type}` },
          el("td", { class: "num" }, change.revision), el("td", {}, el("span", { class: "badge" }, change.type)),
          el("td", {}, el("code", {}, change.key)), el("td", {}, change.value === null ? "" : el("code", {}, change.value)),
          el("td", {}, leaseLink(change.lease))));
        while (body.rows.length > FEED_ROWS) body.deleteRow(body.rows.length - 1);
      }
    }
    state("ended: reopen the page");
  } catch (error) {
    if (controller.signal.aborted) return;
    state(`disconnected: ${error.message}`);
  }
}

const PAGES = { cluster: clusterPage, leases: leasesPage, locks: locksPage, presence: presencePage, events: eventsPage };

function showProblem(text) {
  document.getElementById("problem").textContent = text;
}

async function render(refresh) {
  const current = ++renderToken;
  clearTimeout(refreshTimer);
  const where = params();
  where.refresh = refresh === true;
  let name = where.parts[0] || "cluster";
  let page = PAGES[name];
  if (name === "leases" && where.parts[1]) { page = leasePage; name = "lease"; }
  if (!page) { location.hash = "#/cluster"; return; }
  if (name !== "events") closeFeed();
  else if (where.refresh) return;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("current", a.dataset.page === where.parts[0]));
  const typing = document.activeElement && document.activeElement.closest("#page form");
  try {
    if (typing && refreshTimer !== null && where.refresh) {
      // A refresh would wipe what is being typed: wait for the next one.
    } else {
      const content = await page(where);
      if (current !== renderToken) return;
      document.getElementById("page").replaceChildren(...content.filter(Boolean));
    }
    showProblem("");
  } catch (error) {
    if (current !== renderToken) return;
    showProblem(error.message);
  }
  if (name !== "events") refreshTimer = setTimeout(() => render(true), REFRESH_MS[name] || 5000);
}

window.addEventListener("hashchange", () => render(false));
document.getElementById("token-form").onsubmit = (event) => {
  event.preventDefault();
  const token = document.getElementById("token").value.trim();
  if (token) sessionStorage.setItem("zaris-token", token); else sessionStorage.removeItem("zaris-token");
  render(false);
};
render(false);
