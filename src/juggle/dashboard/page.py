"""The dashboard's single HTML page: self-contained (no external assets), it polls the JSON API.

The page shows a workload switch, services (with buttons to move each between tiers), a live
chart of throughput (calls/s per service and tier, measured: derived from two samples of
``GET /api/live`` a second apart), a timeline of which service held each fabric region over
the last samples, regions, the measured call statistics of every service and the last juggles
with their modeled and measured figures. Charts are inline SVG drawn by the page's own script.
It builds every cell and label with ``textContent``, so names coming from modules are never
parsed as HTML.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>juggle dashboard</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; font-size: .9em; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.kind { color: #666; font-size: .8em; }
#status { color: #666; font-size: .85em; }
.error { color: #b00; }
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
<p><button id="workload" onclick="toggleWorkload()">workload: ...</button>
<span id="workload-status"></span></p>
<p>focus: <span id="focus-buttons"></span> <span id="focus-status" class="kind"></span></p>
<h2>services</h2>
<table id="services"><thead><tr>
<th>id</th><th>interface</th><th>tier</th><th>region</th><th>module</th><th>consumers</th>
<th>move to</th></tr></thead><tbody></tbody></table>
<h2>throughput <span class="kind">(calls/s per service and tier, measured, last
<span class="window">60</span> s)</span></h2>
<svg id="throughput" class="chart" width="640" height="180" viewBox="0 0 640 180"
  role="img" aria-label="throughput per service and tier"></svg>
<div id="throughput-legend" class="legend"></div>
<div class="kind">line: solid hardware, dashed native, dotted software</div>
<h2>region occupancy <span class="kind">(which service held each region, last
<span class="window">60</span> s)</span></h2>
<svg id="occupancy" class="chart" width="640" height="40" viewBox="0 0 640 40"
  role="img" aria-label="region occupancy timeline"></svg>
<div id="occupancy-legend" class="legend"></div>
<h2>regions</h2>
<table id="regions"><thead><tr>
<th>region</th><th>state</th><th>design</th><th>service</th><th>module</th><th>slices</th>
</tr></thead><tbody></tbody></table>
<h2>call statistics <span class="kind">(measured, wall clock of the host)</span></h2>
<table id="statistics"><thead><tr>
<th>service</th><th>tier</th><th>calls</th><th>calls/s</th><th>mean &micro;s</th>
<th>p50 &micro;s</th><th>p99 &micro;s</th><th>in flight</th></tr></thead><tbody></tbody></table>
<h2>last juggles</h2>
<table id="juggles"><thead><tr>
<th>to hardware</th><th>to software</th><th>region</th>
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
async function setTier(id, tier) {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";
  const response = await fetch("/api/services/" + id + "/tier", {
    method: "POST",
    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
    body: JSON.stringify({tier: tier})});
  const body = await response.json();
  document.getElementById("notice").textContent = response.ok ? "" : "error: " + body.error;
  refresh();
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
let workloadRunning = false;
async function toggleWorkload() {
  await post("/api/workload", {on: !workloadRunning});
  refresh();
}
function showWorkload(w) {
  workloadRunning = w.running;
  document.getElementById("workload").textContent =
    w.running ? "stop the workload" : "start the workload";
  const calls = Object.entries(w.calls).map(([c, n]) => c + " " + n).join(", ");
  document.getElementById("workload-status").textContent =
    (w.running ? "running: " : "stopped: ") + (calls || "no calls") +
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

// -- live charts: inline SVG, one sample of /api/live a second --------------------------
const SVG = document.getElementById("throughput").namespaceURI;  // the SVG namespace
const WINDOW = 60;            // samples kept (one a second)
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const DASH = {hardware: "", native: "6 3", software: "2 3"};
let lastLive = null;          // the previous sample of /api/live
const rateHistory = [];       // per interval: Map "service/tier" -> calls/s
const occupancy = [];         // per sample: Map region -> {service_id, module, state}
const seriesNames = new Map(); // "service/tier" -> label
function svgEl(name, attrs) {
  const el = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}
function colour(serviceId) { return PALETTE[(Number(serviceId) - 1) % PALETTE.length]; }
function pushBounded(list, item) {
  list.push(item);
  while (list.length > WINDOW) list.shift();
}
function takeSample(live) {
  const calls = new Map();
  for (const s of live.services) {
    for (const [tier, n] of Object.entries(s.calls)) {
      const key = s.service_id + "/" + tier;
      calls.set(key, n);
      seriesNames.set(key, s.service_id + " " + s.interface.split(".").pop() + " " + tier);
    }
  }
  if (lastLive !== null && live.time_s > lastLive.time_s) {
    const span = live.time_s - lastLive.time_s;
    const rates = new Map();
    for (const [key, n] of calls) {
      rates.set(key, Math.max(0, n - (lastLive.calls.get(key) || 0)) / span);
    }
    pushBounded(rateHistory, rates);
  }
  lastLive = {time_s: live.time_s, calls: calls};
  const held = new Map();
  for (const r of live.regions) held.set(r.name, r);
  pushBounded(occupancy, held);
  drawThroughput();
  drawOccupancy(live.regions.map(r => r.name));
}
function drawThroughput() {
  const svg = document.getElementById("throughput");
  const legend = document.getElementById("throughput-legend");
  const W = 640, H = 180, left = 46, top = 8, bottom = 18;
  const keys = [...new Set(rateHistory.flatMap(m => [...m.keys()]))].sort();
  let max = 0;
  for (const m of rateHistory) for (const v of m.values()) max = Math.max(max, v);
  max = max > 0 ? max * 1.1 : 1;
  svg.replaceChildren();
  const plotH = H - top - bottom, plotW = W - left - 6;
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
  axis.textContent = "now";
  svg.appendChild(axis);
  const x0 = svgEl("text", {x: left, y: H - 4});
  x0.textContent = "-" + WINDOW + " s";
  svg.appendChild(x0);
  legend.replaceChildren();
  const step = plotW / (WINDOW - 1);
  const offset = WINDOW - rateHistory.length;
  for (const key of keys) {
    const [service, tier] = key.split("/");
    const values = rateHistory.map(m => m.get(key) || 0);
    const points = values.map((v, i) =>
      fixed(left + (offset + i) * step, 1) + "," + fixed(top + plotH - v / max * plotH, 1));
    const line = svgEl("polyline", {points: points.join(" "), fill: "none",
      stroke: colour(service), "stroke-width": tier === "hardware" ? 2.5 : 1.5,
      "stroke-dasharray": DASH[tier] || ""});
    line.dataset.service = service;
    line.dataset.tier = tier;
    line.dataset.points = values.length;
    line.dataset.last = values.length ? values[values.length - 1] : 0;
    svg.appendChild(line);
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour(service);
    if (tier !== "hardware") swatch.style.opacity = tier === "native" ? "0.6" : "0.3";
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(
      seriesNames.get(key) + ": " + fixed(line.dataset.last, 1) + " calls/s"));
    legend.appendChild(item);
  }
}
function drawOccupancy(regionNames) {
  const svg = document.getElementById("occupancy");
  const legend = document.getElementById("occupancy-legend");
  const W = 640, left = 46, rowH = 18, gap = 4;
  const H = Math.max(1, regionNames.length) * (rowH + gap) + gap;
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.replaceChildren();
  const cellW = (W - left - 6) / WINDOW;
  const offset = WINDOW - occupancy.length;
  const seen = new Map();
  regionNames.forEach((name, row) => {
    const y = gap + row * (rowH + gap);
    const label = svgEl("text", {x: left - 4, y: y + rowH - 5, "text-anchor": "end"});
    label.textContent = name;
    svg.appendChild(label);
    occupancy.forEach((held, i) => {
      const r = held.get(name);
      const sid = r ? r.service_id : null;
      const busy = r && sid === null && r.state !== "EMPTY";
      const rect = svgEl("rect", {x: fixed(left + (offset + i) * cellW, 2), y: y,
        width: fixed(cellW + 0.3, 2), height: rowH,
        fill: sid !== null ? colour(sid) : busy ? "#888" : "#eee"});
      rect.dataset.region = name;
      rect.dataset.service = sid === null ? "" : sid;
      const title = svgEl("title", {});
      title.textContent = name + ": " + (sid !== null ? "service " + sid + " (" +
        (r.module || "?") + ")" : r ? r.state.toLowerCase() : "unknown");
      rect.appendChild(title);
      svg.appendChild(rect);
      if (sid !== null) seen.set(sid, r.module);
    });
  });
  legend.replaceChildren();
  for (const [sid, module] of [...seen].sort((a, b) => a[0] - b[0])) {
    const item = document.createElement("span");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colour(sid);
    item.appendChild(swatch);
    item.appendChild(document.createTextNode("service " + sid + " (" + (module || "?") + ")"));
    legend.appendChild(item);
  }
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;     // a slow answer: skip this tick rather than pile up
  refreshing = true;
  try {
    const [services, regions, juggles, workload, live] = await Promise.all([
      getJson("/api/services"), getJson("/api/regions"), getJson("/api/juggles?limit=10"),
      getJson("/api/workload"), getJson("/api/live")]);
    showWorkload(workload);
    showFocus(live, services);
    takeSample(live);
    const stats = await Promise.all(services.map(
      s => getJson("/api/services/" + s.service_id + "/statistics").catch(() => null)));
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
    fill("regions", regions, (row, r) => {
      cell(row, r.name); cell(row, r.state); cell(row, r.design);
      cell(row, r.service_id); cell(row, r.module); cell(row, r.resources.slices, true);
    });
    fill("statistics", stats.filter(s => s !== null), (row, s) => {
      cell(row, s.service_id + " " + s.interface); cell(row, s.tier);
      cell(row, s.total.calls, true); cell(row, fixed(s.rate_per_s, 1), true);
      cell(row, fixed(s.total.mean_us, 1), true); cell(row, fixed(s.total.p50_us, 1), true);
      cell(row, fixed(s.total.p99_us, 1), true); cell(row, s.inflight, true);
    });
    fill("juggles", juggles.reverse(), (row, j) => {
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
