"""The dashboard's single HTML page: self-contained (no external assets), it polls the JSON API.

The page shows the demo controls (a workload switch and the focus buttons) only when the
server says so (``GET /api/view``: a dashboard that owns its framework, not the daemon's), the
tenants (priority, devices and their states, calls, waits, preemptions, unread signals) and the
waits and preemptions told to them with their times, services (with buttons to move each
between tiers), a chart of throughput (calls/s per service and tier, measured: derived from
consecutive samples), a timeline of who held each fabric region (a service or a tenant's
device, each labelled), regions, the measured call statistics of every service and the last
juggles with their modeled and measured figures and the time they were seen. The charts draw
the samples the server keeps (``GET /api/history``, the last ten minutes), so a page opened
late shows what happened before. Charts are inline SVG drawn by the page's own script. It
builds every cell and label with ``textContent``, so names coming from modules are never
parsed as HTML.
"""

from __future__ import annotations

__all__ = ["BASE_CSS", "PAGE"]

#: the look both dashboard pages share (the live page and the cluster page)
BASE_CSS = """body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; font-size: .9em; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.kind { color: #666; font-size: .8em; }
#status { color: #666; font-size: .85em; }
"""

PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>juggle dashboard</title>
<style>
"""
    + BASE_CSS
    + """.error, #status.error { color: #b00; }
button { font-size: .8em; margin-right: .2em; }
svg.chart { border: 1px solid #ccc; background: #fcfcfc; display: block; }
svg.chart text { font-size: 10px; fill: #555; }
.legend { font-size: .8em; margin: .3em 0; }
.legend span { display: inline-block; margin-right: 1.2em; }
.swatch { display: inline-block; width: 1.6em; height: .5em; margin-right: .3em;
  vertical-align: middle; }
</style>
</head>
<body>
<h1>juggle dashboard</h1>
<div id="status">loading...</div>
<div id="notice" class="error"></div>
<div id="demo-controls" hidden>
<p><button id="workload" onclick="toggleWorkload()">workload: ...</button>
<span id="workload-status"></span></p>
<p>focus: <span id="focus-buttons"></span> <span id="focus-status" class="kind"></span></p>
</div>
<h2>tenants <span class="kind">(calls, waits, preemptions, signals: measured; priority:
input, the tenant policy)</span></h2>
<table id="tenants"><thead><tr>
<th>tenant</th><th>priority</th><th>model</th><th>devices</th><th>holds</th><th>calls</th>
<th>waits</th><th>preemptions</th><th>unread signals</th></tr></thead><tbody></tbody></table>
<div id="tenants-none" class="kind" hidden>no tenants registered (a daemon's policy names
them; Framework.add_tenant registers one)</div>
<h2>waits and preemptions <span class="kind">(signals told to tenants, newest first; time:
the host's wall clock)</span></h2>
<table id="tenant-events"><thead><tr>
<th>time</th><th>signal</th><th>tenant</th><th>device</th><th>service</th>
<th>until READY ms <span class="kind">(measured)</span></th></tr></thead>
<tbody></tbody></table>
<h2>services</h2>
<table id="services"><thead><tr>
<th>id</th><th>interface</th><th>tier</th><th>region</th><th>module</th><th>consumers</th>
<th>move to</th></tr></thead><tbody></tbody></table>
<h2>throughput <span class="kind">(calls/s per service and tier, measured, last
<span class="window">10 min</span>, kept by the server)</span></h2>
<svg id="throughput" class="chart" width="640" height="180" viewBox="0 0 640 180"
  role="img" aria-label="throughput per service and tier"></svg>
<div id="throughput-legend" class="legend"></div>
<div class="kind">line: solid hardware, dashed native, dotted software</div>
<h2>region occupancy <span class="kind">(which service or tenant held each region, last
<span class="window">10 min</span>)</span></h2>
<svg id="occupancy" class="chart" width="640" height="40" viewBox="0 0 640 40"
  role="img" aria-label="region occupancy timeline"></svg>
<div id="occupancy-legend" class="legend"></div>
<h2>regions</h2>
<table id="regions"><thead><tr>
<th>region</th><th>state</th><th>design</th><th>held by</th><th>service</th><th>module</th>
<th>slices</th></tr></thead><tbody></tbody></table>
<h2>call statistics <span class="kind">(measured, wall clock of the host)</span></h2>
<table id="statistics"><thead><tr>
<th>service</th><th>tier</th><th>calls</th><th>calls/s</th><th>mean &micro;s</th>
<th>p50 &micro;s</th><th>p99 &micro;s</th><th>in flight</th></tr></thead><tbody></tbody></table>
<h2>last juggles</h2>
<table id="juggles"><thead><tr>
<th>#</th><th>seen at</th><th>to hardware</th><th>to software</th><th>region</th>
<th>reconfiguration ms <span class="kind">(calibrated)</span></th>
<th>bridge ms <span class="kind">(input)</span></th>
<th>overhead &micro;s <span class="kind">(measured)</span></th></tr></thead><tbody></tbody></table>
<script>
"use strict";
function cell(row, value, numeric) {
  const td = document.createElement("td");
  td.textContent = value === null || value === undefined ? "-" : String(value);
  if (numeric) td.className = "num";
  row.appendChild(td);
  return td;
}
function fill(id, items, build) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of items) {
    const row = document.createElement("tr");
    build(row, item);
    body.appendChild(row);
  }
}
function status(text, bad) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = bad ? "error" : "";
}
async function getJson(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}
async function post(url, payload) {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const response = await fetch(url, {
    method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
    body: JSON.stringify(payload)});
  const body = await response.json();
  document.getElementById("notice").textContent = response.ok ? "" : "error: " + body.error;
  return body;
}
async function setTier(id, tier) {
  await post("/api/services/" + id + "/tier", {tier: tier});
  refresh();
}
let workloadRunning = false;
async function toggleWorkload() {
  await post("/api/workload", {on: !workloadRunning});
  refresh();
}
function showWorkload(w, allCalls) {
  workloadRunning = w.running;
  document.getElementById("workload").textContent =
    w.running ? "stop the workload" : "start the workload";
  const calls = Object.entries(w.calls).map(([c, n]) => c + " " + n).join(", ");
  // "no calls" only when nobody called: other consumers (tenants, programs) may have
  const none = allCalls > 0
    ? "the workload made none; " + allCalls + (allCalls === 1 ? " call" : " calls") + " by others"
    : "no calls";
  document.getElementById("workload-status").textContent =
    (w.running ? "running: " : "stopped: ") + (calls || none) +
    (w.failed ? ", failed " + w.failed : "");
}
async function setFocus(app) {
  await post("/api/foreground", {app: app});
  refresh();
}
function showFocus(live, services) {
  const apps = [...new Set(services.flatMap(s => s.consumers))].sort();
  const box = document.getElementById("focus-buttons");
  box.replaceChildren();
  for (const app of [...apps, null]) {
    const button = document.createElement("button");
    button.textContent = app === null ? "none" : app;
    button.dataset.app = app === null ? "" : app;
    button.disabled = app === live.foreground;
    button.onclick = () => setFocus(app);
    box.appendChild(button);
  }
  document.getElementById("focus-status").textContent =
    "in focus: " + (live.foreground === null ? "none" : live.foreground) + "; controller: " +
    (live.controller === null ? "none (juggles only by hand)" : live.controller);
}
function fixed(value, digits) { return Number(value).toFixed(digits); }
function clockTime(epochS) {
  if (epochS === null || epochS === undefined) return "-";
  const d = new Date(epochS * 1000);
  return d.toLocaleTimeString([], {hour12: false}) + "." +
    String(d.getMilliseconds()).padStart(3, "0");
}
function showTenants(rows) {
  document.getElementById("tenants-none").hidden = rows.length > 0;
  fill("tenants", rows, (row, t) => {
    row.dataset.tenant = t.name;
    cell(row, t.name).className = "name";
    cell(row, t.realtime ? "real-time" : t.priority, !t.realtime).classList.add("priority");
    cell(row, t.model);
    cell(row, t.devices.map(d => d.device + ": " + d.state + (d.region ? " in " + d.region : "") +
      (d.running ? ", running" : "") + ", " + d.calls + " calls").join("; ")).className = "devices";
    cell(row, t.holds.join(", ") || "-").className = "holds";
    cell(row, t.calls, true).classList.add("calls");
    cell(row, t.waits, true).classList.add("waits");
    cell(row, t.preemptions, true).classList.add("preemptions");
    cell(row, t.unread_signals, true).classList.add("signals");
  });
}
function showEvents(events) {
  // WAIT and PREEMPT rows; the READY that ends one (same tenant and device) gives its length
  const rows = [], open = new Map();
  for (const e of events) {
    const key = e.tenant + "/" + e.device;
    if (e.kind === "ready") {
      const row = open.get(key);
      if (row !== undefined) row.readyMs = (e.at_us - row.at_us) / 1000;
      open.delete(key);
    } else {
      const row = Object.assign({readyMs: null}, e);
      rows.push(row);
      open.set(key, row);
    }
  }
  fill("tenant-events", rows.slice(-15).reverse(), (row, e) => {
    row.dataset.kind = e.kind;
    row.dataset.tenant = e.tenant;
    cell(row, clockTime(e.time)).className = "time";
    cell(row, e.kind); cell(row, e.tenant); cell(row, e.device); cell(row, e.service_id);
    cell(row, e.readyMs === null ? "not yet" : fixed(e.readyMs, 3), true).classList.add("ready");
  });
}
// -- charts: inline SVG over the samples the server keeps (GET /api/history) --------------
const SVG = document.getElementById("throughput").namespaceURI;  // the SVG namespace
let SPAN = 600;               // seconds of samples shown: the server's span (GET /api/view)
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const TENANT_PALETTE = ["#6baed6", "#fd8d3c", "#74c476", "#9e9ac8", "#fdd0a2", "#c6dbef"];
const DASH = {hardware: "", native: "6 3", software: "2 3"};
const samples = [];           // the server's samples, oldest first
const tenantOrder = [];       // tenants in the order first seen: their colours
function svgEl(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}
function colour(serviceId) { return PALETTE[(Number(serviceId) - 1) % PALETTE.length]; }
function tenantColour(name) {
  if (!tenantOrder.includes(name)) tenantOrder.push(name);
  return TENANT_PALETTE[tenantOrder.indexOf(name) % TENANT_PALETTE.length];
}
function addSamples(list) {
  for (const s of list) {
    if (samples.length === 0 || s.time_s > samples[samples.length - 1].time_s) samples.push(s);
  }
  const newest = samples.length ? samples[samples.length - 1].time_s : 0;
  while (samples.length && newest - samples[0].time_s > SPAN) samples.shift();
}
function drawCharts() {
  drawThroughput();
  const newest = samples[samples.length - 1];
  drawOccupancy(newest ? newest.regions.map(r => r.name) : []);
}
function xOf(t, tNew, left, plotW) {
  return Math.max(left, left + plotW * (1 - (tNew - t) / SPAN));
}
function spanText() { return SPAN >= 120 ? fixed(SPAN / 60, 0) + " min" : fixed(SPAN, 0) + " s"; }
function drawThroughput() {
  const svg = document.getElementById("throughput");
  const legend = document.getElementById("throughput-legend");
  const W = 640, H = 180, left = 46, top = 8, bottom = 18;
  const plotH = H - top - bottom, plotW = W - left - 6;
  // calls/s of each "service/tier" over each interval between two samples
  const names = new Map();
  const rates = [];           // [{t, t0, values: Map key -> calls/s}]
  for (let i = 1; i < samples.length; i++) {
    const before = new Map(), prev = samples[i - 1], now = samples[i];
    for (const s of prev.services) {
      for (const [tier, n] of Object.entries(s.calls)) before.set(s.service_id + "/" + tier, n);
    }
    const values = new Map();
    for (const s of now.services) {
      for (const [tier, n] of Object.entries(s.calls)) {
        const key = s.service_id + "/" + tier;
        names.set(key, s.service_id + " " + s.interface.split(".").pop() + " " + tier);
        values.set(key, Math.max(0, n - (before.get(key) || 0)) / (now.time_s - prev.time_s));
      }
    }
    rates.push({t: now.time_s, t0: prev.time_s, values: values});
  }
  const keys = [...new Set(rates.flatMap(r => [...r.values.keys()]))].sort();
  let max = 0;
  for (const r of rates) for (const v of r.values.values()) max = Math.max(max, v);
  max = max > 0 ? max * 1.1 : 1;
  svg.replaceChildren();
  svg.appendChild(svgEl("line", {x1: left, y1: top + plotH, x2: W - 6, y2: top + plotH,
                                 stroke: "#999"}));
  svg.appendChild(svgEl("line", {x1: left, y1: top, x2: left, y2: top + plotH, stroke: "#999"}));
  const labels = [[fixed(max, max < 10 ? 1 : 0), top + 8], ["0", top + plotH]];
  for (const [text, y] of labels) {
    const t = svgEl("text", {x: left - 4, y: y, "text-anchor": "end"});
    t.textContent = text;
    svg.appendChild(t);
  }
  const axis = svgEl("text", {x: W - 6, y: H - 4, "text-anchor": "end"});
  axis.textContent = "newest sample";
  svg.appendChild(axis);
  const x0 = svgEl("text", {x: left, y: H - 4});
  x0.textContent = "-" + spanText();
  svg.appendChild(x0);
  legend.replaceChildren();
  const tNew = samples.length ? samples[samples.length - 1].time_s : 0;
  for (const key of keys) {
    const [service, tier] = key.split("/");
    const kept = rates.filter(r => r.values.has(key));
    const values = kept.map(r => r.values.get(key));
    const points = kept.map((r, i) => fixed(xOf(r.t, tNew, left, plotW), 1) + "," +
      fixed(top + plotH - values[i] / max * plotH, 1));
    const line = svgEl("polyline", {points: points.join(" "), fill: "none",
      stroke: colour(service), "stroke-width": tier === "hardware" ? 2.5 : 1.5,
      "stroke-dasharray": DASH[tier] || ""});
    line.dataset.service = service;
    line.dataset.tier = tier;
    line.dataset.points = values.length;
    line.dataset.last = values.length ? values[values.length - 1] : 0;
    line.dataset.spanS = kept.length ? tNew - kept[0].t0 : 0;  // how far back it reaches
    svg.appendChild(line);
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour(service);
    if (tier !== "hardware") swatch.style.opacity = tier === "native" ? "0.6" : "0.3";
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(
      names.get(key) + ": " + fixed(line.dataset.last, 1) + " calls/s"));
    legend.appendChild(item);
  }
}
function holderFill(r) {
  if (r === undefined) return "#fff";
  if (r.holder === "service") return colour(r.service_id);
  if (r.holder === "tenant") return tenantColour(r.tenant);
  return r.state === "EMPTY" ? "#eee" : "#c8c8c8";
}
function drawOccupancy(regionNames) {
  const svg = document.getElementById("occupancy");
  const legend = document.getElementById("occupancy-legend");
  const W = 640, left = 46, rowH = 18, gap = 4, plotW = W - left - 6;
  const H = Math.max(1, regionNames.length) * (rowH + gap) + gap;
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  const tNew = samples.length ? samples[samples.length - 1].time_s : 0;
  const seen = new Map();     // label -> fill
  regionNames.forEach((name, row) => {
    const y = gap + row * (rowH + gap);
    const label = svgEl("text", {x: left - 4, y: y + rowH - 5, "text-anchor": "end"});
    label.textContent = name;
    svg.appendChild(label);
    // one rectangle per run of samples with the same holder, from its first sample to the
    // next run's (the newest run to the right edge)
    const runs = [];
    for (const s of samples) {
      const r = s.regions.find(x => x.name === name);
      const key = r === undefined ? "?" : r.label + "|" + r.holder;
      if (runs.length && runs[runs.length - 1].key === key) continue;
      runs.push({key: key, t: s.time_s, r: r});
    }
    runs.forEach((run, i) => {
      const x1 = xOf(run.t, tNew, left, plotW);
      const x2 = i + 1 < runs.length ? xOf(runs[i + 1].t, tNew, left, plotW) : W - 6;
      const r = run.r;
      const text = r === undefined ? "unknown" : r.label;
      const rect = svgEl("rect", {x: fixed(x1, 2), y: y, width: fixed(Math.max(1, x2 - x1), 2),
        height: rowH, fill: holderFill(r)});
      rect.dataset.region = name;
      rect.dataset.service = r && r.service_id !== null ? r.service_id : "";
      rect.dataset.tenant = r && r.tenant ? r.tenant : "";
      rect.dataset.holder = text;
      const title = svgEl("title", {});
      title.textContent = name + ": " + text;
      rect.appendChild(title);
      svg.appendChild(rect);
      if (x2 - x1 > 7 * text.length) {   // room for the name inside the bar
        const inside = svgEl("text", {x: fixed(x1 + 3, 2), y: y + rowH - 5});
        inside.textContent = text;
        inside.dataset.region = name;
        svg.appendChild(inside);
      }
      seen.set(text, holderFill(r));
    });
  });
  legend.replaceChildren();
  for (const [text, fillColour] of [...seen].sort()) {
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = fillColour;
    swatch.style.border = "1px solid #ccc";
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(text));
    legend.appendChild(item);
  }
}

let view = null;              // GET /api/view: demo controls, the history's period and span
let refreshing = false;
async function refresh() {
  if (refreshing) return;     // a slow answer: skip this tick rather than pile up
  refreshing = true;
  try {
    if (view === null) {
      view = await getJson("/api/view");
      SPAN = view.history.span_s;
      for (const el of document.querySelectorAll(".window")) el.textContent = spanText();
      document.getElementById("demo-controls").hidden = !view.demo_controls;
    }
    const after = samples.length ? "?after=" + samples[samples.length - 1].time_s : "";
    const [services, regions, juggles, tenants, events, history] = await Promise.all([
      getJson("/api/services"), getJson("/api/regions"), getJson("/api/juggles?limit=10"),
      getJson("/api/tenants"), getJson("/api/tenants/events?limit=200"),
      getJson("/api/history" + after)]);
    addSamples(history.samples);
    drawCharts();
    showTenants(tenants.tenants);
    showEvents(events.events);
    const stats = await Promise.all(services.map(
      s => getJson("/api/services/" + s.service_id + "/statistics").catch(() => null)));
    if (view.demo_controls) {
      const [workload, live] = await Promise.all([getJson("/api/workload"),
                                                  getJson("/api/live")]);
      const allCalls = stats.reduce((n, s) => n + (s === null ? 0 : s.total.calls), 0);
      showWorkload(workload, allCalls);
      showFocus(live, services);
    }
    fill("services", services, (row, s) => {
      row.dataset.service = s.service_id;
      cell(row, s.service_id, true); cell(row, s.interface); cell(row, s.tier).className = "tier";
      cell(row, s.region); cell(row, s.module); cell(row, s.consumers.join(", "));
      const td = cell(row, "");
      for (const tier of s.tiers) {
        if (tier === s.tier) continue;
        const button = document.createElement("button");
        button.textContent = tier;
        button.dataset.tier = tier;
        button.onclick = () => setTier(s.service_id, tier);
        td.appendChild(button);
      }
    });
    const holders = new Map();
    const newest = samples[samples.length - 1];
    if (newest) for (const r of newest.regions) holders.set(r.name, r.label);
    fill("regions", regions, (row, r) => {
      row.dataset.region = r.name;
      cell(row, r.name); cell(row, r.state); cell(row, r.design);
      cell(row, holders.get(r.name)).className = "holder";
      cell(row, r.service_id); cell(row, r.module); cell(row, r.resources.slices, true);
    });
    fill("statistics", stats.filter(s => s !== null), (row, s) => {
      cell(row, s.service_id + " " + s.interface); cell(row, s.tier);
      cell(row, s.total.calls, true); cell(row, fixed(s.rate_per_s, 1), true);
      cell(row, fixed(s.total.mean_us, 1), true); cell(row, fixed(s.total.p50_us, 1), true);
      cell(row, fixed(s.total.p99_us, 1), true); cell(row, s.inflight, true);
    });
    fill("juggles", juggles.reverse(), (row, j) => {
      cell(row, j.number, true); cell(row, clockTime(j.seen_at));
      cell(row, j.to_hardware); cell(row, j.to_software.join(", ")); cell(row, j.region);
      cell(row, fixed(j.reconfiguration_ms, 3), true); cell(row, fixed(j.bridge_ms, 3), true);
      cell(row, fixed(j.overhead_us, 1), true);
    });
    status("updated " + new Date().toLocaleTimeString(), false);
  } catch (err) {
    status("cannot reach the runtime: " + err.message, true);
  } finally {
    refreshing = false;
  }
}
refresh();
setInterval(refresh, 1000);
</script>
</body>
</html>
"""
)
