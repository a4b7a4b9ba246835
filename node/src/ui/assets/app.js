// cairn's browse page. Plain JavaScript, no dependencies, nothing fetched
// from anywhere but this server. Text from the memory is only ever put in
// the page as text nodes (never as HTML).
"use strict";

const main = document.getElementById("main");
let overview = null;
let routeSeq = 0;

// ---------- small helpers ----------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return e;
}

const SVG_NS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") e.textContent = v;
    else e.setAttribute(k, String(v));
  }
  for (const kid of kids.flat(Infinity)) if (kid) e.append(kid);
  return e;
}

async function api(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== "") qs.set(k, v);
  }
  const url = "/api/" + path + (qs.toString() ? "?" + qs : "");
  const r = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  if (!r.ok) {
    const msg = body && body.error ? body.error : r.status + " " + r.statusText;
    throw new Error(msg);
  }
  return body;
}

function relTime(ms) {
  if (ms === null || ms === undefined) return "time unknown";
  const d = Date.now() - ms;
  const s = Math.round(d / 1000);
  if (s < 0) return "just now";
  if (s < 60) return s + "s ago";
  const m = Math.round(s / 60);
  if (m < 60) return m + " min ago";
  const h = Math.round(m / 60);
  if (h < 36) return h + " h ago";
  const days = Math.round(h / 24);
  if (days < 60) return days + " days ago";
  const months = Math.round(days / 30.4);
  if (months < 24) return months + " months ago";
  return Math.round(days / 365) + " years ago";
}

function absTime(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toLocaleString();
}

function timeEl(ms) {
  return el("time", { title: absTime(ms), datetime: ms ? new Date(ms).toISOString() : null, text: relTime(ms) });
}

function shortId(id) {
  return id ? id.slice(0, 12) : "";
}

// Text with every occurrence of `words` (lowercase) wrapped in <mark>.
function highlighted(text, words) {
  const frag = document.createDocumentFragment();
  const ws = (words || []).filter((w) => w && w.length > 0);
  if (!ws.length || !text) {
    frag.append(text || "");
    return frag;
  }
  const lower = text.toLowerCase();
  let i = 0;
  let plainFrom = 0;
  while (i < text.length) {
    let hit = 0;
    for (const w of ws) {
      if (lower.startsWith(w, i)) { hit = w.length; break; }
    }
    if (hit) {
      if (plainFrom < i) frag.append(text.slice(plainFrom, i));
      frag.append(el("mark", { text: text.slice(i, i + hit) }));
      i += hit;
      plainFrom = i;
    } else {
      i += 1;
    }
  }
  if (plainFrom < text.length) frag.append(text.slice(plainFrom));
  return frag;
}

function code(s) { return el("code", { text: s }); }

function errorBox(e) {
  return el("p", { class: "error" }, "Could not load: " + e.message);
}

function hashParts() {
  const h = location.hash.replace(/^#\/?/, "");
  const [path, query] = h.split("?");
  const segs = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: segs[0] || "search", arg: segs[1] || "", params: new URLSearchParams(query || "") };
}

function setHashQuiet(page, params) {
  const qs = params.toString();
  history.replaceState(null, "", "#/" + page + (qs ? "?" + qs : ""));
}

function debounce(fn, ms) {
  let t = null;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

const PALETTE = ["#2f6f4f", "#2f5f8f", "#b5651d", "#7a2f6f", "#8f2f2f", "#4f6f2f", "#2f8f8f", "#6f4f2f", "#5f5f9f", "#9f8f2f"];

function swatch(color) {
  return svg("svg", { class: "swatch", viewBox: "0 0 10 10", width: 12, height: 12 },
    svg("rect", { width: 10, height: 10, rx: 2, fill: color }));
}

function option(value, label, selected) {
  return el("option", { value, selected: selected ? true : null, text: label });
}

function selectOf(name, label, values, current) {
  return el("select", { name, "aria-label": label },
    option("", label, !current),
    values.map((v) => option(v, v, v === current)));
}

async function loadOverview() {
  overview = await api("overview");
  const who = document.getElementById("whoami");
  who.textContent = overview.node.name + " · " + overview.node.short_id + " · " +
    overview.records + " records in " + overview.sessions + " sessions";
}

function nothingIndexed() {
  if (!overview || overview.records > 0) return null;
  return el("div", { class: "empty" },
    el("p", {}, "No agent history is indexed on this node yet."),
    el("p", {}, "cairn looked in:"),
    el("ul", {}, overview.checked.map((p) => el("li", {}, code(p)))),
    el("p", {}, "Use a coding agent (Claude Code, Codex, Gemini CLI, Cursor, Copilot, opencode, aider, pi) here, then run ",
      code("cairn index"), ", or pair with a machine that has history: ", code("cairn pair"), "."));
}

// ---------- Search ----------

function filterForm(params, extra, withQuery) {
  const f = el("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() });
  if (withQuery) {
    f.append(el("input", { class: "q", type: "search", name: "q", id: "q", placeholder: "Search everything your agents said and did…",
      autocomplete: "off", autofocus: true, value: params.get("q") || "" }));
  }
  f.append(
    selectOf("agent", "any agent", overview ? overview.agents : [], params.get("agent")),
    selectOf("machine", "any machine", overview ? overview.machines : [], params.get("machine")),
    el("input", { class: "grow", name: "project", placeholder: "project path contains…", value: params.get("project") || "" }),
  );
  for (const x of extra) f.append(x);
  return f;
}

function formParams(form) {
  const p = new URLSearchParams();
  for (const e of form.elements) {
    if (e.name && e.value) p.set(e.name, e.value);
  }
  return p;
}

const SINCE = [["", "any time"], ["1d", "last day"], ["7d", "last week"], ["30d", "last month"], ["90d", "last 3 months"], ["1y", "last year"]];
const ROLES = [["", "any role"], ["user", "user"], ["assistant", "assistant"], ["tool_call", "tool call"], ["tool_output", "tool output"], ["note", "note"]];

function sinceSelect(cur) {
  return el("select", { name: "since", "aria-label": "since" }, SINCE.map(([v, l]) => option(v, l, v === (cur || ""))));
}

function pageSearch(params, seq) {
  const results = el("div", { id: "results" });
  const form = filterForm(params, [
    el("select", { name: "role", "aria-label": "role" }, ROLES.map(([v, l]) => option(v, l, v === (params.get("role") || "")))),
    sinceSelect(params.get("since")),
  ], true);
  main.replaceChildren(form, results);
  let last = "";
  const run = async () => {
    const p = formParams(form);
    const key = p.toString();
    if (key === last) return;
    last = key;
    setHashQuiet("search", p);
    if (!p.get("q")) {
      results.replaceChildren(nothingIndexed() || el("div", { class: "empty" },
        el("p", {}, "Type to search every session of every agent on every paired machine."),
        el("p", {}, "Words, \"quoted phrases\", prefix*, file paths and error text all work. Filters narrow by agent, machine, project, role and time.")));
      return;
    }
    results.replaceChildren(el("p", { class: "muted" }, "Searching…"));
    try {
      const r = await api("search", Object.fromEntries(p));
      if (seq !== routeSeq || key !== last) return;
      renderHits(results, r, p.get("q"));
    } catch (e) {
      if (key === last) results.replaceChildren(errorBox(e));
    }
  };
  const later = debounce(run, 180);
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  const q = form.querySelector("#q");
  q.focus();
  run();
}

function renderHits(box, r, q) {
  if (!r.hits.length) {
    box.replaceChildren(nothingIndexed() || el("div", { class: "empty" },
      el("p", {}, "No matches for ", code(q), "."),
      el("p", {}, "Try fewer or other words, a prefix like ", code("deploy*"), ", or clear the filters.")));
    return;
  }
  const list = r.hits.map((h) => {
    const href = "#/session/" + encodeURIComponent(h.session_id) + "?q=" + encodeURIComponent(q);
    return el("article", { class: "card hit" },
      el("a", { class: "title", href }, h.title || h.session_id),
      el("div", { class: "meta" },
        el("span", { text: h.agent }),
        el("span", { text: h.project || "no project" }),
        el("span", { class: "machine", text: "on " + h.machine }),
        h.time ? timeEl(Date.parse(h.time)) : el("span", { text: "time unknown" }),
        el("span", { text: h.role }),
        el("span", { text: h.matches > 1 ? h.matches + " matching records" : "1 matching record" })),
      el("div", { class: "snippet" }, highlighted(h.snippet, r.words)));
  });
  box.replaceChildren(el("p", { class: "muted" }, r.hits.length + " session" + (r.hits.length > 1 ? "s" : "")), ...list);
}

// ---------- Session ----------

const FOLDED = new Set(["tool_call", "tool_output"]);

async function pageSession(id, params, seq) {
  main.replaceChildren(el("p", { class: "muted" }, "Loading session…"));
  let r;
  try {
    r = await api("session", { id, q: params.get("q"), offset: params.get("offset") });
  } catch (e) {
    main.replaceChildren(el("h1", { text: "Session " + id }), errorBox(e));
    return;
  }
  if (seq !== routeSeq) return;
  const s = r.session;
  const q = params.get("q") || "";
  const matched = new Set(r.matched);
  const head = el("div", {},
    el("h1", { text: s.title || s.session_id }),
    el("div", { class: "meta" },
      el("span", { text: s.agent }),
      el("span", { text: s.project || "no project" }),
      el("span", { class: "machine", text: "on " + s.machine }),
      el("span", {}, timeEl(s.first_ms), " → ", timeEl(s.last_ms)),
      el("span", { text: s.records + " records" }),
      el("span", { class: "muted", text: "id " + s.session_id })),
    s.parent_session ? el("p", { class: "meta" }, "Sub-agent of ",
      el("a", { href: "#/session/" + encodeURIComponent(s.parent_session) }, shortId(s.parent_session))) : null,
    r.local_sources.length ? el("p", { class: "files" }, "Source on this machine: ",
      r.local_sources.map((p, i) => [i ? ", " : "", el("a", { href: "file://" + p, title: "open the agent's own file (your browser may ask)" }, p)])) : null,
    q ? el("p", { class: "meta" }, matched.size + " record(s) on this page match ", code(q)) : null,
    handoffBar(s));
  const pager = () => {
    const p = el("div", { class: "pager" });
    const to = (off) => {
      const ps = new URLSearchParams();
      if (q) ps.set("q", q);
      ps.set("offset", String(Math.max(0, off)));
      return "#/session/" + encodeURIComponent(s.session_id) + "?" + ps;
    };
    if (r.offset > 0) p.append(el("a", { class: "button", href: to(r.offset - r.limit) }, "← earlier"));
    p.append(el("span", { class: "muted", text: "records " + (r.records.length ? r.offset + 1 : 0) + "–" + (r.offset + r.records.length) + " of " + r.total }));
    if (r.offset + r.records.length < r.total) p.append(el("a", { class: "button", href: to(r.offset + r.limit) }, "later →"));
    return p;
  };
  const recs = r.records.map((rec, i) => {
    const isMatch = matched.has(i);
    const words = isMatch ? r.words : [];
    const body = el("pre", {}, highlighted(rec.text, words));
    const files = rec.files.length ? el("div", { class: "files", text: "files: " + rec.files.join(", ") }) : null;
    let inner;
    if (FOLDED.has(rec.role)) {
      const first = (rec.text.split("\n")[0] || "").slice(0, 140);
      inner = el("details", { open: isMatch ? true : null },
        el("summary", {}, el("span", { class: "role", text: rec.role.replace("_", " ") }), " · ", first), body, files);
    } else {
      inner = [el("div", {}, el("span", { class: "role", text: rec.role }), " ", el("span", { class: "muted" }, timeEl(rec.time_ms))), body, files];
    }
    return el("section", { class: "rec " + rec.role + (isMatch ? " matched" : "") + (r.focus === i ? " focus" : ""), id: "rec-" + (r.offset + i) }, inner);
  });
  if (!recs.length) recs.push(el("div", { class: "empty" }, "No records on this page."));
  main.replaceChildren(head, pager(), ...recs, pager());
  if (r.focus !== null && r.focus !== undefined) {
    const f = main.querySelector(".rec.focus");
    if (f) f.scrollIntoView({ block: "center" });
  } else {
    window.scrollTo(0, 0);
  }
}

// The session view's hand-on bar: copy the handoff brief, and the command
// that resumes the session in a coding agent (both from /api/handoff).
function handoffBar(s) {
  const resume = "cairn resume " + s.session_id;
  const brief = api("handoff", { id: s.session_id });
  brief.catch(() => {});
  const copyBrief = el("button", { type: "button", title: "copy a brief to continue this session from (goal, decisions, files, commands, open ends)" }, "copy handoff");
  copyBrief.addEventListener("click", async () => {
    try {
      const r = await brief;
      copyText(r.brief.text, copyBrief);
    } catch (e) {
      copyBrief.after(errorBox(e));
    }
  });
  const copyResume = el("button", { type: "button", title: "copy the command" }, "copy");
  copyResume.addEventListener("click", async () => {
    let cmd = resume;
    try { cmd = (await brief).resume; } catch (_) { /* the plain form */ }
    copyText(cmd, copyResume);
  });
  return el("div", { class: "handoff meta" }, copyBrief,
    el("span", {}, "resume in an agent: ", code(resume), " ", copyResume));
}

// Copies text to the clipboard; where the browser refuses, shows it
// selected in a box to copy by hand.
function copyText(text, button) {
  const done = () => {
    const label = button.textContent;
    button.textContent = "copied";
    setTimeout(() => { button.textContent = label; }, 1500);
  };
  const byHand = () => {
    const box = el("textarea", { class: "copybox", readonly: true, rows: 12 });
    box.value = text;
    button.parentNode.after(box);
    box.select();
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done, byHand);
  } else {
    byHand();
  }
}

// ---------- Recent ----------

function dayLabel(ms) {
  const d = new Date(ms);
  const today = new Date();
  const start = (x) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const diff = Math.round((start(today) - start(d)) / 86400000);
  if (diff === 0) return "Today";
  if (diff === 1) return "Yesterday";
  return d.toLocaleDateString(undefined, { weekday: "long", year: "numeric", month: "short", day: "numeric" });
}

function pageRecent(params, seq) {
  if (!params.has("since")) params.set("since", "7d");
  const list = el("div", { id: "recent" });
  const form = filterForm(params, [sinceSelect(params.get("since"))], false);
  main.replaceChildren(el("h1", { text: "Recent sessions" }), form, list);
  let sessions = [];
  const load = async (more) => {
    const p = formParams(form);
    if (!more) { setHashQuiet("recent", p); sessions = []; }
    const args = Object.fromEntries(p);
    if (more && sessions.length) args.before = sessions[sessions.length - 1].last_ms;
    args.limit = 100;
    let r;
    try { r = await api("recent", args); } catch (e) { list.replaceChildren(errorBox(e)); return; }
    if (seq !== routeSeq) return;
    sessions = sessions.concat(r.sessions);
    render(r.sessions.length === 100);
  };
  const render = (hasMore) => {
    if (!sessions.length) {
      list.replaceChildren(nothingIndexed() || el("div", { class: "empty" },
        el("p", {}, "No sessions in this time range with these filters."),
        el("p", {}, "Choose a longer range (“any time”) or clear the filters.")));
      return;
    }
    const out = [];
    let cur = null;
    for (const s of sessions) {
      const label = s.last_ms ? dayLabel(s.last_ms) : "Time unknown";
      if (label !== cur) { out.push(el("div", { class: "day", text: label })); cur = label; }
      out.push(el("div", { class: "row" },
        el("span", { class: "time", text: s.last_ms ? new Date(s.last_ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "—" }),
        el("span", { class: "what" },
          el("a", { href: "#/session/" + encodeURIComponent(s.session_id) }, s.title || s.session_id),
          el("div", { class: "meta" },
            el("span", { text: s.agent }), el("span", { text: s.project || "no project" }),
            el("span", { text: "on " + s.machine }), el("span", { text: s.records + " records" })))));
    }
    if (hasMore) out.push(el("div", { class: "pager" }, el("button", { type: "button", onclick: () => load(true) }, "older sessions")));
    list.replaceChildren(...out);
  };
  const later = debounce(() => load(false), 180);
  form.addEventListener("input", later);
  form.addEventListener("change", later);
  load(false);
}

// ---------- Machines ----------

function machineGraph(ms) {
  const self = ms.find((m) => m.relation === "self");
  const peers = ms.filter((m) => m.relation === "peer");
  const relayed = ms.filter((m) => m.relation === "relayed");
  const W = 720;
  const H = !peers.length && !relayed.length ? 140 : peers.length > 2 || relayed.length > 2 ? 360 : 240;
  const cx = W / 2, cy = peers.length || relayed.length ? H / 2 : 50;
  const ry1 = Math.min(110, H / 2 - 55), ry2 = Math.min(150, H / 2 - 45);
  const pos = new Map();
  pos.set(self.node_id, [cx, cy]);
  peers.forEach((m, i) => {
    const a = (2 * Math.PI * i) / Math.max(peers.length, 1);
    pos.set(m.node_id, [cx + 200 * Math.cos(a), cy + ry1 * Math.sin(a)]);
  });
  // Which peer relayed an origin is not recorded; each relayed origin is
  // drawn beyond one peer (in turn) with a dashed line, or around this
  // node when there are no peers.
  const via = new Map();
  const perPeer = new Map();
  relayed.forEach((m, i) => {
    const k = peers.length ? i % peers.length : -1;
    const j = perPeer.get(k) || 0;
    perPeer.set(k, j + 1);
    via.set(m.node_id, [k, j]);
  });
  for (const m of relayed) {
    const [k, j] = via.get(m.node_id);
    const n = perPeer.get(k);
    const base = k >= 0 ? (2 * Math.PI * k) / peers.length : 0;
    const spread = k >= 0 ? 0.45 : (2 * Math.PI) / n;
    const a = base + (j - (n - 1) / 2) * spread;
    pos.set(m.node_id, [cx + 290 * Math.cos(a), cy + ry2 * Math.sin(a)]);
  }
  const g = svg("svg", { class: "graph", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "paired machines" });
  for (const m of relayed) {
    const [x, y] = pos.get(m.node_id);
    const k = via.get(m.node_id)[0];
    const [fx, fy] = k >= 0 ? pos.get(peers[k].node_id) : [cx, cy];
    g.append(svg("line", { class: "link relayed", x1: fx, y1: fy, x2: x, y2: y }));
  }
  for (const m of peers) {
    const [x, y] = pos.get(m.node_id);
    g.append(svg("line", { class: "link", x1: cx, y1: cy, x2: x, y2: y }));
    const label = m.last_sync_ms ? "synced " + relTime(m.last_sync_ms) + (m.behind ? ", " + m.behind + " behind" : "") : "never synced";
    g.append(svg("text", { x: (cx + x) / 2, y: (cy + y) / 2 - 4, "text-anchor": "middle", text: label }));
  }
  for (const m of ms) {
    const [x, y] = pos.get(m.node_id);
    const r = m.relation === "self" ? 20 : m.relation === "peer" ? 15 : 10;
    g.append(svg("g", {},
      svg("title", { text: m.name + " (" + m.node_id + ")" }),
      svg("circle", { class: "node-" + m.relation, cx: x, cy: y, r }),
      svg("text", { x, y: y + r + 13, "text-anchor": "middle", text: m.name + (m.relation === "self" ? " (this machine)" : "") }),
      svg("text", { x, y: y + r + 26, "text-anchor": "middle", class: "muted", text: m.records + (m.records === 1 ? " record" : " records") })));
  }
  return g;
}

async function pageMachines(seq) {
  main.replaceChildren(el("p", { class: "muted" }, "Loading machines…"));
  let r;
  try { r = await api("machines"); } catch (e) { main.replaceChildren(errorBox(e)); return; }
  if (seq !== routeSeq) return;
  const ms = r.machines;
  const peers = ms.filter((m) => m.relation === "peer");
  const parts = [el("h1", { text: "Machines" }), machineGraph(ms),
    el("div", { class: "legend" },
      el("span", {}, swatch("#2f6f4f"), "this machine"),
      el("span", {}, swatch("#2f5f8f"), "paired"),
      el("span", {}, swatch("#6a737d"), "relayed (records reached us through a peer)"))];
  if (r.peers_error) parts.push(el("p", { class: "error", text: "Peer table unreadable: " + r.peers_error }));
  if (!peers.length) {
    parts.push(el("div", { class: "empty" },
      el("p", {}, "No paired machines yet."),
      el("p", {}, "On this machine run ", code("cairn pair"), "; it prints a one-time code. On the other machine run ",
        code("cairn pair CODE"), ". Then ", code("cairn serve"), " on both keeps them in sync.")));
  }
  const dash = (v) => (v === null || v === undefined ? "—" : String(v));
  const rows = ms.map((m) => el("tr", {},
    el("td", {}, el("strong", { text: m.name })),
    el("td", { text: m.relation === "self" ? "this machine" : m.relation }),
    el("td", {}, el("code", { title: m.node_id, text: m.short_id })),
    el("td", { text: (m.addresses.length ? m.addresses : m.last_addr ? [m.last_addr] : ["—"]).join(", ") }),
    el("td", {}, m.last_seen_ms ? timeEl(m.last_seen_ms) : "—"),
    el("td", {}, m.last_sync_ms ? timeEl(m.last_sync_ms) : "—"),
    el("td", { class: "num", text: dash(m.records_received) }),
    el("td", { class: "num", text: dash(m.behind) }),
    el("td", { class: "num", text: String(m.records) })));
  parts.push(el("div", { class: "table-wrap" }, el("table", { id: "machines" },
    el("thead", {}, el("tr", {}, ["name", "relation", "node id", "addresses", "last seen", "last sync"].map((h) => el("th", { text: h })),
      ["received", "behind", "records here"].map((h) => el("th", { class: "num", text: h })))),
    el("tbody", {}, rows))));
  main.replaceChildren(...parts);
}

// ---------- Activity ----------

const DAY_MS = 86400000;
const PERIODS = [["7", "last 7 days"], ["30", "last 30 days"], ["90", "last 90 days"], ["365", "last year"]];
const DEFAULT_DAYS = "30";
const DAYS_KEY = "cairn.activity.days";
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// The period to show, in days: the address's `days` when it is one the
// server answers (1–366), else the last one chosen in this browser, else 30.
function activityDays(params) {
  const ok = (v) => /^[0-9]{1,3}$/.test(v || "") && +v >= 1 && +v <= 366;
  const asked = params.get("days");
  if (ok(asked)) return String(+asked);
  let last = null;
  try { last = localStorage.getItem(DAYS_KEY); } catch (_) { last = null; }
  return ok(last) ? String(+last) : DEFAULT_DAYS;
}

// Day numbers count days since 1970-01-01 in the viewer's time zone (the
// server shifts by the `tz` it is given), so UTC getters read them right.
function dayIso(d) { return new Date(d * DAY_MS).toISOString().slice(0, 10); }
function dayShort(d) { const t = new Date(d * DAY_MS); return MONTHS[t.getUTCMonth()] + " " + t.getUTCDate(); }

// Days per bar: one a day up to 120 days, one a week beyond (a year of
// days would be bars of one pixel).
function binDays(days) { return days > 120 ? 7 : 1; }

// Ticks between the axis's two ends (which carry full dates): daily up
// to 10 days, weekly back from the last day up to 31, the 1st and 15th of each month up
// to 120, else each month's 1st (with the year in January).
function axisTicks(firstDay, today) {
  const days = today - firstDay + 1;
  const out = [];
  if (days <= 31) {
    const step = days <= 10 ? 1 : 7;
    for (let d = today - step; d > firstDay; d -= step) out.push([d, dayShort(d)]);
    return out.reverse();
  }
  for (let d = firstDay + 1; d < today; d++) {
    const t = new Date(d * DAY_MS);
    const dom = t.getUTCDate();
    if (days <= 120 && (dom === 1 || dom === 15)) out.push([d, dayShort(d)]);
    else if (days > 120 && dom === 1) out.push([d, t.getUTCMonth() === 0 ? "Jan " + t.getUTCFullYear() : MONTHS[t.getUTCMonth()]]);
  }
  return out;
}

function stackedChart(title, counts, firstDay, today) {
  const keys = [...new Set(counts.map((c) => c.key))].sort();
  const color = new Map(keys.map((k, i) => [k, PALETTE[i % PALETTE.length]]));
  const days = today - firstDay + 1;
  const bin = binDays(days);
  // Bars end on the last day: bar i covers the days ending `i * bin` before it.
  const bars = Math.ceil(days / bin);
  const barOf = (d) => Math.floor((today - d) / bin);
  const perBar = new Map();
  for (const c of counts) {
    if (c.day < firstDay || c.day > today) continue;
    const b = barOf(c.day);
    const m = perBar.get(b) || new Map();
    m.set(c.key, (m.get(c.key) || 0) + c.records);
    perBar.set(b, m);
  }
  let max = 1;
  for (const m of perBar.values()) max = Math.max(max, [...m.values()].reduce((a, b) => a + b, 0));
  const W = 640, H = 200, L = 40, R = 8, B = 22, T = 10;
  const dayW = (W - L - R) / days;
  const x = (d) => L + (d - firstDay) * dayW;
  const range = dayIso(firstDay) + " to " + dayIso(today);
  const g = svg("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": title + ", " + range + (bin > 1 ? ", one bar a week" : ", one bar a day") });
  g.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  g.append(svg("text", { x: L - 4, y: T + 8, "text-anchor": "end", text: String(max) }));
  g.append(svg("text", { x: L - 4, y: H - B, "text-anchor": "end", text: "0" }));
  for (let b = 0; b < bars; b++) {
    const m = perBar.get(b);
    if (!m) continue;
    const last = today - b * bin;
    const first = Math.max(firstDay, last - bin + 1);
    const x0 = x(first);
    const w = (last - first + 1) * dayW;
    const gap = w >= 6 ? 2 : 1;
    const when = first === last ? dayIso(first) : dayIso(first) + " – " + dayIso(last);
    let y = H - B;
    for (const k of keys) {
      const v = m.get(k) || 0;
      if (!v) continue;
      const h = ((H - B - T) * v) / max;
      y -= h;
      g.append(svg("rect", { class: "bar-seg", x: x0 + gap / 2, y, width: Math.max(w - gap, 1), height: h, fill: color.get(k) },
        svg("title", { text: when + " · " + k + ": " + v })));
    }
  }
  // Ends: the range's real first and last dates; ticks between them where
  // they leave the ends' labels room.
  const labelY = H - 6;
  g.append(svg("text", { class: "date first", x: L, y: labelY, text: dayIso(firstDay) }));
  g.append(svg("text", { class: "date last", x: W - R, y: labelY, "text-anchor": "end", text: dayIso(today) }));
  for (const [d, text] of axisTicks(firstDay, today)) {
    const tx = x(d) + dayW / 2;
    g.append(svg("line", { class: "axis tick", x1: tx, y1: H - B, x2: tx, y2: H - B + 4 }));
    if (tx - L < 75 || W - R - tx < 75) continue;
    g.append(svg("text", { class: "date tick", x: tx, y: labelY, "text-anchor": "middle", text }));
  }
  const legend = el("div", { class: "legend" }, keys.map((k) => el("span", {}, swatch(color.get(k)), k)));
  return [el("h2", { text: title }), g, legend];
}

async function pageActivity(params, seq) {
  const days = activityDays(params);
  // The period is always in the address (so a reload or a shared link
  // shows the same), and remembered for the next visit without one.
  if (params.get("days") !== days) {
    params.set("days", days);
    setHashQuiet("activity", params);
  }
  try { localStorage.setItem(DAYS_KEY, days); } catch (_) { /* private mode: the address still holds it */ }
  const periods = PERIODS.some(([v]) => v === days) ? PERIODS : [...PERIODS, [days, "last " + days + " days"]];
  const sel = el("select", { name: "days", "aria-label": "period" },
    periods.map(([v, l]) => option(v, l, v === days)));
  sel.addEventListener("change", () => { location.hash = "#/activity?days=" + encodeURIComponent(sel.value); });
  main.replaceChildren(el("h1", { text: "Activity" }), el("form", { class: "filters" }, sel), el("p", { class: "muted" }, "Loading…"));
  let r;
  try { r = await api("activity", { days, tz: -new Date().getTimezoneOffset() }); } catch (e) { main.append(errorBox(e)); return; }
  if (seq !== routeSeq) return;
  const bin = binDays(r.today - r.first_day + 1);
  const range = el("p", { id: "range", class: "muted",
    text: dayIso(r.first_day) + " – " + dayIso(r.today) + " · one bar " + (bin > 1 ? "a week" : "a day") });
  const parts = [el("h1", { text: "Activity" }), el("form", { class: "filters" }, sel), range];
  if (!r.by_agent.length) {
    parts.push(nothingIndexed() || el("div", { class: "empty" },
      el("p", {}, "No records in this period."), el("p", {}, "Choose a longer period, or see ", el("a", { href: "#/recent?since=" }, "all recent sessions"), ".")));
    main.replaceChildren(...parts);
    return;
  }
  const per = bin > 1 ? "week" : "day";
  parts.push(...stackedChart("Records per " + per + ", by agent", r.by_agent, r.first_day, r.today));
  parts.push(...stackedChart("Records per " + per + ", by machine", r.by_machine, r.first_day, r.today));
  const top = r.top_projects;
  const max = Math.max(1, ...top.map((p) => p.records));
  parts.push(el("h2", { text: "Top projects" }), el("div", { class: "table-wrap" }, el("table", { id: "projects" },
    el("thead", {}, el("tr", {}, el("th", { text: "project" }), el("th", { class: "num", text: "records" }), el("th", { class: "num", text: "sessions" }), el("th", { text: "" }))),
    el("tbody", {}, top.map((p) => {
      const bar = el("div", { class: "bar" });
      bar.style.width = Math.round((100 * p.records) / max) + "%";
      return el("tr", {},
        el("td", {}, p.project ? el("a", { href: "#/recent?since=&project=" + encodeURIComponent(p.project) }, p.project) : el("span", { class: "muted", text: "(no project)" })),
        el("td", { class: "num", text: String(p.records) }),
        el("td", { class: "num", text: String(p.sessions) }),
        el("td", { class: "barcell" }, bar));
    })))));
  main.replaceChildren(...parts);
}

// ---------- router ----------

async function route() {
  const seq = ++routeSeq;
  const { page, arg, params } = hashParts();
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.page === (page === "session" ? "search" : page));
  }
  if (!overview) {
    try { await loadOverview(); } catch (e) { main.replaceChildren(errorBox(e)); return; }
  }
  if (seq !== routeSeq) return;
  switch (page) {
    case "session": return pageSession(arg, params, seq);
    case "recent": return pageRecent(params, seq);
    case "machines": return pageMachines(seq);
    case "activity": return pageActivity(params, seq);
    default: return pageSearch(params, seq);
  }
}

window.addEventListener("hashchange", route);
route();
